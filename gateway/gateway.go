// Package gateway is the HTTP core of idemgateway: it matches a request to an allow-listed route,
// reads its idempotency key, computes its effect fingerprint, asks the Store what to do, and then
// executes the upstream call once, replays the stored receipt, or refuses (docs/contract.md §4).
//
// Reading order: decide.go is the decision table and the outcome table as two pure functions;
// identify.go reads a request's tenant, key and fingerprint (the identify phase, shared with
// Explain); effect.go runs the table on a request (claim, decide, act); lease.go holds an
// execution's lease; settle.go writes its outcome, retrying while the store fails; respond.go is
// the Responder a protocol answers through, and the HTTP routes' answers; proxy.go makes the
// upstream call. front.go is the seam a front end of another protocol plugs into: package
// mcpfront serves kind: mcp routes through it.
package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// Defaults of Options.
const (
	DefaultStoreTimeout        = 2 * time.Second
	DefaultMaxReceiptBodyBytes = 1 << 20 // 1 MiB
)

// Options tune a Gateway. The zero value is ready to use.
type Options struct {
	// Logger receives one access line per request and every store or upstream fault.
	// Default: slog.Default().
	Logger *slog.Logger
	// Transport makes the upstream calls. Default: NewTransport(). A custom transport must not
	// resend a request once any byte of it may have reached the upstream.
	Transport http.RoundTripper
	// TracerProvider makes the spans of docs/contract.md §6: a server span per request, a client span per
	// upstream call, and a span per store call on the request path. nil (the default): no spans,
	// and neither the handler nor the transport is wrapped in OpenTelemetry instrumentation, which
	// costs even with a no-op provider; an incoming traceparent header still reaches the upstream,
	// forwarded like any other header. The idemgateway command builds its provider from the OTEL_*
	// environment variables (cmd/idemgateway/tracing.go).
	TracerProvider trace.TracerProvider
	// StoreTimeout bounds each store call. Default DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Metrics is the registry the gateway's series are registered on and that the admin
	// listener's /metrics serves. Default: NewRegistry().
	Metrics *prometheus.Registry
	// MaxReceiptBodyBytes bounds the response body kept in a receipt. A committed response with a
	// larger body is still passed to the client whole; its receipt keeps status, headers and
	// remote id, and replays carry no body (record.Receipt.ResponseBodyKept is false).
	// Default DefaultMaxReceiptBodyBytes.
	MaxReceiptBodyBytes int64
	// MaxBodyValues bounds the JSON values of a body (and the document tokens of a GraphQL one)
	// that the gateway fingerprints; a body with more is answered 413 body-too-complex
	// (canonical.Request.MaxValues, docs/fingerprint.md#bounds). Default DefaultMaxBodyValues.
	MaxBodyValues int
	// MaxInflightBytes bounds the memory of the body parses under way, each weighed by
	// canonical.Canonicalizer.MemoryBound; a parse that would go over waits up to ParseWait, then
	// is answered 503 overloaded (docs/security.md#resource-limits). Default DefaultMaxInflightBytes.
	MaxInflightBytes int64
	// ParseWait bounds how long a body parse waits for room under MaxInflightBytes, within the
	// request's own context. Default DefaultParseWait.
	ParseWait time.Duration
	// Fronts make the front ends of the routes of kinds other than http: a routes file with a
	// route of a kind that has none is refused. cmd/idemgateway serves kind: mcp with
	// mcpfront.New.
	Fronts map[routes.Kind]NewFront
}

// Gateway is the proxy handler. Build it with New; it is safe for concurrent use.
type Gateway struct {
	store   record.Store
	log     *slog.Logger
	opts    Options
	metrics *metrics
	tracer  trace.Tracer // child spans of the store calls; nil without Options.TracerProvider
	proxy   *httputil.ReverseProxy
	table   atomic.Pointer[routeTable] // the routes in force; Reload swaps it

	inFlight     sync.Map              // *execution -> struct{}: calls under way, for CutOff
	cutting      atomic.Bool           // CutOff has run: every later execution is cut off as it starts
	churn        *churn                // recent executions, to count keys minted per retry
	ruleSets     ruleSets              // the rules of records made under other rules than their route's now
	waiters      waiters               // duplicates waiting for a record to settle (concurrency: wait)
	settles      settles               // settle writes retried in the background (settle.go)
	decisionRate decisionRate          // decisions per minute over the last hour, for the console (activity.go)
	fronts       map[routes.Kind]Front // the front ends of Options.Fronts (front.go)

	// retryMin and retryMax bound the pauses between a settle's attempts: settleRetryMin and
	// settleRetryMax; tests set them (export_test.go).
	retryMin, retryMax time.Duration

	parses *parseGate // bounds the body parses under way (parsegate.go)

	// now is the clock records' started_at is stamped with, and reconcile.after and tool lists'
	// ttl are measured on: time.Now; tests set it (export_test.go).
	now func() time.Time
}

