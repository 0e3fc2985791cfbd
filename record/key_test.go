package record_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/record"
)

// TestScopeKeyEncoding pins the store key of a scope byte for byte: records written by earlier
// gateways are stored under it, and must still be found.
func TestScopeKeyEncoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  record.ScopeKey
		want string
	}{
		{"plain", record.ScopeKey{Tenant: "default", Tool: "create_ticket", Key: "k"}, "default/create_ticket/k"},
		{"escaped parts", record.ScopeKey{Tenant: "acme/eu", Tool: "t", Key: "a b/c%{d}"}, "acme%2Feu/t/a%20b%2Fc%25%7Bd%7D"},
		{"kept characters", record.ScopeKey{Tenant: "a:b", Tool: "t", Key: "x@y=z;1,2+3&4$5~6!7*8'9(0)"}, "a:b/t/x@y=z%3B1%2C2+3&4$5~6%217%2A8%279%280%29"},
		{"credential", record.ScopeKey{Tenant: "default", Tool: "t", Key: "k", Credential: "sha256:c0ffee"}, "default/t/k/sha256:c0ffee"},
		{"escaped credential", record.ScopeKey{Tenant: "default", Tool: "t", Key: "k", Credential: "a/b"}, "default/t/k/a%2Fb"},
		{"empty parts", record.ScopeKey{}, "//"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.key.String(); got != tt.want {
				t.Errorf("%+v.String() = %q, want %q", tt.key, got, tt.want)
			}
			if got := record.NewToolScope(tt.key.Tool).Key(tt.key.Tenant, tt.key.Key, tt.key.Credential); got != tt.want {
				t.Errorf("the ToolScope of %+v spells it %q, want %q", tt.key, got, tt.want)
			}
			if back, err := record.ParseScopeKey(tt.want); err != nil || back != tt.key {
				t.Errorf("ParseScopeKey(%q) = %+v, %v; want %+v", tt.want, back, err, tt.key)
			}
		})
	}
}

func TestScopeKeyDoesNotCollide(t *testing.T) {
	t.Parallel()
	scopes := []record.ScopeKey{
		{Tenant: "a/b", Tool: "c", Key: "d"}, {Tenant: "a", Tool: "b/c", Key: "d"}, {Tenant: "a", Tool: "b", Key: "c/d"},
		{Tenant: "a%2Fb", Tool: "c", Key: "d"}, {Tenant: "{x}", Tool: "t", Key: "k"}, {Tenant: "x", Tool: "t", Key: "{k}"},
		{Tenant: "a", Tool: "b", Key: "c", Credential: "d"}, {Tenant: "a", Tool: "b", Key: "c%2Fd"},
	}
	seen := map[string]record.ScopeKey{}
	for _, s := range scopes {
		k := s.String()
		if prev, dup := seen[k]; dup {
			t.Fatalf("%+v and %+v are both stored at %q", s, prev, k)
		}
		if strings.ContainsAny(k, "{}") {
			t.Errorf("%+v is stored at %q, which holds a Redis hash-tag brace", s, k)
		}
		seen[k] = s
	}
}

func TestParseScopeKeyRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a/b", "a/b/c/d/e", "a/b/%zz", "readyz/owner"} {
		if k, err := record.ParseScopeKey(s); err == nil {
			t.Errorf("ParseScopeKey(%q) = %+v, want an error", s, k)
		}
	}
}

// TestScopePrefix: the prefixes of the admin API's list start exactly the keys of their scope.
func TestScopePrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tenant, tool, want string
	}{
		{"", "", ""},
		{"", "t", ""},
		{"acme", "", "acme/"},
		{"acme/eu", "create ticket", "acme%2Feu/create%20ticket/"},
	}
	for _, tt := range tests {
		if got := record.ScopePrefix(tt.tenant, tt.tool); got != tt.want {
			t.Errorf("ScopePrefix(%q, %q) = %q, want %q", tt.tenant, tt.tool, got, tt.want)
		}
		in := record.ScopeKey{Tenant: tt.tenant, Tool: tt.tool, Key: "k"}.String()
		if tt.tenant != "" && !strings.HasPrefix(in, record.ScopePrefix(tt.tenant, tt.tool)) {
			t.Errorf("the key %q of the scope does not start with its prefix", in)
		}
		out := record.ScopeKey{Tenant: tt.tenant + "x", Tool: tt.tool, Key: "k"}.String()
		if tt.tenant != "" && strings.HasPrefix(out, record.ScopePrefix(tt.tenant, tt.tool)) {
			t.Errorf("the key %q of another tenant starts with the prefix", out)
		}
	}
}

func TestCheckKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, err string // err "" for a valid key
	}{
		{"token", "abc-123", ""},
		{"inner space", "a b", ""},
		{"punctuation", `a"b\c,{}~`, ""},
		{"longest", strings.Repeat("k", record.MaxKeyBytes), ""},
		{"empty", "", "empty"},
		{"spaces only", "   ", "empty"},
		{"too long", strings.Repeat("k", record.MaxKeyBytes+1), "256 bytes, longer than 255"},
		{"not ASCII", "clé", "byte 2 is not printable ASCII"},
		{"control byte", "a\x01b", "byte 1 is not printable ASCII"},
		{"DEL", "a\x7f", "byte 1 is not printable ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := record.CheckKey(tt.key)
			if got := fmt.Sprint(err); (tt.err == "" && err != nil) || (tt.err != "" && got != tt.err) {
				t.Errorf("CheckKey(%q) = %v, want %q", tt.key, err, tt.err)
			}
		})
	}
}
