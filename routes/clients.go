package routes

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// DefaultCredentialHeader is the header an API key client reads its key from ("Bearer <key>",
// RFC 6750 §2.1), and the one JWT clients always read (docs/security.md#who-is-calling).
const DefaultCredentialHeader = "Authorization"

// JWTAlgorithms are the JWS algorithms (RFC 7518 §3.1, RFC 8037) a JWT client may accept: the
// asymmetric ones. A symmetric key (HS256) would have to be shared with every token issuer, and
// "none" signs nothing. They are the default of JWTClient.Algorithms.
var JWTAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Clients are the callers the gateway knows (docs/security.md#who-is-calling). With them, every
// route refuses a request that carries no credential one of them accepts (401), and the tenant
// and actor of a request are its client's: a tenant or actor header that says otherwise is
// refused (403).
type Clients struct {
	// APIKeys in file order; names are unique across APIKeys and JWT.
	APIKeys []*APIKeyClient
	// JWT in file order; issuers are unique.
	JWT []*JWTClient
}

// APIKeyClient is a caller that presents a key the file knows by its hash.
type APIKeyClient struct {
	// Name names the client in logs and problems; letters, digits, '_', '.' or '-'.
	Name string
	// Header carries the key, canonical form. With DefaultCredentialHeader (the default) the
	// value is "Bearer <key>", the scheme in any case; with another header it is the key itself.
	Header string
	// KeySHA256 is the SHA-256 of the key (the file's key: sha256:<64 hex digits>); the key
	// itself is never in the file. Unique per header.
	KeySHA256 [32]byte
	// Tenant is the client's tenant (1 to MaxTenantBytes token characters); required.
	Tenant string
	// Actor is the client's actor; "" (the default): the request's actor header, as without
	// clients.
	Actor string
}

// JWTClient is a caller that presents a JSON Web Token (RFC 7519) as "Authorization: Bearer"
// (RFC 6750 §2.1), signed by a key of a JSON Web Key Set (RFC 7517). The token must carry iss
// (Issuer), aud (holding Audience), exp, sub and TenantClaim; nbf and iat are checked when present.
type JWTClient struct {
	// Name names the client in logs and problems.
	Name string
	// JWKSFile is the path of the key set, and JWKS its content, read at each load; or
	// JWKSURL is where the gateway fetches it (https, or http to a loopback host), at each load
	// and every hour after. Exactly one of JWKSFile and JWKSURL is set.
	JWKSFile string
	JWKS     []byte
	JWKSURL  *url.URL
	// Issuer is the iss a token must carry; unique among the JWT clients, it picks the client
	// that verifies a token.
	Issuer string
	// Audience is a value the token's aud must hold.
	Audience string
	// Algorithms the signature may use; default JWTAlgorithms.
	Algorithms []string
	// TenantClaim names the claim, a string, that holds the tenant; required.
	TenantClaim string
	// ActorClaim names the claim, a string, that holds the actor; "" (the default): the
	// request's actor header, as without clients.
	ActorClaim string
}

type rawClients struct {
	APIKeys []rawAPIKey `yaml:"api_keys"`
	JWT     []rawJWT    `yaml:"jwt"`
}

type rawAPIKey struct {
	Name   string `yaml:"name"`
	Key    string `yaml:"key"`
	Header string `yaml:"header"`
	Tenant string `yaml:"tenant"`
	Actor  string `yaml:"actor"`
}

type rawJWT struct {
	Name        string   `yaml:"name"`
	JWKSFile    string   `yaml:"jwks_file"`
	JWKSURL     string   `yaml:"jwks_url"`
	Issuer      string   `yaml:"issuer"`
	Audience    string   `yaml:"audience"`
	Algorithms  []string `yaml:"algorithms"`
	TenantClaim string   `yaml:"tenant_claim"`
	ActorClaim  string   `yaml:"actor_claim"`
}

// CheckTenant reports whether s is a valid tenant or actor: 1 to MaxTenantBytes bytes of RFC 9110
// token characters (tchar, §5.6.2). The error says why, without quoting s.
func CheckTenant(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > MaxTenantBytes:
		return fmt.Errorf("%d bytes, longer than %d", len(s), MaxTenantBytes)
	}
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return fmt.Errorf("byte %d is not a token character (RFC 9110 §5.6.2)", i)
		}
	}
	return nil
}

