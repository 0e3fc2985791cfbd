// Package admin serves the admin listener (docs/operations.md#admin-listener): /healthz,
// /readyz, /metrics and the records API over the gateway's record.Store (docs/contract.md §5), and
// guards the listener against DNS rebinding (CheckHost). It depends on the store contract, not on
// the request pipeline: what it asks of the gateway that serves the records is Pipeline.
package admin

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemgateway/idemgateway/admin/ui"
	"github.com/idemgateway/idemgateway/problem"

	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// DefaultStoreTimeout bounds each store call of the admin API when Options.StoreTimeout is 0: the
// gateway's own default (gateway.DefaultStoreTimeout).
const DefaultStoreTimeout = 2 * time.Second

// Pipeline is what the records API asks of the gateway that serves the records: *gateway.Gateway
// implements it.
type Pipeline interface {
	// Route returns the route that keeps the records of tool (a route's name, or "route/tool" for
	// a tool of a kind: mcp route), nil when no route in force names it: a record resolved as
	// committed is kept for its ttl.
	Route(tool string) *routes.Route
	// Settled wakes the requests that wait for the record at key (concurrency: wait) once a
	// resolve has settled it.
	Settled(key string)
	// Activity is what the gateway is doing now, for the operator console (GET /v1/activity).
	Activity() Activity
}

// Options configure Handler. Store is required; every other field's zero value is its default.
type Options struct {
	// Store holds the records the API serves.
	Store record.Store
	// Pipeline is the gateway that serves the records. Default: none, so that a resolve keeps a
	// record for routes.DefaultTTL and wakes no waiting request.
	Pipeline Pipeline
	// Token is the bearer token of the records API; "" (the default) asks for none.
	Token string
	// Metrics is what /metrics serves. Default: an empty registry.
	Metrics prometheus.Gatherer
	// StoreTimeout bounds each store call. Default DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Logger receives the records that a listing skips as unreadable. Default: slog.Default().
	Logger *slog.Logger
	// Stopping is closed when the process begins to shut down: /readyz then answers 503
	// shutting-down, so that a load balancer stops sending it requests. Default: never.
	Stopping <-chan struct{}
}

// Handler serves the admin listener (docs/contract.md §1, §5):
//
//	GET    /healthz                          200 while the process runs
//	GET    /readyz                           200 while the store is reachable, fit and takes writes, and its
//	       own safety check (record.SafetyReporter) finds it so, else 503; the store probe runs at
//	       most once a second, shared by concurrent callers (readyz.go); 503 shutting-down once
//	       Options.Stopping is closed
//	GET    /metrics                          Prometheus exposition of Options.Metrics
//	GET    /ui/                              the operator console (package ui): static assets, no token
//	GET    /v1/records/{tenant}/{tool}/{key} the receipt (path segments URL-escaped) with started_at and,
//	       unless committed, resolve_status (the status a resolve as committed stores by
//	       default), 404 if none; ?credential=<credential_scope> on every records path
//	       addresses a credential-scoped key
//	GET    /v1/records/{tenant}/{tool}/{key}/response
//	       the response a committed record replays: status, content type, and its body up to
//	       64 KiB when it is UTF-8 text ({"stored":false} when the record holds none)
//	GET    /v1/records/{tenant}/{tool}/{key}/request
//	       the canonical document of the request that claimed the key, up to 64 KiB of UTF-8 text
//	GET, DELETE /v1/record?tenant=T&tool=X&key=K[&credential=C], and its /response, /request
//	       and /resolve: the same, the record named by the query (a key or tenant "." or "..",
//	       which clients remove from a path, can be named so)
//	GET    /v1/records?state=outcome_unknown[&tenant=T[&tool=X]][&limit=N][&cursor=C]
//	       {"records":[receipt…],"next_cursor":"…"}: the outcome_unknown records, in key order,
//	       limit 1 to 1000 (default 100), from the store's index (no keyspace scan);
//	       &order=oldest: the limit oldest by started_at and their "total", no cursor (reads at
//	       most 10 000 records of the index, "total_capped" when there were more)
//	GET    /v1/activity                      this process's upstream calls in flight and pending
//	       receipts (oldest 100 of each, and their counts), and its decisions per minute over the
//	       last hour
//	DELETE /v1/records/{tenant}/{tool}/{key} removes the record, 204; 404 if none; 409 while a
//	       call is under way (its lease is live) unless ?force=true
//	POST   /v1/records/{tenant}/{tool}/{key}/resolve
//	       settles an outcome_unknown record (or one whose executor's lease lapsed):
//	       {"outcome":"committed","remote_id":"…","remote_url":"…","response_status":201}
//	       stores it as committed (replays then answer response_status, default the route's
//	       first committed code, else 200, with no body); {"outcome":"not_committed"} frees the
//	       key. 200 with the record, or 204. 400 for a remote_url not http(s), control
//	       characters, or anything after the JSON object.
//	       409 when the record is committed, or in progress with a live lease.
//
// When Options.Token is not empty, the records API requires `Authorization: Bearer <token>`,
// compared in constant time; health endpoints never do. A resolve's body must be sent as
// application/json (415 otherwise). Errors are RFC 9457 problems. CheckHost guards the handler
// against DNS rebinding (docs/security.md#admin-listener). opts.Store is required.
func Handler(opts Options) http.Handler { return newAdmin(opts).handler(opts.Token, opts.Metrics) }

