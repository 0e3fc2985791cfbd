// Package auth is who is calling (docs/security.md#who-is-calling): the clients of a routes
// file's clients section, API keys checked by their SHA-256 and JWTs by their signature and
// claims, each naming the tenant (and actor) its requests act for. The gateway admits a request
// on a route with clients only as the Principal its credential names.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/routes"
)

// Settings of the JWT clients (docs/security.md#who-is-calling).
const (
	// jwtLeeway is the clock skew allowed on exp, nbf and iat (RFC 7519 §4.1.4).
	jwtLeeway = 30 * time.Second
	// jwksTimeout bounds one fetch of a key set from its URL.
	jwksTimeout = 10 * time.Second
	// jwksRefresh is how often a key set from a URL is fetched again, so that a key its issuer
	// removes stops verifying.
	jwksRefresh = time.Hour
	// jwksUnknownKID is how often, at most, a token signed with a key the set lacks makes the
	// gateway fetch the set again: a rotated key is picked up at once, and tokens with made-up key
	// ids cost the issuer one fetch a minute.
	jwksUnknownKID = time.Minute
)

// Principal is who a request authenticated as: a client of the routes file's clients section.
type Principal struct {
	Client string // the client's name
	Tenant string
	Actor  string // "" when the client binds none
	// Caller names who called, for the conflicts of another caller: the client, and for a JWT
	// client the token's subject; sha256: and 32 hex digits, so that a record keeps a short value
	// whatever the subject.
	Caller string
}

// Authenticator checks the credential of each request against the clients of one routes file
// (routes.Clients): API keys by the SHA-256 of the key, JWTs by their signature and claims. It is
// safe for concurrent use.
type Authenticator struct {
	// headers are the credential headers the clients read, in file order: a request
	// authenticates with the first of them it carries.
	headers []string
	keys    map[string]map[[32]byte]*routes.APIKeyClient // by header, then by the key's SHA-256
	jwt     map[string]*jwtVerifier                      // by issuer
	stop    context.CancelFunc                           // ends the key sets' refreshes
}

// jwtVerifier verifies the tokens of one JWT client.
type jwtVerifier struct {
	client *routes.JWTClient
	keys   keyfunc.Keyfunc
	parser *jwt.Parser
}