// clients validates the clients section: at least one client, unique names, and each client's
// fields.
func (r *resolver) clients(raw *rawClients) *Clients {
	if len(raw.APIKeys) == 0 && len(raw.JWT) == 0 {
		r.addf("clients", "no client: list api_keys or jwt clients, or remove the section to run without authentication")
		return nil
	}
	c := &Clients{}
	names := make(map[string]string) // name -> the field of its first client
	name := func(at, name string) {
		switch first, dup := names[name]; {
		case name == "":
			r.addf(at+": name", "required")
		case !validName.MatchString(name):
			r.addf(at+": name", "must be letters, digits, '_', '.' or '-'")
		case len(name) > MaxNameBytes:
			r.addf(at+": name", "%d bytes, longer than %d", len(name), MaxNameBytes)
		case dup:
			r.addf(at+": name", "duplicate client name; first used by %s", first)
		default:
			names[name] = at
		}
	}
	identity := func(at, value string, required bool) {
		switch {
		case value == "" && required:
			r.addf(at, "required: the client's tenant")
			return
		case value == "":
			return
		}
		if err := CheckTenant(value); err != nil {
			r.addf(at, "%q: %v", value, err)
		}
	}
	keys := make(map[string]string) // header and hash -> the field of its first client
	for i, raw := range raw.APIKeys {
		at := clientField("api_keys", i, raw.Name)
		name(at, raw.Name)
		k := &APIKeyClient{Name: raw.Name, Header: DefaultCredentialHeader, Tenant: raw.Tenant, Actor: raw.Actor}
		if raw.Header != "" {
			k.Header = http.CanonicalHeaderKey(raw.Header)
			if err := checkHeaderName(raw.Header); err != nil {
				r.add(at+": header", err)
			} else if slices.Contains(managedHeaders, k.Header) {
				r.addf(at+": header", "%q: set by the proxy; a client cannot send its key in it", raw.Header)
			}
		}
		hexSum, ok := strings.CutPrefix(raw.Key, "sha256:")
		sum, err := hex.DecodeString(hexSum)
		switch {
		case raw.Key == "":
			r.addf(at+": key", "required: sha256:<64 hex digits>, the SHA-256 of the key")
		case !ok || err != nil || len(sum) != len(k.KeySHA256):
			// Never quote the value: it may be the key itself, written by mistake.
			r.addf(at+": key", "must be sha256:<64 hex digits>, the SHA-256 of the key; never the key itself")
		default:
			copy(k.KeySHA256[:], sum)
			id := k.Header + " " + string(sum)
			if first, dup := keys[id]; dup {
				r.addf(at+": key", "the same key as %s, in the same header: a key names one client", first)
			} else {
				keys[id] = at
			}
		}
		identity(at+": tenant", raw.Tenant, true)
		identity(at+": actor", raw.Actor, false)
		c.APIKeys = append(c.APIKeys, k)
	}
	issuers := make(map[string]string)
	for i, raw := range raw.JWT {
		at := clientField("jwt", i, raw.Name)
		name(at, raw.Name)
		c.JWT = append(c.JWT, r.jwtClient(at, raw, issuers))
	}
	return c
}

// jwtClient validates one JWT client; issuers maps each issuer seen to the field of its client.
func (r *resolver) jwtClient(at string, raw rawJWT, issuers map[string]string) *JWTClient {
	j := &JWTClient{Name: raw.Name, JWKSFile: raw.JWKSFile, Issuer: raw.Issuer, Audience: raw.Audience,
		Algorithms: raw.Algorithms, TenantClaim: raw.TenantClaim, ActorClaim: raw.ActorClaim}
	switch {
	case raw.JWKSFile == "" && raw.JWKSURL == "":
		r.addf(at, "jwks_file or jwks_url is required: the keys that sign the tokens")
	case raw.JWKSFile != "" && raw.JWKSURL != "":
		r.addf(at+": jwks_url", "set with jwks_file; set one of them")
	case raw.JWKSFile != "":
		data, err := os.ReadFile(raw.JWKSFile)
		if err != nil {
			r.addf(at+": jwks_file", "%s: %w", raw.JWKSFile, errors.Unwrap(err))
			break
		}
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		if err := json.Unmarshal(data, &set); err != nil || len(set.Keys) == 0 {
			r.addf(at+": jwks_file", "%s: not a JSON Web Key Set with keys (RFC 7517 §5)", raw.JWKSFile)
			break
		}
		j.JWKS = data
	default:
		u, err := checkJWKSURL(raw.JWKSURL)
		if err != nil {
			r.addf(at+": jwks_url", "%q: %w", displayURL(raw.JWKSURL), err)
		}
		j.JWKSURL = u
	}
	switch first, dup := issuers[raw.Issuer]; {
	case raw.Issuer == "":
		r.addf(at+": issuer", "required: the iss that tokens must carry")
	case dup:
		r.addf(at+": issuer", "%q: also the issuer of %s; an issuer names one client", raw.Issuer, first)
	default:
		issuers[raw.Issuer] = at
	}
	if raw.Audience == "" {
		r.addf(at+": audience", "required: a value the tokens' aud must hold")
	}
	if raw.TenantClaim == "" {
		r.addf(at+": tenant_claim", "required: the claim that holds the tenant")
	}
	if j.Algorithms == nil {
		j.Algorithms = JWTAlgorithms
	}
	for k, alg := range raw.Algorithms {
		fk := fmt.Sprintf("%s: algorithms[%d]", at, k)
		if first := slices.Index(raw.Algorithms[:k], alg); first >= 0 {
			r.addf(fk, "%q: duplicate of algorithms[%d]", alg, first)
		} else if !slices.Contains(JWTAlgorithms, alg) {
			r.addf(fk, "%q: not an asymmetric JWS algorithm (want one of %s)", alg, strings.Join(JWTAlgorithms, ", "))
		}
	}
	if raw.Algorithms != nil && len(raw.Algorithms) == 0 {
		r.addf(at+": algorithms", "empty: no token could be verified; leave it out for the default")
	}
	return j
}

// checkJWKSURL parses raw as the URL of a key set: https, or http to a loopback host (a sidecar,
// a test), since a key set fetched in the clear can be swapped on the way.
func checkJWKSURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, errors.New("scheme must be https")
	case u.Host == "":
		return nil, errors.New("must have a host")
	case u.User != nil:
		return nil, errors.New("must not hold credentials")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, errors.New("must not have a fragment")
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return nil, errors.New("http only to a loopback host; use https")
	}
	return u, nil
}

// loopback reports whether host is localhost or a loopback IP address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// clientField names client i of a list in field paths: `clients.api_keys[0] "billing"`.
func clientField(list string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("clients.%s[%d]", list, i)
	}
	return fmt.Sprintf("clients.%s[%d] %q", list, i, name)
}
