package gateway

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestReadKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		values  []string
		key     string
		present bool
		invalid bool
	}{
		{name: "absent"},
		{name: "raw token", values: []string{"abc-123"}, key: "abc-123", present: true},
		{name: "sf-string", values: []string{`"abc-123"`}, key: "abc-123", present: true},
		{name: "sf-string with escapes", values: []string{`"a\"b\\c"`}, key: `a"b\c`, present: true},
		{name: "raw with inner space", values: []string{"a b"}, key: "a b", present: true},
		{name: "255 bytes", values: []string{strings.Repeat("k", 255)}, key: strings.Repeat("k", 255), present: true},
		{name: "empty", values: []string{""}, present: true, invalid: true},
		{name: "spaces only", values: []string{"   "}, present: true, invalid: true},
		{name: "empty sf-string", values: []string{`""`}, present: true, invalid: true},
		{name: "sf-string of spaces", values: []string{`"  "`}, present: true, invalid: true},
		{name: "256 bytes", values: []string{strings.Repeat("k", 256)}, present: true, invalid: true},
		{name: "not ASCII", values: []string{"clé"}, present: true, invalid: true},
		{name: "control byte", values: []string{"a\x01b"}, present: true, invalid: true},
		{name: "sent twice", values: []string{"a", "a"}, present: true, invalid: true},
		{name: "folded by a proxy", values: []string{"k1, k1"}, present: true, invalid: true},
		{name: "sf-string with a comma", values: []string{`"k1, k1"`}, key: "k1, k1", present: true},
		{name: "unterminated sf-string", values: []string{`"abc`}, present: true, invalid: true},
		{name: "sf-string with parameters", values: []string{`"abc";x=1`}, present: true, invalid: true},
		{name: "sf-string with a bad escape", values: []string{`"a\nb"`}, present: true, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := http.NewRequest(http.MethodPost, "/", nil)
			for _, v := range tt.values {
				r.Header.Add("Idempotency-Key", v)
			}
			key, present, err := readKey(r, "Idempotency-Key")
			if present != tt.present {
				t.Errorf("present = %v, want %v", present, tt.present)
			}
			if tt.invalid {
				if !errors.Is(err, ErrInvalidKey) {
					t.Fatalf("err = %v, want ErrInvalidKey", err)
				}
				return
			}
			if err != nil || key != tt.key {
				t.Fatalf("readKey = %q, %v; want %q", key, err, tt.key)
			}
		})
	}
}
