package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/problem"
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
				if !errors.Is(err, problem.ErrInvalidKey) {
					t.Fatalf("err = %v, want problem.ErrInvalidKey", err)
				}
				return
			}
			if err != nil || key != tt.key {
				t.Fatalf("readKey = %q, %v; want %q", key, err, tt.key)
			}
		})
	}
}

// TestCredentialSpellings: the credential scope reads an Authorization value as RFC 9110
// §11.6.2 writes it: the scheme in any case and any run of spaces after it are one credential.
// "Bearer <token>" with one space hashes exactly as it always did (the SHA-256 of the header's
// text), so the scopes of stored records keep matching; a value without a space, which may be a
// bare key, and any other header are hashed as sent.
func TestCredentialSpellings(t *testing.T) {
	t.Parallel()
	asSent := func(v string) string {
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:16])
	}
	for _, tc := range []struct {
		name, header, value, sameAs string
	}{
		{"canonical Bearer, as before", "Authorization", "Bearer token-ONE", "Bearer token-ONE"},
		{"lower-case scheme", "Authorization", "bearer token-ONE", "Bearer token-ONE"},
		{"upper-case scheme", "Authorization", "BEARER token-ONE", "Bearer token-ONE"},
		{"two spaces", "Authorization", "Bearer  token-ONE", "Bearer token-ONE"},
		{"a tab", "Authorization", "Bearer\ttoken-ONE", "Bearer token-ONE"},
		{"spaces inside the credentials kept", "Authorization", `digest  username="a b",  realm="r"`, `Digest username="a b",  realm="r"`},
		{"registry spelling", "Authorization", "dpop abc", "DPoP abc"},
		{"a scheme the registry lacks: lower case", "Authorization", "Token abc", "token abc"},
		{"Proxy-Authorization too", "Proxy-Authorization", "basic  dXNlcg==", "Basic dXNlcg=="},
		{"a bare key as sent", "Authorization", "ABC123", "ABC123"},
		{"another header as sent", "X-Api-Key", "Bearer  k", "Bearer  k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got, want := credentialScope(tc.header, tc.value), asSent(tc.sameAs); got != want {
				t.Errorf("credentialScope(%s: %q) = %s, want the hash of %q (%s)", tc.header, tc.value, got, tc.sameAs, want)
			}
		})
	}
	for _, pair := range [][2]string{{"Bearer token-ONE", "Bearer token-one"}, {"abc", "ABC"}, {"Bearer a", "Basic a"}} {
		if credentialScope("Authorization", pair[0]) == credentialScope("Authorization", pair[1]) {
			t.Errorf("%q and %q share a scope: they are different credentials", pair[0], pair[1])
		}
	}
}
