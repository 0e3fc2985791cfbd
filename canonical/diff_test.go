package canonical

import (
	"slices"
	"strings"
	"testing"
)

func TestDifferingFields(t *testing.T) {
	t.Parallel()
	const base = `{"body":{"/amount":"10.00","/customer":{"id":"C-1","tier":"gold"}},"headers":{"x-account":["a"]},"method":"POST","path":{"org":"acme"},"query":{"dry_run":["1"]},"tool":"refund"}`
	tests := []struct {
		name  string
		a, b  string
		limit int
		want  []string
	}{
		{"equal", base, base, 0, nil},
		{"C05: an included member", base, `{"body":{"/amount":"99.00","/customer":{"id":"C-1","tier":"gold"}},"headers":{"x-account":["a"]},"method":"POST","path":{"org":"acme"},"query":{"dry_run":["1"]},"tool":"refund"}`, 0,
			[]string{"/body/~1amount"}},
		{"leaf-most in objects", base, `{"body":{"/amount":"10.00","/customer":{"id":"C-2","tier":"gold"}},"headers":{"x-account":["a"]},"method":"POST","path":{"org":"acme"},"query":{"dry_run":["1"]},"tool":"refund"}`, 0,
			[]string{"/body/~1customer/id"}},
		{"query, header, path, method, tool", base, `{"body":{"/amount":"10.00","/customer":{"id":"C-1","tier":"gold"}},"headers":{"x-account":["b"]},"method":"PUT","path":{"org":"other"},"query":{},"tool":"refund2"}`, 0,
			[]string{"/headers/x-account", "/method", "/path/org", "/query/dry_run", "/tool"}},
		{"member on one side only", `{"body":{"a":1}}`, `{"body":{"a":1,"b":null}}`, 0, []string{"/body/b"}},
		{"arrays named whole", `{"body":{"l":[1,2,{"a":1}]}}`, `{"body":{"l":[1,2,{"a":2}]}}`, 0, []string{"/body/l"}},
		{"object against scalar", `{"body":{"a":1}}`, `{"body":null}`, 0, []string{"/body"}},
		{"names escaped", `{"body":{"a/b":1,"c~d":1}}`, `{"body":{"a/b":2,"c~d":2}}`, 0, []string{"/body/a~1b", "/body/c~0d"}},
		{"limit", base, `{"body":{},"headers":{},"method":"GET","path":{},"query":{},"tool":"x"}`, 3,
			[]string{"/body/~1amount", "/body/~1customer", TruncatedMarker}},
		{"limit exactly met", `{"a":1,"b":1}`, `{"a":2,"b":2}`, 2, []string{"/a", "/b"}},
		{"limit of one", `{"a":1,"b":1}`, `{"a":2,"b":2}`, 1, []string{TruncatedMarker}},
		{"not JSON", `{"a":1}`, `{"a":`, 0, []string{""}},
		{"top-level scalars", `1`, `2`, 0, []string{""}},
		{"same value, other spelling", `{"a":1.0}`, `{"a":1}`, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := DifferingFields([]byte(tt.a), []byte(tt.b), tt.limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("DifferingFields = %q, want %q", got, tt.want)
			}
			if back := DifferingFields([]byte(tt.b), []byte(tt.a), tt.limit); !slices.Equal(back, got) {
				t.Errorf("not symmetric: %q then %q", got, back)
			}
		})
	}
}

// TestDifferingFieldsNeverValues checks that no value of either document shows in the result.
func TestDifferingFieldsNeverValues(t *testing.T) {
	t.Parallel()
	a := `{"body":{"card":"4242424242424242","note":"secret-a"}}`
	b := `{"body":{"card":"4000056655665556","note":"secret-b","extra":"secret-c"}}`
	for _, p := range DifferingFields([]byte(a), []byte(b), 0) {
		for _, v := range []string{"4242", "4000", "secret"} {
			if strings.Contains(p, v) {
				t.Errorf("%q holds the value %q", p, v)
			}
		}
	}
}
