package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/routes"
)

// routeTable is one loaded routes file: its router (wrapped in the server span) and its routes by
// tool name. A request keeps the table it started with, so a reload never changes the rules of a
// request under way.
type routeTable struct {
	handler http.Handler
	routes  map[string]*routes.Route
	auth    *auth.Authenticator // the file's clients; nil without
}

// Reload puts cfg's routes and clients in force for the requests that start after it returns;
// requests under way finish under the routes they started with. Records, metrics and the upstream
// connection pools are kept. cfg must come from routes.Load or routes.Parse (already validated); a
// nil cfg, one without routes, or one whose JWT clients' key sets cannot be read or fetched is
// refused and the routes in force stay.
func (g *Gateway) Reload(cfg *routes.Config) error {
	if cfg == nil || len(cfg.Routes) == 0 {
		return errors.New("gateway: no routes")
	}
	for _, rt := range cfg.Routes {
		if rt.Kind != routes.KindHTTP && rt.Kind != "" && g.fronts[rt.Kind] == nil {
			return fmt.Errorf("gateway: route %s: no front end serves kind %s (Options.Fronts)", rt.Name, rt.Kind)
		}
	}
	auth, err := auth.New(cfg.Clients, g.log)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	r := chi.NewRouter()
	var methods []string // of the routes, in file order, once each
	for _, rt := range cfg.Routes {
		for _, m := range rt.Methods() {
			if !slices.Contains(methods, m) {
				methods = append(methods, m)
			}
		}
	}
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		g.refuseUnrouted(w, req, fmt.Errorf("%w matches %s %s", problem.ErrNoRoute, req.Method, req.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 lists the methods the path has routes for.
		var allow []string
		for _, m := range methods {
			if r.Match(chi.NewRouteContext(), m, routingPath(req)) {
				allow = append(allow, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		g.refuseUnrouted(w, req, fmt.Errorf("%w: no route for %s %s", problem.ErrMethodNotAllowed, req.Method, req.URL.Path))
	})
	t := &routeTable{routes: make(map[string]*routes.Route, len(cfg.Routes)), auth: auth}
	for _, rt := range cfg.Routes {
		t.routes[rt.Name] = rt
		for _, m := range rt.Methods() {
			chi.RegisterMethod(m) // a no-op for the standard methods; chi panics on others
			r.Method(m, rt.Path, g.routeHandler(rt, auth))
		}
	}
	// A read_only GET answers HEAD too (RFC 9110 §9.3.2), unless a route claims HEAD there.
	for _, rt := range cfg.Routes {
		if rt.Class == routes.ReadOnly && rt.Method == http.MethodGet && !r.Match(chi.NewRouteContext(), http.MethodHead, rt.Path) {
			r.Method(http.MethodHead, rt.Path, g.routeHandler(rt, auth))
		}
	}
	t.handler = r
	if tp := g.opts.TracerProvider; tp != nil {
		// The span is named by method here and renamed "METHOD /route/pattern" once a route
		// matches: raw paths would give span names without bound.
		t.handler = otelhttp.NewHandler(r, "idemgateway", otelhttp.WithTracerProvider(tp),
			otelhttp.WithSpanNameFormatter(func(_ string, req *http.Request) string { return req.Method }))
	}
	for _, f := range g.fronts {
		f.Reload(cfg)
	}
	if old := g.table.Swap(t); old != nil {
		old.auth.Close() // requests under way keep the keys it fetched
	}
	return nil
}

// Route returns the route in force that keeps the records of tool: a route's name, or "route/tool"
// on a route of many tools (routes.Route.ToolRoute), with the settings the tool's calls run under;
// nil when none names it. The admin API resolves a record under it (admin.Pipeline).
func (g *Gateway) Route(tool string) *routes.Route { return g.table.Load().route(tool) }

func (t *routeTable) route(tool string) *routes.Route {
	if rt := t.routes[tool]; rt != nil {
		return rt
	}
	name, toolName, ok := strings.Cut(tool, "/")
	if rt := t.routes[name]; ok && rt != nil {
		return rt.ToolRoute(toolName)
	}
	return nil
}

// routingPath is the path chi routes r by: the escaped path when the URL has one (see pathParams).
func routingPath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}
