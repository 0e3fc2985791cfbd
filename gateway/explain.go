package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/routes"
)

// Explanation is what the gateway makes of one request under one route, without a store or an
// upstream: what `idemgateway fingerprint` prints.
type Explanation struct {
	Route string `json:"route"`
	// Tenant is the request's: with clients, its client's (docs/security.md#who-is-calling).
	Tenant      string          `json:"tenant"`
	Document    json.RawMessage `json:"document"`    // the canonical document (docs/contract.md §3)
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
// explanation lists what each fingerprint rule did. It runs the serving path's identify phase
// (identify.go), so it says what the gateway would; unlike serving, it fingerprints a request that
// has no usable key, and says why in KeyProblem. With cfg's clients it authenticates r as the
// gateway would: it reads the JWT clients' key sets, fetching those at a URL. Errors: no such
// route, a path that does not match, a key set that cannot be read, what the gateway would answer
// 401, 403 or 400 before the key (ErrUnauthenticated, ErrTenantMismatch, ErrActorMismatch,
// ErrInvalidRequest: a bad tenant or path parameter, a header sent twice), a body too large or not
// parseable where the fingerprint needs it (ErrInvalidBody).
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
	auth, err := newAuthenticator(cfg.Clients, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer auth.close()
	id, err := identify(rt, auth, nil, r, true)
	if err != nil {
		return nil, err
	}
	e := &Explanation{Route: rt.Name, Tenant: id.tenant, Document: id.doc, Fingerprint: id.fp}
	if id.keyErr != nil {
		e.KeyProblem = id.keyErr.Error()
	} else {
		e.Key, e.KeySource, e.CredentialScope = id.key, id.keySource, id.credential
	}
	if steps {
		if e.Document, e.Steps, err = rt.Fingerprint.Explain(id.req); err != nil {
			return nil, err
		}
	}
	return e, nil
}