// handler routes the admin listener's requests to a.
func (a *admin) handler(token string, metrics prometheus.Gatherer) http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, req *http.Request) {
		var err error
		switch unsafe := record.Safety(a.store); { // the verdict keyed requests are served by
		case a.stopping():
			err = problem.ErrShuttingDown
		case unsafe != nil:
			err = fmt.Errorf("%w: %v", problem.ErrStoreUnavailable, unsafe)
		default:
			err = a.ready(req.Context())
		}
		if err != nil {
			problem.New(err, "", "").Write(w, 1)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ready\n"))
	})
	if metrics == nil {
		metrics = prometheus.NewRegistry()
	}
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	r.Get("/ui", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "ui/") // relative: kept under a proxy that serves the listener under a prefix
		w.WriteHeader(http.StatusMovedPermanently)
	})
	r.Handle("/ui/*", http.StripPrefix("/ui", ui.Handler()))
	r.Group(func(r chi.Router) {
		r.Use(requireBearer(token), requireJSON)
		r.Get("/v1/activity", a.activity)
		r.Get("/v1/records", a.listRecords)
		// A record, named by the path or (/v1/record) by the query: recordKey.
		for _, at := range []string{"/v1/records/{tenant}/{tool}/{key}", "/v1/record"} {
			r.Get(at, a.getRecord)
			r.Delete(at, a.deleteRecord)
			r.Get(at+"/response", a.getResponse)
			r.Get(at+"/request", a.getRequest)
			r.Post(at+"/resolve", a.resolveRecord)
		}
	})
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		err := fmt.Errorf("%w at %s", problem.ErrNoRoute, req.URL.EscapedPath())
		if strings.HasPrefix(req.URL.Path, "/v1/records/") {
			// The likeliest cause: a key (or tenant) holding "/", sent unescaped, which makes
			// more segments than the routes have.
			err = fmt.Errorf("%w: tenant, tool and key are one path segment each; escape a \"/\" in them as %%2F", err)
		}
		problem.New(err, "", "").Write(w, 0)
	})
	return r
}

// admin is the state behind Handler.
type admin struct {
	store        record.Store
	pipeline     Pipeline
	storeTimeout time.Duration
	log          *slog.Logger
	readiness    readiness       // the store probe of /readyz, shared (readyz.go)
	stopped      <-chan struct{} // Options.Stopping; nil: never
	// now is the clock the /readyz probe's result is kept by: time.Now; tests set it.
	now func() time.Time
}

func newAdmin(opts Options) *admin {
	a := &admin{store: opts.Store, pipeline: opts.Pipeline, storeTimeout: opts.StoreTimeout, log: opts.Logger, stopped: opts.Stopping, now: time.Now}
	if a.pipeline == nil {
		a.pipeline = noPipeline{}
	}
	if a.storeTimeout <= 0 {
		a.storeTimeout = DefaultStoreTimeout
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	return a
}

// stopping reports whether the process has begun to shut down (Options.Stopping).
func (a *admin) stopping() bool {
	select {
	case <-a.stopped:
		return true
	default:
		return false
	}
}

// noPipeline is the Pipeline of an admin API without a gateway: no route, nobody waiting.
type noPipeline struct{}

func (noPipeline) Route(string) *routes.Route { return nil }
func (noPipeline) Settled(string)             {}
func (noPipeline) Activity() Activity         { return Activity{} }
