package gateway

import (
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// The seam between the pipeline and a protocol front end. A route of a kind other than http is
// served by the Front that Options.Fronts makes for its kind (package mcpfront serves kind: mcp).
// The front end reads its protocol and hands the pipeline each call the decision table guards
// (Exchange.Identify, Exchange.Serve); the pipeline asks it back, through the Responder it gave, to
// call the upstream and to render each answer. Everything else a front end needs of a request is
// a method of Exchange below.

// Front serves the routes of one kind (routes.Kind) in front of the pipeline.
type Front interface {
	// Serve serves r, a request on rt, a route of the front end's kind, whose clients are a
	// (nil: none). It begins the request's Exchange with Gateway.Begin, and ends it with Done.
	Serve(w http.ResponseWriter, r *http.Request, rt *routes.Route, a *auth.Authenticator)
	// Reload is told each routes file that comes into force (New, Gateway.Reload).
	Reload(cfg *routes.Config)
	// EndStreams ends the streams that would hold a graceful shutdown to its deadline
	// (Gateway.EndStreams).
	EndStreams()
}

// NewFront makes the Front of one kind for g, at New: it registers its series on
// g.Options().Metrics.
type NewFront func(g *Gateway) Front

// CallReader reads the call that r, a request on rt (a route of a front end's kind), carries, as
// the front end's Serve would, for Explain; tool, when not "", names the tool the call must be of.
// Its errors say why r has no fingerprint, wrapping problem's sentinels where the gateway would
// answer with one.
type CallReader func(rt *routes.Route, tool string, r *http.Request) (*Call, error)

// Call is a request a front end has read and parsed itself, as the identify phase takes it
// (Exchange.Identify, Explain).
type Call struct {
	// Route is the route the call runs under: its settings, key, fingerprint and receipt rules
	// (a tool's route, routes.MCP.Tool).
	Route *routes.Route
	// Body is the request's body, read whole: it goes upstream as it is.
	Body []byte
	// Keys read the call's idempotency key from places in its body, in order, after the route's
	// key header and before its key.from and key.derive: the first key found is the call's.
	Keys []KeyReader
}

// KeyReader reads a call's idempotency key from one place in its body (Call.Keys).
type KeyReader struct {
	// Read reads the key: present is false when the place holds none, and err says that what it
	// holds is not a key (wrapping problem.ErrInvalidKey, never quoting the value).
	Read func() (key string, present bool, err error)
	// Source names the place as Exchange.KeySource reports it; Place names it in a problem.
	Source, Place string
	// Agrees: the place is read even when a key was found before it, and a key it holds must be
	// that key; one that differs is refused (problem.ErrKeyMismatch). A client that sends its key
	// twice must not have the gateway choose one.
	Agrees bool
}

// Admit runs the admission of x's request under its route (who asks: the tenant and actor, with
// the credential Accept verified), and refuses the request when it fails. It reports
// whether the request may go on.
func (x *Exchange) Admit() bool { return x.admit() }

// Reject refuses x's request with err, wrapping a sentinel of package problem, through its
// responder: no Idempotency-Decision header, decision "rejected".
func (x *Exchange) Reject(err error) { x.reject(err) }

// Rejected counts x as rejected, for a front end that answers the request itself.
func (x *Exchange) Rejected() {
	x.decision = DecisionRejected
	x.g.countDecision(x.label, DecisionRejected)
}

// LimitBody holds the body of x's request, which streams through, to its route's max_body_bytes:
// a declared length over it is refused at once (false), a longer stream breaks off with 413.
func (x *Exchange) LimitBody() bool { return x.limitBody() }

// Stream sends x's request upstream as a stream of its route, body (nil: the request's own body
// streams through) and all, unguarded: tied to the client, its upstream exchange bounded by the
// upstream's timeout until the answer starts and by idle between reads after, its answer copied
// as it comes (flushed event by event for SSE). watch, when not nil, sees the answer first and
// may wrap its body.
func (x *Exchange) Stream(body []byte, idle time.Duration, watch func(resp *http.Response)) {
	x.body, x.stream, x.streamIdle, x.watch = body, true, idle, watch
	httpRoute{}.Call(x)
	if x.idle != nil {
		x.idle.Stop()
	}
}

// Identify runs the identify phase of c (identify.go) on x: c's route becomes x's (and its span's
// tool), front its responder, and label the tool label of its metrics. The call is admitted under
// its route, its body bounded by the route's max_body_bytes (a tool's may be tighter than its
// front end's route's), its key read from the header, then c.Key, then the route's key.from and
// key.derive, and its fingerprint computed. The error is a problem of the request itself, which
// Serve answers.
func (x *Exchange) Identify(c *Call, front Responder, label string) error {
	x.rt, x.front, x.label = c.Route, front, label
	if x.traced {
		x.span.SetAttributes(attrTool.String(x.rt.Name), attrSideEffect.Bool(x.rt.Class != routes.ReadOnly))
	}
	id, err := identify(x.rt, x.auth, x.w, x.r, c, x.principal, x.g.parses, false)
	x.identified(id)
	return err
}

// HoldDeadline stops the clock of x's upstream timeout until release is called, bounding the
// wait by limit instead: for the time an upstream waits on the client (an MCP server's request to
// the client during a call), which the upstream's timeout does not bound (docs/contract.md §9).
// Holds nest. Outside a guarded upstream call it does nothing.
func (x *Exchange) HoldDeadline(limit time.Duration) (release func()) {
	if x.deadline == nil {
		return func() {}
	}
	return x.deadline.hold(limit)
}

// TimedOut says whether x's upstream timeout, or a hold's limit (HoldDeadline), ended its upstream
// call, and which ("after 30s", "after 5m0s waiting on the client"): an error reading the answer
// then says so rather than "context canceled".
func (x *Exchange) TimedOut() (what string, ok bool) {
	if x.deadline == nil {
		return "", false
	}
	return x.deadline.ranOut()
}

// CutOff returns the fault that says a shutdown cut x's upstream call off (Gateway.CutOff), nil
// when none did: an error reading the answer then says so rather than "context canceled".
func (x *Exchange) CutOff() error {
	if x.exec != nil && x.exec.wasCut() {
		return faultShutdown
	}
	return nil
}

// Proxy makes x's upstream call through the reverse proxy (proxy.go), which settles its record
// from the answer (or, when x's responder is a Capturer with a 2xx answer, lets it).
func (x *Exchange) Proxy() { httpRoute{}.Call(x) }

// RefuseHTTP answers ref as an HTTP route would: an RFC 9457 problem, with WWW-Authenticate on a
// 401 (for a front end whose protocol leaves authentication to HTTP).
func (x *Exchange) RefuseHTTP(ref *Refusal) { httpRoute{}.Refuse(x, ref) }

// Commit stores the receipt of x's call from a front end's own reading of its answer: resp is the
// response replays send (its body kept when kept), and the route's receipt pointers read the
// remote id and url from lookIn (commitReceipt); where the route names no remote id, remoteID
// does (the front end's own, such as a task's id; zero: none).
func (x *Exchange) Commit(resp *record.Response, kept bool, lookIn []byte, remoteID canonical.Pointer) {
	x.observeUpstream(Committed.String())
	if !x.rt.Receipt.RemoteID.IsZero() {
		remoteID = x.rt.Receipt.RemoteID
	}
	x.commitReceipt(resp, kept, lookIn, remoteID, x.rt.Receipt.RemoteURL)
}

// Settle settles x's call, which a front end found of class c (not Committed: Commit stores a
// receipt), with detail saying why in its record: the key is freed, or the record marked
// outcome_unknown, as the route's on_unknown_outcome says (settled). It returns the outcome.
func (x *Exchange) Settle(c OutcomeClass, detail string) Outcome {
	oc := settled(c, x.rt)
	x.observeUpstream(c.String())
	x.rec.Detail = detail
	x.settle(oc.op)
	return oc
}

// Record is the record of x's execution, as the claim stored it and the settle will: a front end
// may add what its protocol keeps (the MCP revision) before it commits.
func (x *Exchange) Record() *record.Record { return x.rec }

// Request is x's request.
func (x *Exchange) Request() *http.Request { return x.r }

// SetRequest makes r x's request: the same request, under another context.
func (x *Exchange) SetRequest(r *http.Request) { x.r = r }

// Writer is what x's answer is written to.
func (x *Exchange) Writer() http.ResponseWriter { return x.w }

// Route is the route x runs under.
func (x *Exchange) Route() *routes.Route { return x.rt }

// Key is x's idempotency key once read ("" before), and KeySource where it came from: header, or
// the Call's KeySource, from or derive ("" while it is not usable).
func (x *Exchange) Key() string { return x.key }

// KeySource is where x's usable key came from (Key).
func (x *Exchange) KeySource() string { return x.keySource }

// Decision is the decision x's answer says ("" before one).
func (x *Exchange) Decision() string { return x.decision }

// Span is x's server span; a front end adds its protocol's attributes when it IsRecording.
func (x *Exchange) Span() trace.Span { return x.span }

// ReceiptLimit is the most of an answer's body a receipt keeps (Options.MaxReceiptBodyBytes).
func (x *Exchange) ReceiptLimit() int64 { return x.g.opts.MaxReceiptBodyBytes }

// Logger is the gateway's logger with x's tool, tenant and key, for a warning about x.
func (x *Exchange) Logger() *slog.Logger { return x.logger() }

// Class is what the call did upstream.
func (o Outcome) Class() OutcomeClass { return o.class }

// Released reports whether the settle freed the key: a retry executes again.
func (o Outcome) Released() bool { return o.op == opRelease }

// Now is the gateway's clock: time.Now, unless a test set another.
func (g *Gateway) Now() time.Time { return g.now() }

// Options are the options g runs with, defaults filled in: a front end registers its series on
// Metrics, logs to Logger, and calls its upstreams through Transport.
func (g *Gateway) Options() Options { return g.opts }
