// Package mcpfront is the gateway's front end for MCP tool calls (docs/contract.md §7,
// docs/mcp.md): it serves the routes of kind: mcp in front of the pipeline of package gateway.
// A kind: mcp route serves one endpoint of MCP's Streamable HTTP transport: POST carries JSON-RPC
// messages, GET opens the server's stream, DELETE ends a session. Only a tools/call of a tool that
// is not read_only runs the decision table, under the tool's own route (routes.MCP.Tool), with
// mcpTool as its Responder; everything else passes through as a stream, with no key read and
// nothing stored.
//
// Reading order: front.go routes each message; call.go reads a tools/call for the identify phase
// (its key in params._meta); respond.go renders replays and refusals as JSON-RPC; capture.go reads
// an executed call's answer and settles its record by outcome.go's table; tools.go knows each
// server's tool classes, which stream.go keeps current from the answers passing through;
// calls.go tracks the calls in flight (cancels, session ends, shutdown); wire.go writes
// JSON-RPC and reads the transport's headers.
package mcpfront

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/routes"
)

// Front serves the kind: mcp routes of one Gateway (gateway.Front).
type Front struct {
	g       *gateway.Gateway
	log     *slog.Logger
	metrics *metrics
	tools   toolBook // the tools of the routes' servers (tools.go)
	calls   calls    // guarded tools/calls in flight, for their cancels (calls.go)
	asks    asks     // what servers ask clients during guarded calls (asks.go)
	streams streams  // GET streams, ended at shutdown (calls.go)
}

// New makes g's front end for kind: mcp routes (gateway.Options.Fronts): its series are
// registered on g's registry, and its tool discovery calls through g's transport.
func New(g *gateway.Gateway) gateway.Front {
	opts := g.Options()
	f := &Front{g: g, log: opts.Logger, metrics: newMetrics(opts.Metrics)}
	f.tools = toolBook{now: g.Now, log: opts.Logger, refreshes: f.metrics.toolLists, transport: opts.Transport}
	return f
}

// Reload forgets the tool lists of routes no longer in force, and starts the discovery of the
// tools of each kind: mcp route of cfg with discover_tools.
func (f *Front) Reload(cfg *routes.Config) { f.tools.reload(cfg.Routes) }

// EndStreams ends the GET streams of kind: mcp routes once their POSTs in flight have ended
// (streams.end).
func (f *Front) EndStreams() { f.streams.end() }

// exchange is an exchange on a kind: mcp route with what a POST reads into it, allocated as one:
// its message (tool.msg), and a guarded tools/call's Responder (tool).
type exchange struct {
	gateway.Exchange
	tool mcpTool
}

