package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// Span attributes of docs/contract.md §6.
var (
	attrTool        = attribute.Key("agent.tool.name")
	attrSideEffect  = attribute.Key("agent.tool.side_effect")
	attrKey         = attribute.Key("agent.idempotency.key")
	attrKeySource   = attribute.Key("agent.idempotency.key_source") // header, from or derive
	attrFingerprint = attribute.Key("agent.idempotency.fingerprint")
	attrDecision    = attribute.Key("agent.idempotency.decision")
	attrRemoteID    = attribute.Key("agent.idempotency.receipt.remote_id")
	attrTenant      = attribute.Key("agent.tenant")
	attrActor       = attribute.Key("agent.actor")
)

// Exchange is the state of one request through the gateway: who asks, what was decided, and, for
// an execution, the owner token and record that the upstream's outcome settles.
type Exchange struct {
	g  *Gateway
	rt *routes.Route
	// label is the tool label of the exchange's metrics: the route's name, or the one a front end
	// gives (Identify), which must take few values: a client must not grow the series by making
	// names up.
	label string
	front Responder           // the protocol's side: how the upstream is called, how answers are written
	auth  *auth.Authenticator // the clients of the route's routes file; nil without
	w     http.ResponseWriter
	r     *http.Request
	span  trace.Span // the server span; a no-op one without Options.TracerProvider
	// traced: span records. Attributes are built only then: a variadic call through the Span
	// interface allocates even on a no-op span.
	traced bool

	identity // who asks, the key and its scope, the fingerprint (identify.go)
	decision string
	prior    *priorRules // the request under the rules of a record made under others (rulesversion.go)

	// Set for an execution under a claimed key; settled once the record's final write started.
	owner     string
	rec       *record.Record
	claimSent time.Time // when the claim (or reclaim) was sent: the lease runs from then at the latest
	settled   bool
	lease     *lease // renews the lease of an execution (lease.go); nil once a settle took it over

	mayHaveSent atomic.Bool  // a connection to the upstream was obtained: bytes may have reached it
	attempts    atomic.Int32 // connections obtained for this request (more than one: a safe resend)

	cancelUpstream context.CancelFunc // ends the upstream exchange's context
	exec           *execution         // the execution under way, which a shutdown may cut off (shutdown.go); nil for none
	deadline       *deadline          // bounds a guarded upstream exchange (deadline.go); nil for a stream
	// stream: an unguarded pass-through of a front end (Stream). Its upstream exchange ends with
	// the client's, and is bounded by streamIdle between reads (idle), not by the timeout; watch
	// sees its answer first.
	stream     bool
	streamIdle time.Duration
	idle       *time.Timer
	watch      func(*http.Response)
	upStart    time.Time // when the upstream request was built
	upStatus   int       // the status of the upstream's response; 0 until one arrives

	start    time.Time
	storeDur time.Duration // time spent in store calls on the request path
	upDur    time.Duration // time from the upstream call to its response headers, or its failure
	status   func() int    // the status written to the client
}

// newExchange begins an Exchange for r, an HTTP route's request (Begin).
func (g *Gateway) newExchange(w http.ResponseWriter, r *http.Request, rt *routes.Route, a *auth.Authenticator) *Exchange {
	return g.Begin(new(Exchange), w, r, rt, a)
}

// Begin begins x, a zero Exchange the caller allocated (alone, or inside a front end's state of
// its own), for r on rt with the clients a, answering with the HTTP responder until Identify names
// another, and returns it. End it with Done.
func (g *Gateway) Begin(x *Exchange, w http.ResponseWriter, r *http.Request, rt *routes.Route, a *auth.Authenticator) *Exchange {
	ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
	x.g, x.rt, x.label, x.front, x.auth, x.w, x.r = g, rt, rt.Name, httpRoute{}, a, ww, r
	x.status = ww.Status
	x.span = trace.SpanFromContext(r.Context())
	x.start = time.Now()
	x.traced = x.span.IsRecording()
	if !x.traced {
		return x
	}
	method := rt.Method
	if method == "" { // a front end's route serves several
		method = r.Method
	}
	x.span.SetName(method + " " + rt.Path)
	x.span.SetAttributes(
		attribute.String("http.route", rt.Path),
		attrTool.String(rt.Name),
		attrSideEffect.Bool(rt.Class != routes.ReadOnly),
	)
	return x
}

// Done ends x: it writes its access line.
func (x *Exchange) Done() { x.logAccess() }

// Accept runs what x's request must pass before a byte of its body is read, and answers it when
// it fails: a protocol upgrade its route does not allow is refused (tunnel.go), and its
// credential verified against the clients of its route (docs/security.md#who-is-calling), 401
// when none accepts it. It reports whether the request may go on; without clients, it may.
func (x *Exchange) Accept() bool {
	if err := upgradeRefused(x.rt, x.r.Header); err != nil {
		x.reject(err)
		return false
	}
	if x.auth == nil || x.principal != nil {
		return true
	}
	p, err := x.auth.Authenticate(x.r)
	if err != nil {
		x.reject(err)
		return false
	}
	x.principal = p
	return true
}

