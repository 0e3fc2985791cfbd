package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/dunglas/httpsfv"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// readKey returns the idempotency key carried in header h of r. present is false when the header
// is absent. A value that starts with a double quote is an sf-string (RFC 8941 §3.3.3): `"abc"` is
// the key abc; any other value is taken as the raw token. The key must be valid (record.CheckKey:
// 1 to record.MaxKeyBytes bytes of printable ASCII, not only spaces), and the header must be sent
// once. Errors wrap problem.ErrInvalidKey.
func readKey(r *http.Request, h string) (key string, present bool, err error) {
	values := r.Header.Values(h)
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, fmt.Errorf("%w: header %s sent %d times", problem.ErrInvalidKey, h, len(values))
	}
	key = values[0]
	if strings.HasPrefix(key, `"`) {
		item, perr := httpsfv.UnmarshalItem([]string{key})
		s, isString := item.Value.(string)
		if perr != nil || !isString || (item.Params != nil && len(item.Params.Names()) > 0) {
			return "", true, fmt.Errorf("%w: quoted value is not an RFC 8941 sf-string", problem.ErrInvalidKey)
		}
		key = s
	} else if strings.Contains(key, ",") {
		// A proxy folds a header sent twice into one line joined by commas (RFC 9110 §5.3).
		return "", true, fmt.Errorf("%w: a comma in an unquoted key (the header may have been sent twice and folded); send a key with a comma as an sf-string", problem.ErrInvalidKey)
	}
	if err := record.CheckKey(key); err != nil {
		return key, true, fmt.Errorf("%w: %v", problem.ErrInvalidKey, err)
	}
	return key, true, nil
}

// Where a request's key came from (agent.idempotency.key_source, Exchange.KeySource); a front end
// names its own source (Call.KeySource).
const (
	KeyFromHeader = "header"
	KeyFromFrom   = "from"
	KeyFromDerive = "derive"
)

// keyPlaces names where a request on rt may carry its key: the route's key header, and the places
// in its body a front end reads (call.Keys; nil: an HTTP route's request).
func keyPlaces(rt *routes.Route, call *Call) string {
	if call == nil {
		return "header " + rt.Key.Header
	}
	return call.KeyPlaces()
}

// KeyPlaces names where c may carry its key, for the problem of a missing key: its route's key
// header, then each place of c.Keys.
func (c *Call) KeyPlaces() string {
	places := "header " + c.Route.Key.Header
	for _, k := range c.Keys {
		places += " or " + k.Place
	}
	return places
}

// readKeys reads c's key from its body (c.Keys) after the header's: key and present are what the
// header (named place) held. The first key found is the call's; a place that Agrees and holds
// another is a problem.ErrKeyMismatch, naming the two places and neither key.
func (c *Call) readKeys(key string, present bool, place string) (string, bool, string, error) {
	source := KeyFromHeader
	for _, k := range c.Keys {
		if present && !k.Agrees {
			continue
		}
		v, found, err := k.Read()
		switch {
		case !found:
		case err != nil:
			return v, true, k.Source, err
		case !present:
			key, present, source, place = v, true, k.Source, k.Place
		case v != key:
			return key, true, source, fmt.Errorf("%w: %s holds another key than %s", problem.ErrKeyMismatch, k.Place, place)
		}
	}
	return key, present, source, nil
}

// requestField is the value of one field of a key or reconcile template in a request: its tenant,
// a path parameter, a member of its JSON body, a query parameter or a header. ok is false for a
// body member that is absent, or a source requestField does not know ({key} is the caller's).
func requestField(r *http.Request, tenant string, body []byte, source, name string, p canonical.Pointer) (string, bool) {
	switch source {
	case routes.SourceTenant:
		return tenant, true
	case routes.SourcePath:
		return routes.PathParams(r)[name], true
	case routes.SourceBody:
		return canonical.Lookup(body, p)
	case routes.SourceQuery:
		return r.URL.Query().Get(name), true
	case routes.SourceHeader:
		return r.Header.Get(name), true
	}
	return "", false
}

// deriveKey finds the key of a request that sent no key header: key.from, then key.derive.
// A key read by key.from is checked like a header's; a derived key that would be invalid is
// replaced by its digest (routes.KeyOrDigest). Errors wrap problem.ErrMissingKey or problem.ErrInvalidKey and
// name the field that is missing.
func deriveKey(rt *routes.Route, r *http.Request, tenant string, body []byte) (key, source string, err error) {
	lookup := func(source, name string, p canonical.Pointer) (string, bool) {
		return requestField(r, tenant, body, source, name, p)
	}
	var errs []string
	if from := rt.Key.From; !from.IsZero() {
		if key, ok := lookup(from.Source, from.Name, from.Pointer); ok && key != "" {
			if err := record.CheckKey(key); err != nil {
				return "", "", fmt.Errorf("%w: %v (key.from %s)", problem.ErrInvalidKey, err, from)
			}
			return key, KeyFromFrom, nil
		}
		errs = append(errs, fmt.Sprintf("key.from %s is missing", from))
	}
	if rt.Key.Derive != nil {
		key, err := rt.Key.Derive.Render(lookup)
		if err == nil {
			return key, KeyFromDerive, nil
		}
		errs = append(errs, "key.derive: "+err.Error())
	}
	return "", "", fmt.Errorf("%w: no header %s, and %s", problem.ErrMissingKey, rt.Key.Header, strings.Join(errs, "; "))
}

// credentialScope is the credential part of a key's scope: "sha256:" and the first 128 bits of
// the SHA-256 of the credential in header h, in hex. It tells credentials apart without keeping
// them. In Authorization and Proxy-Authorization the credential is first written canonically
// (canonicalCredentials), so that spellings the upstream reads alike share a scope.
func credentialScope(h, credential string) string {
	if h == "Authorization" || h == "Proxy-Authorization" {
		credential = canonicalCredentials(credential)
	}
	sum := sha256.Sum256([]byte(credential))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// canonicalCredentials writes an Authorization value (RFC 9110 §11.6.2: auth-scheme
// [ 1*SP ( token68 / #auth-param ) ]) canonically: the scheme, which is case-insensitive
// (§11.1), as the IANA registry spells it ("bearer" is Bearer), or in lower case when the
// registry lacks it; then one space and the rest as sent. "Bearer <token>" with one space is
// unchanged, so credential scopes stored before this spelling keep matching (docs/keys.md). A
// value without a space (a bare key, which some APIs take) is unchanged too: it may not be a
// scheme.
func canonicalCredentials(v string) string {
	scheme, rest := auth.SplitCredentials(v)
	if rest == "" {
		return v
	}
	if s, ok := authSchemes[strings.ToLower(scheme)]; ok {
		return s + " " + rest
	}
	return strings.ToLower(scheme) + " " + rest
}

// authSchemes are the HTTP authentication schemes of the IANA registry, by their lower-case name.
var authSchemes = map[string]string{
	"basic": "Basic", "bearer": "Bearer", "concealed": "Concealed", "digest": "Digest", "dpop": "DPoP",
	"gnap": "GNAP", "hoba": "HOBA", "mutual": "Mutual", "negotiate": "Negotiate", "oauth": "OAuth",
	"privatetoken": "PrivateToken", "scram-sha-1": "SCRAM-SHA-1", "scram-sha-256": "SCRAM-SHA-256", "vapid": "vapid",
}