// Serve serves a request on rt, a kind: mcp route whose clients are a.
func (f *Front) Serve(w http.ResponseWriter, r *http.Request, rt *routes.Route, a *auth.Authenticator) {
	c := new(exchange)
	x := f.g.Begin(&c.Exchange, w, r, rt, a)
	defer x.Done()
	// Who asks is known before a byte of the body is read: a caller the gateway refuses makes it
	// read and parse nothing (docs/security.md#who-is-calling).
	if !x.Accept() {
		return
	}
	if r.Method != http.MethodPost {
		if r.Method == http.MethodGet {
			defer f.streams.get(x)()
		}
		if !x.Admit() || !x.LimitBody() {
			return
		}
		if session := r.Header.Get(headerSessionID); r.Method == http.MethodDelete && session != "" && rt.MCP.Cancel != routes.CancelForward {
			// Ending the session would end the streams of its calls before their final
			// responses: the guarded ones run to their end first (docs/contract.md §7 Client gone).
			f.calls.wait(r.Context(), session)
		}
		f.passThrough(x, nil, false)
		return
	}
	defer f.streams.post()()
	// The body is read once, bounded: the gateway must read it to know what it carries.
	body, err := gateway.ReadBody(x.Writer(), r, rt.MaxBodyBytes)
	if err != nil {
		x.Reject(err)
		return
	}
	msg := &c.tool.msg
	version, err := readMessage(msg, r.Header, body)
	f.countMessage(rt, msg)
	if err != nil {
		badMessage(x, err)
		return
	}
	if msg.Kind == mcpwire.Request && msg.Method == methodToolsCall {
		f.serveToolCall(x, &c.tool, body, version)
		return
	}
	if msg.Kind == mcpwire.Batch {
		if err := f.checkBatch(rt, r, msg); err != nil {
			badMessage(x, err)
			return
		}
	}
	if !x.Admit() {
		return
	}
	if msg.Kind == mcpwire.Response && f.asks.answered(r.Header.Get(headerSessionID), msg.ID) {
		// The call that asked has ended: the server would act on an answer nobody waits for.
		x.Rejected()
		writeJSONRPC(x.Writer(), http.StatusConflict, false, mcpwire.ErrorMessage(nil, &mcpwire.Error{Code: mcpwire.InvalidRequest,
			Message: "invalid request: this answers a request of a tool call that has ended; it was not relayed"}))
		return
	}
	if f.absorbs(rt, r, msg) {
		// A guarded call runs to its final response (cancel: finish): the server must not stop it
		// mid-effect, and the record settles on what it did (docs/contract.md §7 Client gone).
		f.metrics.cancels.WithLabelValues(rt.Name).Inc()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.passThrough(x, body, msg.Kind == mcpwire.Request && msg.Method == methodToolsList)
}

// checkBatch refuses a batch that holds a message the gateway guards: a tools/call of a tool that
// is not read_only, or a cancel it would absorb. Passed on in a batch, the call would run
// unguarded, and the cancel would stop the tool mid-effect (2025-03-26 servers take batches).
func (f *Front) checkBatch(rt *routes.Route, r *http.Request, msg *mcpwire.Message) error {
	for i := range msg.Batch {
		b := &msg.Batch[i]
		what := ""
		switch {
		case b.Kind == mcpwire.Request && b.Method == methodToolsCall && f.guarded(rt, b.Tool):
			what = "a tools/call of " + rt.Name
		case f.absorbs(rt, r, b):
			what = "a notifications/cancelled of a call"
		default:
			continue
		}
		return &mcpwire.Error{Code: mcpwire.InvalidRequest, Message: fmt.Sprintf(
			"invalid request: a batch holds %s, which the idempotency gateway guards: send it alone", what)}
	}
	return nil
}

// absorbs reports whether msg, a message of r on rt, is a notifications/cancelled the gateway
// keeps from the server: cancel: finish, and a guarded call of r's session with the id it names in
// flight.
func (f *Front) absorbs(rt *routes.Route, r *http.Request, msg *mcpwire.Message) bool {
	return msg.Kind == mcpwire.Notification && msg.Method == methodCancelled && rt.MCP.Cancel != routes.CancelForward &&
		f.calls.has(r.Header.Get(headerSessionID), msg.CancelledRequestID())
}

// countMessage counts msg (the zero Message: not a JSON-RPC message) in
// idemgateway_mcp_messages_total.
func (f *Front) countMessage(rt *routes.Route, msg *mcpwire.Message) {
	label := "other"
	switch {
	case msg.Kind == 0:
		label = "invalid"
	case msg.Kind == mcpwire.Batch:
		label = "batch"
	case msg.Kind == mcpwire.Response:
		label = "response"
	case slices.Contains(methodLabels, msg.Method):
		label = msg.Method
	}
	f.metrics.messages.WithLabelValues(rt.Name, label).Inc()
}

// guarded reports whether a tools/call of tool on rt runs the decision table: its class is not
// read_only.
func (f *Front) guarded(rt *routes.Route, tool string) bool {
	c, _, _ := f.tools.class(rt, tool)
	return c != routes.ReadOnly
}

// serveToolCall serves a tools/call (m.msg, read from body, of the MCP revision version): a call
// of a read_only tool passes through; any other runs the decision table under the tool's route,
// with m as its Responder, counted under the tool's name or, for a tool the route does not know,
// under route/* (unlistedTool).
func (f *Front) serveToolCall(x *gateway.Exchange, m *mcpTool, body []byte, version string) {
	rt, msg := x.Route(), &m.msg
	if err := routes.CheckToolName(msg.Tool); err != nil {
		callError(x, msg.ID, &mcpwire.Error{Code: mcpwire.InvalidParams, Message: "invalid params: " + err.Error()})
		return
	}
	class, source, known := f.tools.class(rt, msg.Tool)
	switch {
	case !known && rt.MCP.UnknownTools == routes.RefuseUnknownTools:
		callError(x, msg.ID, &mcpwire.Error{Code: mcpwire.InvalidParams, Message: fmt.Sprintf(
			"unknown tool: route %s serves only the tools it configures or its server lists", rt.Name)})
		return
	case class == routes.ReadOnly:
		if x.Admit() {
			f.passThrough(x, body, false)
		}
		return
	}
	m.start(x.Request().Header, rt.MCP.Tool(msg.Tool, class), body, version, source)
	m.asks = &f.asks
	// In flight from here, not from the upstream call: a cancel sent while the call is claimed,
	// waits or runs is absorbed alike (docs/mcp.md "Streams, cancels and slow tools").
	f.calls.add(m)
	defer f.calls.remove(m)
	label := m.call.Route.Name
	if !known {
		label = rt.Name + "/" + unlistedTool
	}
	err := x.Identify(&m.call, m, label)
	m.traceCall(x)
	x.Serve(err)
}

// passThrough sends x's request upstream as a stream of its route, body and all (nil: the
// request's own body streams through), bounded by stream_idle_timeout between reads, its answer
// watched for what the tool book learns (stream.go); learn: it answers a tools/list.
func (f *Front) passThrough(x *gateway.Exchange, body []byte, learn bool) {
	rt := x.Route()
	x.Stream(body, rt.Upstream.MCP.StreamIdleTimeout, func(resp *http.Response) { f.watch(rt, learn, resp) })
}

// methodLabels are the method labels of idemgateway_mcp_messages_total; any other method counts
// as "other", so that a client cannot grow the series.
var methodLabels = []string{
	"initialize", "notifications/initialized", "ping", methodToolsList, methodToolsCall,
	"resources/list", "resources/read", "resources/templates/list", "resources/subscribe",
	"prompts/list", "prompts/get", "completion/complete", "logging/setLevel", methodCancelled,
	"notifications/progress", "notifications/roots/list_changed", "server/discover", "subscriptions/listen",
}

// unlistedTool is the tool part of the metrics label of every tool a kind: mcp route neither
// configures nor finds in its server's list; '*' is no tool name (routes.CheckToolName).
const unlistedTool = "*"
