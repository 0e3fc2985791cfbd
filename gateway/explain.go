package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/routes"
)

// Explanation is what the gateway makes of one request under one route, without a store or an
// upstream: what `idemgateway fingerprint` prints.
type Explanation struct {
	Route       string          `json:"route"`
	Tenant      string          `json:"tenant"`
	Document    json.RawMessage `json:"document"`    // the canonical document (contract §3)
	Fingerprint string          `json:"fingerprint"` // sha256:<64 hex>
	// Key is the idempotency key and KeySource where it came from: header, from or derive.
	// KeyProblem says why there is none (the 400 the gateway would answer).
	Key        string `json:"key,omitempty"`
	KeySource  string `json:"key_source,omitempty"`
	KeyProblem string `json:"key_problem,omitempty"`
	// CredentialScope is the credential part of the key's scope on a route with scope.credential
	// (the receipt's credential_scope, the admin API's ?credential=); empty on other routes.
	CredentialScope string `json:"credential_scope,omitempty"`
	// Steps say what each fingerprint rule did (included, excluded, defaulted, normalized, set,
	// absent); only when asked for.
	Steps []canonical.Step `json:"steps,omitempty"`
}

// Explain returns the Explanation of r under the route named route in cfg. r's method and path
// must match the route; its body is read up to the route's max_body_bytes. With steps, the
// explanation lists what each fingerprint rule did. Errors: no such route, a path that does not
// match, a tenant header sent more than once (ErrInvalidRequest), a body too large or not
// parseable where the fingerprint needs it (ErrInvalidBody).
//
// It follows serveEffect's identify steps, which it must agree with (TestFingerprintMatchesServing
// in cmd/idemgateway compares the two on every request shape).
func Explain(cfg *routes.Config, route string, r *http.Request, steps bool) (*Explanation, error) {
	var rt *routes.Route
	for _, candidate := range cfg.Routes {
		if candidate.Name == route {
			rt = candidate
		}
	}
	if rt == nil {
		return nil, fmt.Errorf("no route named %q", route)
	}
	if rt.Class == routes.ReadOnly {
		return nil, fmt.Errorf("route %q is read_only: it has no fingerprint", route)
	}
	mux := chi.NewRouter()
	chi.RegisterMethod(rt.Method)
	mux.Method(rt.Method, rt.Path, http.NotFoundHandler())
	rctx := chi.NewRouteContext()
	if r.Method != rt.Method || !mux.Match(rctx, rt.Method, routingPath(r)) {
		return nil, fmt.Errorf("%s %s does not match route %q (%s %s)", r.Method, r.URL.Path, route, rt.Method, rt.Path)
	}
	r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
	body, err := readBody(nil, r, rt.MaxBodyBytes)
	if err != nil {
		return nil, err
	}

	if n := len(r.Header.Values(rt.TenantHeader)); n > 1 {
		return nil, fmt.Errorf("%w: %s sent %d times", ErrInvalidRequest, rt.TenantHeader, n)
	}
	e := &Explanation{Route: rt.Name, Tenant: r.Header.Get(rt.TenantHeader)}
	if e.Tenant == "" {
		e.Tenant = routes.DefaultTenant
	}
	key, present, err := readKey(r, rt.Key.Header)
	source := keyFromHeader
	if err == nil && !present {
		key, source, err = deriveKey(rt, r, e.Tenant, body)
	}
	if h := rt.Scope.CredentialHeader; err == nil && h != "" { // as exchange.setKey
		if cred := r.Header.Get(h); cred != "" {
			e.CredentialScope = credentialScope(cred)
		} else {
			err = fmt.Errorf("%w: keys of route %s are scoped by the credential in %s, and it is missing", ErrInvalidRequest, rt.Name, h)
		}
	}
	if err != nil {
		e.KeyProblem = err.Error()
	} else {
		e.Key, e.KeySource = key, source
	}

	req, err := canonicalRequest(rt, r, body)
	if err != nil {
		return nil, err
	}
	if steps {
		e.Document, e.Steps, err = rt.Fingerprint.Explain(req)
	} else {
		e.Document, err = rt.Fingerprint.Document(req)
	}
	if err != nil {
		return nil, err
	}
	e.Fingerprint = canonical.Fingerprint(e.Document)
	return e, nil
}
