package canonical

import (
	"encoding/json"
	"testing"
)

func TestGolden(t *testing.T) {
	t.Parallel()
	for name, c := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var got []byte
			var err error
			if c.Request != nil {
				got, err = c.compile(t).Document(c.request(t))
			} else {
				got, err = Canonicalize(c.input())
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			fp := Fingerprint(got)
			if string(got) != c.Canonical || fp != c.Fingerprint {
				quoted, _ := json.Marshal(string(got))
				t.Errorf("got\n\t\"canonical\": %s,\n\t\"fingerprint\": %q\nwant\n\t%s\n\t%s", quoted, fp, c.Canonical, c.Fingerprint)
			}
			if again, err := Canonicalize(got); err != nil || string(again) != string(got) {
				t.Errorf("canonical form is not stable: %s, %v", again, err)
			}
		})
	}
}
