package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// identity is what the identify phase reads of one request under one route: who asks, which
// operation it is (the idempotency key and its scope), and which effect (the fingerprint).
type identity struct {
	// tenant and actor say who asks (admit): with clients, the credential's; without, the
	// headers'. actor is "" when none is said.
	tenant, actor string
	// client is the client the request authenticated as, and caller who called (principal);
	// both "" without clients.
	client, caller string
	// principal is who the request authenticated as, kept so that a second admit of the same
	// request (a tool call's, under its tool's route) does not verify its credential again.
	principal *auth.Principal
	// key is the idempotency key, set once one is read (also when its scope is then refused, so
	// that the problem names it); keySource is where it came from (header, from or derive) once
	// it is usable, and keyErr says why there is none: it wraps problem.ErrMissingKey, problem.ErrInvalidKey or
	// problem.ErrInvalidRequest (a scope credential missing).
	key, keySource string
	keyErr         error
	credential     string // the credential scope of the key, "" when the route has none
	skey           string // the store key of (tenant, tool, key[, credential])

	body []byte             // the request body; nil when it was not read (it streams through)
	req  *canonical.Request // what the fingerprint reads of the request
	doc  []byte             // the canonical document (docs/fingerprint.md)
	fp   string             // its fingerprint, sha256:<64 hex>
}

// keyless reports whether the request goes on without a key: it has none and its route does not
// require one. It is then passed through and nothing is stored (docs/cases.md C08).
func (id *identity) keyless(rt *routes.Route) bool {
	return errors.Is(id.keyErr, problem.ErrMissingKey) && !rt.Key.Required
}

// identify is the identify phase of docs/contract.md §4, written once for every caller: the
// serving path, the fingerprint CLI (Explain) and each protocol front end (Exchange.Identify). In
// order: who asks and the path parameters (admit, which read_only routes run alone), the key
// header, the body (up to max_body_bytes), a key from key.from or key.derive when no header
// carried one, the credential scope, and the canonical document and its fingerprint.
//
// call is a request a front end read and parsed itself (nil: an HTTP route's, whose body is read
// here): a key that no header carries is read by call.Keys, before key.from and key.derive.
// principal is who the request authenticated as when its credential was verified already
// (Exchange.Accept; nil: not yet). gate admits the body's parse (nil: it parses alone, under the
// default value budget, as Explain's do).
//
// A request without a usable key stops before its body is read unless fingerprintKeyless is set
// (Explain sets it: it fingerprints a request whatever its key): id.keyErr says why, and the body
// streams through when the request is keyless. w, when not nil, is told when the body is over
// the limit (http.MaxBytesReader). err is a problem of the request itself (admit's, a body too
// large, too complex or not parseable, an unparseable query, a gateway too busy to parse it),
// wrapping the sentinel of its answer.
func identify(rt *routes.Route, auth *auth.Authenticator, w http.ResponseWriter, r *http.Request, call *Call, principal *auth.Principal, gate *parseGate, fingerprintKeyless bool) (id *identity, err error) {
	id = &identity{principal: principal}
	if err := admit(auth, rt, r, id); err != nil {
		return id, err
	}
	if call != nil { // read: it goes upstream as read, with a key or without
		if int64(len(call.Body)) > rt.MaxBodyBytes { // a tool's bound may be tighter than its front end's route
			return id, fmt.Errorf("%w: %d bytes, tool %s accepts at most %d", problem.ErrBodyTooLarge, len(call.Body), rt.Name, rt.MaxBodyBytes)
		}
		id.body = call.Body
	}
	key, present, err := readKey(r, rt.Key.Header)
	source := KeyFromHeader
	if call != nil && err == nil {
		key, present, source, err = call.readKeys(key, present, "header "+rt.Key.Header)
	}
	if id.keyErr = err; err != nil && !fingerprintKeyless {
		return id, nil
	}
	id.key = key // named in the problems from here on
	derivable := !rt.Key.From.IsZero() || rt.Key.Derive != nil
	switch {
	case present || derivable || id.keyErr != nil:
	case rt.Key.Required:
		id.keyErr = fmt.Errorf("%w: %s is required on route %s", problem.ErrMissingKey, keyPlaces(rt, call), rt.Name)
	default:
		id.keyErr = fmt.Errorf("%w: no %s; route %s passes such a request through and stores nothing", problem.ErrMissingKey, keyPlaces(rt, call), rt.Name)
	}
	if id.keyErr != nil && !fingerprintKeyless {
		return id, nil
	}
	if call == nil {
		if id.body, err = ReadBody(w, r, rt.MaxBodyBytes); err != nil {
			return id, err
		}
	}
	if !present && id.keyErr == nil {
		key, source, id.keyErr = deriveKey(rt, r, id.tenant, id.body)
	}
	if id.keyErr == nil {
		id.keyErr = id.setKey(rt, r, key, source)
	}
	if id.keyErr != nil && !fingerprintKeyless {
		return id, nil
	}
	if id.req, err = canonicalRequest(rt, r, id.body); err != nil {
		return id, err
	}
	if id.doc, err = gatedDocument(r.Context(), gate, rt.Fingerprint, id.req); err != nil {
		return id, encodedBody(r, err)
	}
	id.fp = canonical.Fingerprint(id.doc)
	return id, nil
}