// New builds the Authenticator of c; nil when c is nil (no clients section). It reads each JWT
// client's key set: from its file's content, or fetched from its URL now (an error when the fetch
// fails) and every jwksRefresh after until Close. Refresh failures are logged to log.
func New(c *routes.Clients, log *slog.Logger) (*Authenticator, error) {
	if c == nil {
		return nil, nil
	}
	ctx, stop := context.WithCancel(context.Background())
	a := &Authenticator{keys: make(map[string]map[[32]byte]*routes.APIKeyClient), jwt: make(map[string]*jwtVerifier), stop: stop}
	addHeader := func(h string) {
		if _, ok := a.keys[h]; !ok {
			a.keys[h] = make(map[[32]byte]*routes.APIKeyClient)
			a.headers = append(a.headers, h)
		}
	}
	for _, k := range c.APIKeys {
		addHeader(k.Header)
		a.keys[k.Header][k.KeySHA256] = k
	}
	if len(c.JWT) > 0 {
		addHeader(routes.DefaultCredentialHeader)
	}
	for i, j := range c.JWT {
		keys, err := jwtKeys(ctx, j, log)
		if err != nil {
			stop()
			return nil, fmt.Errorf("clients.jwt[%d] %q: %w", i, j.Name, err)
		}
		a.jwt[j.Issuer] = &jwtVerifier{client: j, keys: keys, parser: jwt.NewParser(
			jwt.WithValidMethods(j.Algorithms),
			jwt.WithIssuer(j.Issuer),
			jwt.WithAudience(j.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(jwtLeeway),
		)}
	}
	return a, nil
}

// jwtKeys reads the key set of j: its file's content, or its URL.
func jwtKeys(ctx context.Context, j *routes.JWTClient, log *slog.Logger) (keyfunc.Keyfunc, error) {
	if j.JWKSURL == nil {
		keys, err := keyfunc.NewJWKSetJSON(json.RawMessage(j.JWKS))
		if err != nil {
			return nil, fmt.Errorf("jwks_file %s: %w", j.JWKSFile, err)
		}
		return keys, nil
	}
	fail := false
	keys, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{j.JWKSURL.String()}, keyfunc.Override{
		Client:                    &http.Client{Timeout: jwksTimeout},
		HTTPTimeout:               jwksTimeout,
		NoErrorReturnFirstHTTPReq: &fail,
		RefreshInterval:           jwksRefresh,
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(jwksUnknownKID), 1),
		// A token with an unknown key id waits for a fetch only when one is allowed within this
		// time; otherwise it is refused at once.
		RateLimitWaitMax: jwksTimeout,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				log.Warn("fetching a JWT client's key set failed; the keys fetched before stay", "client", j.Name, "url", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("jwks_url: fetching the key set: %w", err)
	}
	return keys, nil
}

// Close ends the refreshes of the key sets fetched from URLs; tokens are still verified with the
// keys fetched before. A nil Authenticator does nothing.
func (a *Authenticator) Close() {
	if a != nil {
		a.stop()
	}
}

// Error is a request refused for its credential: a 401 whose WWW-Authenticate carries
// Challenges (RFC 9110 §11.6.1; for Bearer, RFC 6750 §3).
type Error struct {
	err        error // wraps problem.ErrUnauthenticated
	Challenges []string
}

func (e *Error) Error() string { return e.err.Error() }
func (e *Error) Unwrap() error { return e.err }

// Authenticate finds the client of r's credential: the first of the clients' credential headers
// that r carries must hold a credential one of them accepts. A credential header sent twice is an
// error wrapping problem.ErrInvalidRequest; a missing or refused credential an *Error.
func (a *Authenticator) Authenticate(r *http.Request) (*Principal, error) {
	for _, h := range a.headers {
		values := r.Header.Values(h)
		switch len(values) {
		case 0:
			continue
		case 1:
		default:
			return nil, fmt.Errorf("%w: credential header %s sent %d times", problem.ErrInvalidRequest, h, len(values))
		}
		p, err := a.verify(h, values[0])
		if err != nil {
			return nil, a.refuse(fmt.Errorf("%w: %s: %v", problem.ErrUnauthenticated, h, err), true)
		}
		return p, nil
	}
	return nil, a.refuse(fmt.Errorf("%w: no credential; send one in %s", problem.ErrUnauthenticated, strings.Join(a.headers, " or ")), false)
}

// refuse is the *Error of err, with a challenge per credential header: Bearer for
// Authorization, with error="invalid_token" when a credential was sent (RFC 6750 §3.1), and for
// any other header an ApiKey challenge that names it.
func (a *Authenticator) refuse(err error, sent bool) *Error {
	e := &Error{err: err}
	for _, h := range a.headers {
		switch {
		case h == routes.DefaultCredentialHeader && sent:
			e.Challenges = append(e.Challenges, `Bearer realm="idemgateway", error="invalid_token"`)
		case h == routes.DefaultCredentialHeader:
			e.Challenges = append(e.Challenges, `Bearer realm="idemgateway"`)
		default:
			e.Challenges = append(e.Challenges, `ApiKey realm="idemgateway", header="`+h+`"`)
		}
	}
	return e
}

// verify checks the credential value v of header h: an API key of h, or in Authorization a
// Bearer token that is an API key or a JWT.
func (a *Authenticator) verify(h, v string) (*Principal, error) {
	cred := v
	if h == routes.DefaultCredentialHeader {
		scheme, rest := SplitCredentials(v)
		if !strings.EqualFold(scheme, "Bearer") || rest == "" {
			return nil, errors.New("not Bearer credentials (RFC 6750 §2.1)")
		}
		cred = rest
	}
	if k := a.keys[h][sha256.Sum256([]byte(cred))]; k != nil {
		return &Principal{Client: k.Name, Tenant: k.Tenant, Actor: k.Actor, Caller: callerID("key", k.Name)}, nil
	}
	if h != routes.DefaultCredentialHeader || len(a.jwt) == 0 || strings.Count(cred, ".") != 2 {
		return nil, errors.New("no client has this key")
	}
	return a.verifyJWT(cred)
}

// unverified reads a token's claims without checking them, to pick the client whose issuer it
// names; that client's verifier then checks everything.
var unverified = jwt.NewParser()

// verifyJWT verifies token with the JWT client of its issuer, and reads its subject, tenant and
// actor.
func (a *Authenticator) verifyJWT(token string) (*Principal, error) {
	claims := jwt.MapClaims{}
	if _, _, err := unverified.ParseUnverified(token, claims); err != nil {
		return nil, jwtProblem(err)
	}
	iss, _ := claims["iss"].(string)
	v := a.jwt[iss]
	if v == nil {
		return nil, fmt.Errorf("no JWT client has the token's issuer %q", truncate(iss, 64))
	}
	claims = jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, v.keys.Keyfunc); err != nil {
		return nil, jwtProblem(err)
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return nil, errors.New("the token has no sub claim")
	}
	p := &Principal{Client: v.client.Name, Caller: callerID("jwt", v.client.Name, sub)}
	var ok bool
	if p.Tenant, ok = claims[v.client.TenantClaim].(string); !ok {
		return nil, fmt.Errorf("the token has no string claim %q (the client's tenant_claim)", v.client.TenantClaim)
	}
	if c := v.client.ActorClaim; c != "" {
		if p.Actor, ok = claims[c].(string); !ok {
			return nil, fmt.Errorf("the token has no string claim %q (the client's actor_claim)", c)
		}
	}
	return p, nil
}

// jwtProblem says why a token was refused in a few words, without the library's own (which name
// its key store and rate limiter).
func jwtProblem(err error) error {
	for _, k := range []struct {
		err error
		why string
	}{
		{jwt.ErrTokenExpired, "the token is expired"},
		{jwt.ErrTokenNotValidYet, "the token is not valid yet"},
		{jwt.ErrTokenUsedBeforeIssued, "the token was issued in the future"},
		{jwt.ErrTokenInvalidAudience, "the token is not for this audience"},
		{jwt.ErrTokenInvalidIssuer, "the token has another issuer"},
		{jwt.ErrTokenRequiredClaimMissing, "the token has no exp claim"},
		{jwt.ErrTokenSignatureInvalid, "the token's signature or algorithm is refused"},
		{jwt.ErrTokenUnverifiable, "no key of the client's key set can verify the token"},
		{jwt.ErrTokenMalformed, "the token is malformed"},
	} {
		if errors.Is(err, k.err) {
			return errors.New(k.why)
		}
	}
	return errors.New("the token is invalid")
}

// callerID is "sha256:" and the first 128 bits of the SHA-256 of parts, NUL-separated.
func callerID(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// truncate cuts s to at most n bytes, for a message that quotes a value the client chose.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// SplitCredentials splits an Authorization value into its scheme and what follows the spaces and
// tabs after it (RFC 9110 §11.6.2).
func SplitCredentials(v string) (scheme, rest string) {
	i := strings.IndexAny(v, " \t")
	if i < 0 {
		return v, ""
	}
	return v[:i], strings.TrimLeft(v[i:], " \t")
}
