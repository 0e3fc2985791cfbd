package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/dunglas/httpsfv"
)

// MaxKeyBytes is the longest idempotency key accepted, in bytes (contract §4).
const MaxKeyBytes = 255

// readKey returns the idempotency key carried in header h of r. present is false when the header
// is absent. A value that starts with a double quote is an sf-string (RFC 8941 §3.3.3): `"abc"` is
// the key abc; any other value is taken as the raw token. The key must be 1 to MaxKeyBytes bytes of
// printable ASCII, not only spaces, and the header must be sent once. Errors wrap ErrInvalidKey.
func readKey(r *http.Request, h string) (key string, present bool, err error) {
	values := r.Header.Values(h)
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, fmt.Errorf("%w: header %s sent %d times", ErrInvalidKey, h, len(values))
	}
	key = values[0]
	if strings.HasPrefix(key, `"`) {
		item, perr := httpsfv.UnmarshalItem([]string{key})
		s, isString := item.Value.(string)
		if perr != nil || !isString || (item.Params != nil && len(item.Params.Names()) > 0) {
			return "", true, fmt.Errorf("%w: quoted value is not an RFC 8941 sf-string", ErrInvalidKey)
		}
		key = s
	}
	switch {
	case strings.TrimSpace(key) == "":
		return "", true, fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return "", true, fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", true, fmt.Errorf("%w: byte %d is not printable ASCII", ErrInvalidKey, i)
		}
	}
	return key, true, nil
}

// scopeKey is the store key of an idempotency key: tenant, tool and key, each URL-escaped (so no
// part can forge another's separator, and no '{' or '}' reaches a Redis hash tag).
func scopeKey(tenant, tool, key string) string {
	return url.PathEscape(tenant) + "/" + url.PathEscape(tool) + "/" + url.PathEscape(key)
}
