package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/routes"
)

// Explanation is what the gateway makes of one request under one route, without a store or an
// upstream: what `idemgateway fingerprint` prints.
type Explanation struct {
	// Route is the route's name; for a tools/call on a kind: mcp route, the tool's scope name,
	// route/tool (docs/mcp.md), which records, metrics and the admin API name.
	Route string `json:"route"`
	// Class is the route's class (idempotent or non_idempotent), or, for a tools/call, the one the
	// file gives the tool, else its route's.
	Class routes.Class `json:"class"`
	// Tenant is the request's: with clients, its client's (docs/security.md#who-is-calling).
	Tenant      string          `json:"tenant"`
	Document    json.RawMessage `json:"document"`    // the canonical document (docs/contract.md §3)
	Fingerprint string          `json:"fingerprint"` // sha256:<64 hex>
	// Key is the idempotency key and KeySource where it came from: header, meta (params._meta of
	// a tools/call), from or derive.
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
	// Answer is how the route classes an upstream answer, when one is given (ExplainAnswer).
	Answer *AnswerExplanation `json:"answer,omitempty"`
}

// AnswerExplanation is how a route classes one upstream answer: its outcome class (committed,
// not_committed, unknown) and the body rule that decided it ("" when its status did), as the
// record's detail names it (docs/unknown-outcomes.md#answers-that-say-what-happened).
type AnswerExplanation struct {
	Class string `json:"class"`
	Rule  string `json:"rule,omitempty"`
}

// ExplainAnswer says how the kind: http route named route in cfg classes an executed call's answer
// of status with body (read whole, as the gateway reads a body up to its receipt limit).
func ExplainAnswer(cfg *routes.Config, route string, status int, body []byte) (*AnswerExplanation, error) {
	rt, _ := explained(cfg, route)
	switch {
	case rt == nil:
		return nil, fmt.Errorf("no route named %q", route)
	case rt.Kind != routes.KindHTTP && rt.Kind != "":
		return nil, fmt.Errorf("route %q is of kind %s: its tool calls are classed by their JSON-RPC answers (docs/mcp.md)", route, rt.Kind)
	case status < 200 || status > 599:
		return nil, fmt.Errorf("answer status %d: want 200 to 599", status)
	}
	class, rule := answerClass(status, body, true, rt)
	return &AnswerExplanation{Class: class.String(), Rule: rule}, nil
}

// Explain returns the Explanation of r under the route named route in cfg. r's method and path
// must match the route; its body is read up to the route's max_body_bytes. On a route of another
// kind, readers[kind] reads the call r carries, as its front end would (kind: mcp:
// mcpfront.ReadCall): r is a POST of one tools/call, and route names the route ("tickets": the tool is the body's) or
// the tool ("tickets/create_ticket": the body must call it); the call is explained under its
// tool's route, with the class the file gives the tool, else the route's (a class that trusted
// annotations of the server would give is not known here). With steps, the
// explanation lists what each fingerprint rule did. It runs the serving path's identify phase
// (identify.go), so it says what the gateway would; unlike serving, it fingerprints a request that
// has no usable key, and says why in KeyProblem. With cfg's clients it authenticates r as the
// gateway would: it reads the JWT clients' key sets, fetching those at a URL. Errors: no such
// route, a path that does not match, a key set that cannot be read, what the gateway would answer
// 401, 403 or 400 before the key (problem.ErrUnauthenticated, problem.ErrTenantMismatch, problem.ErrActorMismatch,
// problem.ErrInvalidRequest: a bad tenant or path parameter, a header sent twice), a body too large or not
// parseable where the fingerprint needs it (problem.ErrInvalidBody); on a kind: mcp route, a body that is
// not one JSON-RPC message or whose 2026-07-28 headers do not match it (problem.ErrInvalidBody), a bad
// tool name (problem.ErrInvalidRequest), a body that is no tools/call or calls another tool, a read_only
// tool; a route of a kind that readers has no reader for.
func Explain(cfg *routes.Config, route string, r *http.Request, steps bool, readers map[routes.Kind]CallReader) (*Explanation, error) {
	rt, tool := explained(cfg, route)
	if rt == nil {
		return nil, fmt.Errorf("no route named %q", route)
	}
	read := readers[rt.Kind]
	method := rt.Method
	switch {
	case rt.Kind != routes.KindHTTP && rt.Kind != "" && read == nil:
		return nil, fmt.Errorf("route %q is of kind %s, whose calls no reader was given", route, rt.Kind)
	case read != nil:
		method = http.MethodPost // a front end's route serves several methods; only a POST carries a call
	case rt.Class == routes.ReadOnly:
		return nil, fmt.Errorf("route %q is read_only: it has no fingerprint", route)
	}
	mux := chi.NewRouter()
	chi.RegisterMethod(method)
	mux.Method(method, rt.Path, http.NotFoundHandler())
	rctx := chi.NewRouteContext()
	if r.Method != method || !mux.Match(rctx, method, routingPath(r)) {
		return nil, fmt.Errorf("%s %s does not match route %q (%s %s)", r.Method, r.URL.Path, route, method, rt.Path)
	}
	r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
	auth, err := auth.New(cfg.Clients, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer auth.Close()
	var call *Call
	if read != nil {
		if call, err = read(rt, tool, r); err != nil {
			return nil, err
		}
		rt = call.Route
	}
	id, err := identify(rt, auth, nil, r, call, nil, nil, true)
	if err != nil {
		return nil, err
	}
	e := &Explanation{Route: rt.Name, Class: rt.Class, Tenant: id.tenant, Document: id.doc, Fingerprint: id.fp}
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

// explained returns the route of cfg that name names, and the tool it names on a route of a front
// end's kind ("route/tool"; "" when name is the route's).
func explained(cfg *routes.Config, name string) (*routes.Route, string) {
	for _, rt := range cfg.Routes {
		if rt.Name == name {
			return rt, ""
		}
	}
	if route, tool, ok := strings.Cut(name, "/"); ok {
		for _, rt := range cfg.Routes {
			if rt.Name == route && rt.Kind != routes.KindHTTP {
				return rt, tool
			}
		}
	}
	return nil, ""
}