// encodedBody adds to err, a body the fingerprint could not read, that the body came with a
// Content-Encoding (gzip, …), when it did: the gateway reads a body as sent and never decodes it,
// so a compressed JSON body reads as bytes that are not JSON.
func encodedBody(r *http.Request, err error) error {
	ce := r.Header.Get("Content-Encoding")
	if ce == "" || strings.EqualFold(ce, "identity") || !errors.Is(err, problem.ErrInvalidBody) {
		return err
	}
	return fmt.Errorf("%w (the body is sent with Content-Encoding %q, which the gateway does not decode: send it unencoded)", err, ce)
}

// admit is the part of the identify phase that every route runs, read_only routes included: who
// asks (docs/security.md#who-is-calling) and path parameters an upstream could read as another
// path (checkPathParams). It sets id's tenant, actor, client and caller.
//
// With clients (auth not nil), the request must carry a credential one of them accepts (401
// otherwise), and the tenant and actor are the client's: a tenant header, or an actor header where
// the client binds an actor, that says otherwise is a 403. Without clients, the tenant is the
// tenant header's (a trusted component must set it), else routes.DefaultTenant, or a 400
// missing-tenant on a route with tenant_required; the actor the actor header's. Either way a
// tenant or actor header is sent at most once, and a tenant or actor is 1 to
// routes.MaxTenantBytes token characters (400 invalid-request), checked before any store call.
func admit(auth *auth.Authenticator, rt *routes.Route, r *http.Request, id *identity) error {
	p := id.principal // already authenticated (Exchange.Accept)
	if auth != nil && p == nil {
		var err error
		if p, err = auth.Authenticate(r); err != nil {
			return err
		}
		id.principal = p
	}
	if p != nil {
		id.client, id.caller = p.Client, p.Caller
	}
	tenant, err := boundHeader(r, rt.TenantHeader)
	if err != nil {
		return err
	}
	actor, err := boundHeader(r, rt.ActorHeader)
	if err != nil {
		return err
	}
	switch {
	case p != nil:
		if err := routes.CheckTenant(p.Tenant); err != nil {
			return fmt.Errorf("%w: the tenant of client %s: %v", problem.ErrInvalidRequest, p.Client, err)
		}
		if tenant != "" && tenant != p.Tenant {
			return fmt.Errorf("%w: %s names another tenant than client %s's", problem.ErrTenantMismatch, rt.TenantHeader, p.Client)
		}
		id.tenant = p.Tenant
	case tenant != "":
		id.tenant = tenant
	case rt.TenantRequired:
		return fmt.Errorf("%w: header %s is required on route %s", problem.ErrMissingTenant, rt.TenantHeader, rt.Name)
	default:
		id.tenant = routes.DefaultTenant
	}
	id.actor = actor
	if p != nil && p.Actor != "" {
		if err := routes.CheckTenant(p.Actor); err != nil {
			return fmt.Errorf("%w: the actor of client %s: %v", problem.ErrInvalidRequest, p.Client, err)
		}
		if actor != "" && actor != p.Actor {
			return fmt.Errorf("%w: %s names another actor than client %s's", problem.ErrActorMismatch, rt.ActorHeader, p.Client)
		}
		id.actor = p.Actor
	}
	return checkPathParams(rt, r)
}