// admit runs the part of the identify phase that every route runs (admit, identify.go) for a
// route that runs no other (read_only, a front end's pass-through), and refuses the request when
// it fails. A credential that Accept verified is not verified again.
func (x *Exchange) admit() bool {
	id := &identity{principal: x.principal}
	err := admit(x.auth, x.rt, x.r, id)
	x.identified(id)
	if err != nil {
		x.reject(err)
		return false
	}
	return true
}

// identified takes what the identify phase read (identify.go), and shows it: the tenant and actor
// on the span once admitted, the key once it is usable, the fingerprint on the span and in
// Idempotency-Fingerprint once computed.
func (x *Exchange) identified(id *identity) {
	x.identity = *id
	if x.tenant != "" && x.traced {
		x.span.SetAttributes(attrTenant.String(x.tenant))
	}
	if x.actor != "" && x.traced {
		x.span.SetAttributes(attrActor.String(x.actor))
	}
	if x.keySource != "" && x.traced {
		x.span.SetAttributes(attrKey.String(x.key), attrKeySource.String(x.keySource))
	}
	if x.fp != "" {
		x.w.Header().Set("Idempotency-Fingerprint", x.fp)
		if x.traced {
			x.span.SetAttributes(attrFingerprint.String(x.fp))
		}
	}
}

func (x *Exchange) setRemoteID(id string) {
	if id != "" && x.traced {
		x.span.SetAttributes(attrRemoteID.String(id))
	}
}

func (x *Exchange) decide(decision string) {
	x.decision = decision
	x.g.countDecision(x.label, decision)
	x.w.Header().Set("Idempotency-Decision", decision)
	if x.traced {
		x.span.SetAttributes(attrDecision.String(decision))
	}
}

// expiresHeader says, on an answer the store decided, until when the key's record is kept (an
// HTTP-date, RFC 9110): how long a retry of the key is still recognised (case C23).
const expiresHeader = "Idempotency-Expires"

// sayExpires sets Idempotency-Expires to at, when the record the key holds expires (at the
// earliest: a commit that keeps its claim's expiry keeps up to an upstream timeout more).
func (x *Exchange) sayExpires(at time.Time) {
	if !at.IsZero() {
		x.w.Header().Set(expiresHeader, at.UTC().Format(http.TimeFormat))
	}
}

// logger returns the gateway's logger with the exchange's tool, tenant and, once known, key and
// key source: for the warnings and errors of one request. It is built on each call, since most
// requests log nothing but their access line.
func (x *Exchange) logger() *slog.Logger { return x.logFields().logger(x.g.log) }

// logFields are the attributes of x's log lines, for a settle that may outlive the request and
// logs rarely: it keeps them, and builds its logger only when it logs.
func (x *Exchange) logFields() logFields {
	return logFields{tool: x.rt.Name, tenant: x.tenant, key: x.key, keySource: x.keySource}
}

// logFields are the attributes of a request's log lines: tool and tenant, and key and key_source
// once the key is known.
type logFields struct{ tool, tenant, key, keySource string }

func (f logFields) logger(l *slog.Logger) *slog.Logger {
	if f.keySource == "" {
		return l.With("tool", f.tool, "tenant", f.tenant)
	}
	return l.With("tool", f.tool, "tenant", f.tenant, "key", f.key, "key_source", f.keySource)
}

// logAccess writes the access line at level info: tool, tenant, the client (with clients, once
// authenticated), key and key_source (once known), method, path, status, decision, actor, and the
// durations in milliseconds of the whole request, its store calls and its upstream call; never
// bodies nor credentials.
func (x *Exchange) logAccess() {
	ctx := context.Background() // the client's context may be done; the line is written anyway
	if !x.g.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 16)
	attrs = append(attrs, slog.String("tool", x.rt.Name), slog.String("tenant", x.tenant))
	if x.client != "" {
		attrs = append(attrs, slog.String("client", x.client))
	}
	if x.keySource != "" {
		attrs = append(attrs, slog.String("key", x.key), slog.String("key_source", x.keySource))
	}
	attrs = append(attrs, slog.String("method", x.r.Method), slog.String("path", x.r.URL.Path),
		slog.Int("status", x.status()), slog.String("decision", x.decision), slog.String("actor", x.actor),
		slog.Float64("duration_ms", ms(time.Since(x.start))), slog.Float64("store_ms", ms(x.storeDur)),
		slog.Float64("upstream_ms", ms(x.upDur)), slog.Int("upstream_attempts", int(x.attempts.Load())))
	x.g.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// refuseUnrouted answers a request that reaches no route (no route, another method, a
// dot-segment) with err's problem, and writes its access line.
func (g *Gateway) refuseUnrouted(w http.ResponseWriter, r *http.Request, err error) {
	p := problem.New(err, "", "")
	p.Write(w, 0)
	g.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", p.Status, "detail", p.Detail)
}