// New validates opts, builds the router of cfg's routes, and returns the Gateway. cfg must come
// from routes.Load or routes.Parse (already validated); store is where records are kept.
func New(cfg *routes.Config, store record.Store, opts Options) (*Gateway, error) {
	if store == nil {
		return nil, errors.New("gateway: no store")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Transport == nil {
		opts.Transport = NewTransport()
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = DefaultStoreTimeout
	}
	if opts.Metrics == nil {
		opts.Metrics = NewRegistry()
	}
	if opts.MaxReceiptBodyBytes <= 0 {
		opts.MaxReceiptBodyBytes = DefaultMaxReceiptBodyBytes
	}
	if opts.MaxBodyValues <= 0 {
		opts.MaxBodyValues = DefaultMaxBodyValues
	}
	if opts.MaxInflightBytes <= 0 {
		opts.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if opts.ParseWait <= 0 {
		opts.ParseWait = DefaultParseWait
	}
	g := &Gateway{store: store, log: opts.Logger, opts: opts, churn: newChurn(time.Minute, 100_000), now: time.Now,
		retryMin: settleRetryMin, retryMax: settleRetryMax}
	g.metrics = newMetrics(opts.Metrics, g.storeSafety)
	opts.Metrics.MustRegister(newUnknownCollector(g))
	g.fronts = make(map[routes.Kind]Front, len(opts.Fronts))
	for kind, newFront := range opts.Fronts {
		g.fronts[kind] = newFront(g)
	}
	g.parses = newParseGate(&opts, g.metrics)
	transport := opts.Transport
	if tp := opts.TracerProvider; tp != nil {
		g.tracer = tp.Tracer("github.com/idemgateway/idemgateway/gateway")
		// A client span per upstream call, its url.full without query values.
		transport = otelhttp.NewTransport(transport, otelhttp.WithTracerProvider(queryRedacted{tp}))
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      transport,
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   closeOnFailure(g.proxyError),
		BufferPool:     copyBuffers{},
		ErrorLog:       slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}

	if err := g.Reload(cfg); err != nil {
		return nil, err
	}
	g.waiters.poll, g.waiters.watchTimeout = waitPoll, watchTimeout
	g.waiters.bySettle = g.metrics.wakeups.WithLabelValues("settle")
	g.waiters.byNotice = g.metrics.wakeups.WithLabelValues("notice")
	g.waiters.byPoll = g.metrics.wakeups.WithLabelValues("poll")
	if n, ok := store.(record.SettleNotifier); ok {
		g.waiters.notifier = n
		g.waiters.log = opts.Logger
	}
	return g, nil
}

// storeSafety returns the store's verdict on its own fitness to keep records (record.Safety).
func (g *Gateway) storeSafety() error { return record.Safety(g.store) }

// ServeHTTP serves one request of an agent's HTTP tool. A path with a dot-segment ("." or "..",
// escaped or not) is refused before routing: an upstream that resolves it could serve a path no
// route allows.
//
// The connection of a request framed by Transfer-Encoding closes after its answer. net/http reads
// a request that has both Transfer-Encoding and Content-Length by Transfer-Encoding and removes
// Content-Length before a handler sees it, so the gateway cannot tell the two apart, and RFC 9112
// §6.1 requires closing after such a request: a front proxy that framed it by Content-Length would
// otherwise read the rest of the connection differently (docs/security.md#framing).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 {
		w.Header().Set("Connection", "close")
	}
	for seg := range strings.SplitSeq(r.URL.Path, "/") {
		if seg == "." || seg == ".." {
			g.refuseUnrouted(w, r, fmt.Errorf("%w: the path %q has a dot-segment", problem.ErrInvalidRequest, r.URL.Path))
			return
		}
	}
	g.table.Load().handler.ServeHTTP(w, r)
}

// routeHandler serves rt's requests, authenticated by auth (nil: no clients).
func (g *Gateway) routeHandler(rt *routes.Route, auth *auth.Authenticator) http.HandlerFunc {
	serve := g.serveEffect
	switch {
	case g.fronts[rt.Kind] != nil:
		serve = g.fronts[rt.Kind].Serve
	case rt.Class == routes.ReadOnly:
		serve = g.serveReadOnly
	}
	return func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, rt, auth)
	}
}

// EndStreams ends the streams that would hold a graceful shutdown to its deadline, those of its
// front ends (Front.EndStreams; mcpfront: the GET streams of kind: mcp routes, once their POSTs in
// flight have ended). Register it on the proxy listener's server (http.Server.RegisterOnShutdown).
func (g *Gateway) EndStreams() {
	for _, f := range g.fronts {
		f.EndStreams()
	}
}

// Close ends what the gateway runs besides requests: the hourly refreshes of the JWT clients' key
// sets fetched from a URL (docs/security.md#who-is-calling). Requests are still served, tokens
// verified with the keys fetched before. It always returns nil.
func (g *Gateway) Close() error {
	g.table.Load().auth.Close()
	return nil
}

// copyBuffers lends the reverse proxy the 32 KiB buffers it copies response bodies with, which
// it would otherwise allocate per request (httputil.BufferPool).
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (copyBuffers) Get() []byte  { return copyBufferPool.Get().(*[32 << 10]byte)[:] }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put((*[32 << 10]byte)(b)) }

// NewTransport returns the upstream transport the gateway uses by default: keep-alive pools sized
// for a gateway (512 idle connections, 128 per upstream host, against Go's default of 2), bounded
// dial and TLS handshake times, HTTP/2 where the upstream offers it, and proxies from the
// environment (HTTPS_PROXY, NO_PROXY).
//
// Go's transport resends a request whose connection failed if it deems the request replayable:
// a GET, or any request with an Idempotency-Key header and a rewindable body. The gateway gives
// every side-effecting request a body that cannot be rewound, so the transport resends it only when
// it knows that no byte was written (docs/cases.md C11).
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