// boundHeader is the value of the tenant or actor header h: "" when absent, else 1 to
// routes.MaxTenantBytes token characters, sent once. Errors wrap problem.ErrInvalidRequest and never quote
// the value.
func boundHeader(r *http.Request, h string) (string, error) {
	values := r.Header.Values(h)
	if n := len(values); n > 1 {
		return "", fmt.Errorf("%w: %s sent %d times", problem.ErrInvalidRequest, h, n)
	}
	if len(values) == 0 {
		return "", nil
	}
	if err := routes.CheckTenant(values[0]); err != nil {
		return "", fmt.Errorf("%w: %s: %v", problem.ErrInvalidRequest, h, err)
	}
	return values[0], nil
}

// setKey sets the idempotency key and its scope: tenant, tool and key, and with scope.credential
// a hash of the caller's credential (never the credential; credentialScope). A missing
// credential, or one sent twice, is an error wrapping problem.ErrInvalidRequest.
func (id *identity) setKey(rt *routes.Route, r *http.Request, key, source string) error {
	id.key = key
	if h := rt.Scope.CredentialHeader; h != "" {
		creds := r.Header.Values(h)
		switch {
		case len(creds) > 1:
			// The scope would be one credential's, and the upstream might check another.
			return fmt.Errorf("%w: credential header %s sent %d times", problem.ErrInvalidRequest, h, len(creds))
		case len(creds) == 0 || creds[0] == "":
			return fmt.Errorf("%w: keys of route %s are scoped by the credential in %s, and it is missing", problem.ErrInvalidRequest, rt.Name, h)
		}
		id.credential = credentialScope(h, creds[0])
	}
	var scope record.ToolScope
	if rt.Tool != nil {
		scope = rt.Tool.Scope // escaped once: the name of a tool's route holds a "/"
	} else {
		scope = record.NewToolScope(rt.Name) // a route of the file: its name has nothing to escape
	}
	id.skey = scope.Key(id.tenant, key, id.credential)
	id.keySource = source
	return nil
}

// canonicalRequest is what the fingerprint reads of r. A query string that does not parse (a bad
// escape, a ';') or a Content-Type sent twice is refused: the gateway and the upstream could read
// such a request differently. Errors wrap problem.ErrInvalidRequest.
func canonicalRequest(rt *routes.Route, r *http.Request, body []byte) (*canonical.Request, error) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %v", problem.ErrInvalidRequest, err)
	}
	if n := len(r.Header.Values("Content-Type")); n > 1 {
		return nil, fmt.Errorf("%w: Content-Type sent %d times", problem.ErrInvalidRequest, n)
	}
	return &canonical.Request{
		Tool:       rt.Name,
		Method:     r.Method,
		PathParams: routes.PathParams(r),
		Query:      query,
		Header:     r.Header,
		Body:       body,
	}, nil
}

// ReadBody reads the whole body of r, up to limit bytes (a route's max_body_bytes); w, when not
// nil, is told when it is over (http.MaxBytesReader). Errors wrap problem.ErrBodyTooLarge, or
// problem.ErrInvalidBody when the body breaks off. A front end reads its requests' bodies with it.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if err := declaredTooLarge(r, limit); err != nil {
		return nil, err
	}
	body, err := readSized(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, fmt.Errorf("%w: more than %d bytes", problem.ErrBodyTooLarge, limit)
	case err != nil:
		return nil, fmt.Errorf("%w: reading it failed: %v", problem.ErrInvalidBody, err)
	}
	return body, nil
}

