package record

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// MaxKeyBytes is the longest idempotency key accepted, in bytes (docs/contract.md §4).
const MaxKeyBytes = 255

// CheckKey returns nil when key is a valid idempotency key: 1 to MaxKeyBytes bytes of printable
// ASCII (0x20 to 0x7E), not only spaces (docs/contract.md §4). Otherwise its error says what is wrong
// ("empty", "256 bytes, longer than 255", "byte 3 is not printable ASCII"), for the caller to wrap.
func CheckKey(key string) error {
	switch {
	case strings.TrimSpace(key) == "":
		return errors.New("empty")
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%d bytes, longer than %d", len(key), MaxKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return fmt.Errorf("byte %d is not printable ASCII", i)
		}
	}
	return nil
}

// ScopeKey names the record of one idempotency key: the key is scoped by tenant and tool and, on
// routes with scope.credential, by the caller's credential, so equal keys of different scopes
// never share a record (docs/contract.md §4). Its String is the key the Store keeps the record under.
type ScopeKey struct {
	Tenant, Tool, Key string
	// Credential is the credential scope ("sha256:…", Receipt.CredentialScope) on routes with
	// scope.credential; empty otherwise.
	Credential string
}

// String returns the store key of k: tenant, tool, key and, when not empty, credential, each
// escaped as a URL path segment (url.PathEscape, RFC 3986 §3.3) and joined by "/", so that no part
// can forge another's separator and no "{" or "}" reaches a Redis hash tag. Records are stored
// under it, so it must not change: a gateway that spelled it otherwise would not find the records
// of earlier ones (TestScopeKeyEncoding pins it).
func (k ScopeKey) String() string {
	return NewToolScope(k.Tool).Key(k.Tenant, k.Key, k.Credential)
}

// ToolScope is a tool's name as the store keys of its records spell it, escaped as
// ScopeKey.String escapes it, for a caller that makes the keys of one tool on every request: the
// name of an MCP tool's route ("route/tool") holds a "/", whose escape would otherwise allocate
// on each call. Make it with NewToolScope; the zero ToolScope is no tool's.
type ToolScope struct{ escaped string }

// NewToolScope returns tool's ToolScope.
func NewToolScope(tool string) ToolScope { return ToolScope{url.PathEscape(tool)} }

// Key returns the store key of key under tenant, s's tool and credential ("": none), as
// ScopeKey.String spells it.
func (s ToolScope) Key(tenant, key, credential string) string {
	k := url.PathEscape(tenant) + "/" + s.escaped + "/" + url.PathEscape(key)
	if credential != "" {
		k += "/" + url.PathEscape(credential)
	}
	return k
}

// ScopePrefix returns the prefix that the store keys of tenant's records start with, and with
// tool not empty, of its records of tool: "tenant/" or "tenant/tool/", escaped as String escapes
// them. It is "" (every key) when tenant is empty, whatever tool is: the keys of one tool across
// tenants share no prefix.
func ScopePrefix(tenant, tool string) string {
	if tenant == "" {
		return ""
	}
	prefix := url.PathEscape(tenant) + "/"
	if tool != "" {
		prefix += url.PathEscape(tool) + "/"
	}
	return prefix
}

// ParseScopeKey returns the ScopeKey whose String is s: its three or four segments, each
// unescaped. A store key that ScopeKey.String cannot have made (another segment count, a bad
// escape) is an error.
func ParseScopeKey(s string) (ScopeKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 && len(parts) != 4 {
		return ScopeKey{}, fmt.Errorf("store key %q: want tenant/tool/key[/credential]", s)
	}
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return ScopeKey{}, fmt.Errorf("store key %q: %v", s, err)
		}
		parts[i] = u
	}
	k := ScopeKey{Tenant: parts[0], Tool: parts[1], Key: parts[2]}
	if len(parts) == 4 {
		k.Credential = parts[3]
	}
	return k, nil
}