// readSized reads src to its end, declared the length it says it has (a Content-Length; -1 when
// unknown). Sized from declared up to preallocMax, the buffer is allocated once (io.ReadAll grows
// it by doubling from 512 bytes); bytes.MinRead spare bytes let a read see the end without growing
// it. Past preallocMax it doubles as bytes arrive, a declared length alone, with nothing behind
// it, must not hold memory, but never past the declared length: a 1 MiB body allocates 2 MiB in
// all, not 4 (docs/security.md#resource-limits). Requests' bodies and upstreams' answers are read
// with it.
func readSized(src io.Reader, declared int64) ([]byte, error) {
	body := make([]byte, 0, min(max(declared, 0), preallocMax)+bytes.MinRead)
	var err error
	for err == nil {
		if len(body) == cap(body) {
			grown := 2 * cap(body)
			if declared > 0 {
				grown = max(min(grown, int(declared)+bytes.MinRead), len(body)+bytes.MinRead)
			}
			body = append(make([]byte, 0, grown), body...) // exactly grown: slices.Grow rounds up
		}
		var n int
		n, err = src.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
	}
	if err == io.EOF {
		err = nil
	}
	return body, err
}

// preallocMax bounds the buffer readSized allocates from a request's Content-Length before the
// body arrives (64 KiB).
const preallocMax = 64 << 10

// declaredTooLarge refuses a body whose Content-Length is over limit before a byte is read.
func declaredTooLarge(r *http.Request, limit int64) error {
	if r.ContentLength > limit {
		return fmt.Errorf("%w: %d bytes, the route accepts at most %d", problem.ErrBodyTooLarge, r.ContentLength, limit)
	}
	return nil
}

// checkPathParams refuses a path parameter that an upstream could read as another path
// (docs/security.md#input-bounds): one whose decoded value holds "/", "\", "?", "#", NUL or
// another control byte, or is not UTF-8 (an overlong "%c0%ae" reads as "." to lax decoders), or
// that is "." or ".." once its ";" parameters are removed ("..;x", which Tomcat resolves). A
// trailing wildcard ("*") spans segments: each is checked. Parameters the route names in
// opaque_path_params are not checked. Errors wrap problem.ErrInvalidRequest.
func checkPathParams(rt *routes.Route, r *http.Request) error {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return nil
	}
	for i, name := range rc.URLParams.Keys {
		if slices.Contains(rt.OpaquePathParams, name) {
			continue
		}
		segments := []string{rc.URLParams.Values[i]}
		if name == "*" {
			segments = strings.Split(segments[0], "/")
		}
		for _, seg := range segments {
			if r.URL.RawPath != "" { // chi matched the escaped path (see pathParams)
				seg, _ = url.PathUnescape(seg) // RawPath is valid escaping: no error
			}
			if why := badSegment(seg); why != "" {
				return fmt.Errorf("%w: path parameter %s %s; a route may allow it with opaque_path_params", problem.ErrInvalidRequest, name, why)
			}
		}
	}
	return nil
}

// badSegment says what makes the decoded path segment s unsafe to forward, or "".
func badSegment(s string) string {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/', c == '\\', c == '?', c == '#':
			return fmt.Sprintf("holds %q", c)
		case c < 0x20 || c == 0x7f:
			return fmt.Sprintf("holds the control byte %#02x", c)
		}
	}
	if !utf8.ValidString(s) {
		return "is not UTF-8"
	}
	if name, _, _ := strings.Cut(s, ";"); name == "." || name == ".." {
		return "is a dot-segment once its ';' parameters are removed"
	}
	return ""
}
