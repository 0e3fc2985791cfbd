package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/routes"
)

// MCP tool calls (docs/contract.md §7, docs/mcp.md). A kind: mcp route serves one endpoint of
// MCP's Streamable HTTP transport: POST carries JSON-RPC messages, GET opens the server's stream,
// DELETE ends a session. Only a tools/call of a tool that is not read_only runs the decision table
// (effect.go), with the mcpTool front end (mcprespond.go) and the tool's own route
// (routes.MCP.Tool); everything else passes through as a stream, with no key read and nothing
// stored.

// Headers of MCP's Streamable HTTP transport (2025-03-26 … 2026-07-28).
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
)

// protocolStateless is the first MCP revision without sessions, whose requests name their method
// and tool in headers (Mcp-Method, Mcp-Name) and their revision in params._meta.
const protocolStateless = "2026-07-28"

// metaProtocolVersion is the params._meta member a 2026-07-28 request names its revision in.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

const (
	methodToolsCall   = "tools/call"
	methodToolsList   = "tools/list"
	methodCancelled   = "notifications/cancelled"
	methodListChanged = "notifications/tools/list_changed"
)

// mcpMethodLabels are the method labels of idemgateway_mcp_messages_total; any other method
// counts as "other", so that a client cannot grow the series.
var mcpMethodLabels = []string{
	"initialize", "notifications/initialized", "ping", methodToolsList, methodToolsCall,
	"resources/list", "resources/read", "resources/templates/list", "resources/subscribe",
	"prompts/list", "prompts/get", "completion/complete", "logging/setLevel", methodCancelled,
	"notifications/progress", "notifications/roots/list_changed", "server/discover", "subscriptions/listen",
}

// unlistedTool is the tool part of the metrics label of every tool a kind: mcp route neither
// configures nor finds in its server's list (exchange.label); '*' is no tool name (CheckToolName).
const unlistedTool = "*"

// mcpExchange is an exchange on a kind: mcp route with what a POST reads into it, allocated as one:
// its message (tool.msg), and a guarded tools/call's front end (tool).
type mcpExchange struct {
	exchange
	tool mcpTool
}

// serveMCP serves a request on a kind: mcp route, whose unlisted tools' metrics label is unlisted
// (routeHandler).
func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request, rt *routes.Route, auth *auth.Authenticator, unlisted string) {
	c := new(mcpExchange)
	x := g.startExchange(&c.exchange, w, r, rt, httpRoute{})
	defer x.logAccess()
	if err := upgradeRefused(rt, r.Header); err != nil {
		x.reject(err)
		return
	}
	// Who asks is known before a byte of the body is read: a caller the gateway refuses makes it
	// read and parse nothing (docs/security.md#who-is-calling).
	if !x.admit(auth) {
		return
	}
	if r.Method != http.MethodPost {
		if r.Method == http.MethodGet {
			defer g.mcpStreams.get(x)()
		}
		if x.limitBody() {
			if session := r.Header.Get(headerSessionID); r.Method == http.MethodDelete && session != "" && rt.MCP.Cancel != routes.CancelForward {
				// Ending the session would end the streams of its calls before their final
				// responses: the guarded ones run to their end first (docs/contract.md §7 Client gone).
				g.mcpCalls.wait(r.Context(), session)
			}
			x.passThrough()
		}
		return
	}
	defer g.mcpStreams.post()()
	// The body is read once, bounded: the gateway must read it to know what it carries.
	body, err := readBody(w, r, rt.MaxBodyBytes)
	if err != nil {
		x.reject(err)
		return
	}
	msg := &c.tool.msg
	if err := msg.Parse(body); err != nil {
		g.countMessage(rt, nil)
		x.badMessage(err)
		return
	}
	g.countMessage(rt, msg)
	version := protocolVersion(r.Header, msg) // read once: the header check and a guarded call's answers use it
	if err := checkMCPHeaders(r.Header, msg, version); err != nil {
		x.badMessage(err)
		return
	}
	switch {
	case msg.Kind == mcpwire.Batch:
		for i := range msg.Batch {
			b := &msg.Batch[i]
			what := ""
			switch {
			case b.Kind == mcpwire.Request && b.Method == methodToolsCall && g.guarded(rt, b.Tool):
				what = "a tools/call of " + rt.Name
			case g.absorbs(rt, r, b):
				// Passed on in a batch, the cancel would stop the tool mid-effect (2025-03-26 servers
				// take batches); alone, it is absorbed.
				what = "a notifications/cancelled of a call"
			default:
				continue
			}
			x.badMessage(&mcpwire.Error{Code: mcpwire.InvalidRequest, Message: fmt.Sprintf(
				"invalid request: a batch holds %s, which the idempotency gateway guards: send it alone", what)})
			return
		}
	case msg.Kind == mcpwire.Request && msg.Method == methodToolsCall:
		g.serveToolCall(x, &c.tool, auth, body, version, unlisted)
		return
	case g.absorbs(rt, r, msg):
		// A guarded call runs to its final response (cancel: finish): the server must not stop it
		// mid-effect, and the record settles on what it did (docs/contract.md §7 Client gone).
		g.metrics.mcpCancels.WithLabelValues(rt.Name).Inc()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	x.body = body
	x.learn = msg.Kind == mcpwire.Request && msg.Method == methodToolsList
	x.passThrough()
}

// absorbs reports whether msg, a message of r on rt (a kind: mcp route), is a notifications/cancelled
// the gateway keeps from the server: cancel: finish, and a guarded call of r's session with the
// id it names in flight.
func (g *Gateway) absorbs(rt *routes.Route, r *http.Request, msg *mcpwire.Message) bool {
	return msg.Kind == mcpwire.Notification && msg.Method == methodCancelled && rt.MCP.Cancel != routes.CancelForward &&
		g.mcpCalls.has(r.Header.Get(headerSessionID), msg.CancelledRequestID())
}

// countMessage counts msg (nil: not a JSON-RPC message) in idemgateway_mcp_messages_total.
func (g *Gateway) countMessage(rt *routes.Route, msg *mcpwire.Message) {
	label := "other"
	switch {
	case msg == nil:
		label = "invalid"
	case msg.Kind == mcpwire.Batch:
		label = "batch"
	case msg.Kind == mcpwire.Response:
		label = "response"
	case slices.Contains(mcpMethodLabels, msg.Method):
		label = msg.Method
	}
	g.metrics.mcpMessages.WithLabelValues(rt.Name, label).Inc()
}

// guarded reports whether a tools/call of tool on rt runs the decision table: its class is not
// read_only.
func (g *Gateway) guarded(rt *routes.Route, tool string) bool {
	c, _, _ := g.tools.class(rt, tool)
	return c != routes.ReadOnly
}

// serveToolCall serves a tools/call (m.msg, read from body, of the MCP revision version): a call
// of a read_only tool passes through; any other runs the decision table under the tool's route,
// with m as its front end, and counted under the tool's name or, for a tool the route does not
// know, under unlisted.
func (g *Gateway) serveToolCall(x *exchange, m *mcpTool, auth *auth.Authenticator, body []byte, version, unlisted string) {
	rt, r, msg := x.rt, x.r, &m.msg
	if err := routes.CheckToolName(msg.Tool); err != nil {
		x.callError(msg, &mcpwire.Error{Code: mcpwire.InvalidParams, Message: "invalid params: " + err.Error()})
		return
	}
	class, source, known := g.tools.class(rt, msg.Tool)
	switch {
	case !known && rt.MCP.UnknownTools == routes.RefuseUnknownTools:
		x.callError(msg, &mcpwire.Error{Code: mcpwire.InvalidParams, Message: fmt.Sprintf(
			"unknown tool: route %s serves only the tools it configures or its server lists", rt.Name)})
		return
	case class == routes.ReadOnly:
		x.body = body
		x.passThrough()
		return
	}
	m.start(x, version, source)
	// In flight from here, not from the upstream call: a cancel sent while the call is claimed,
	// waits or runs is absorbed alike (docs/mcp.md "Streams, cancels and slow tools").
	g.mcpCalls.add(m)
	defer g.mcpCalls.remove(m)
	x.rt, x.front = rt.MCP.Tool(msg.Tool, class), m
	if known {
		x.label = x.rt.Name
	} else {
		x.label = unlisted
	}
	m.traceCall(x)
	if int64(len(body)) > x.rt.MaxBodyBytes { // the tool's bound may be tighter than the route's
		x.reject(fmt.Errorf("%w: %d bytes, tool %s accepts at most %d", problem.ErrBodyTooLarge, len(body), x.rt.Name, x.rt.MaxBodyBytes))
		return
	}
	id, err := identifyCall(x.rt, auth, x.w, r, &toolCall{body: body, msg: msg, principal: x.principal}, false)
	x.identified(id)
	if x.traced && x.keySource != "" {
		x.span.SetAttributes(attrMCPKeySource.String(mcpKeySources[x.keySource]))
	}
	switch {
	case err != nil:
		x.reject(err)
	case id.keyless(x.rt):
		x.keyless()
	case id.keyErr != nil:
		x.reject(id.keyErr)
	default:
		x.run()
	}
}

// passThrough sends the request upstream as a stream of its route: tied to the client, bounded
// by stream_idle_timeout, its answer copied as it comes (flushed event by event for SSE).
func (x *exchange) passThrough() {
	x.stream = true
	httpRoute{}.call(x)
	if x.idle != nil {
		x.idle.Stop()
	}
}

// badMessage answers a POST whose body is no JSON-RPC message the gateway serves, or whose
// headers do not match it: 400 with a JSON-RPC error and no id (docs/contract.md §7 Bad input).
// The upstream is not called.
func (x *exchange) badMessage(err error) {
	e, ok := err.(*mcpwire.Error)
	if !ok {
		e = &mcpwire.Error{Code: mcpwire.InvalidRequest, Message: err.Error()}
	}
	x.decision = DecisionRejected
	x.g.metrics.decisions.WithLabelValues(x.label, DecisionRejected).Inc()
	writeJSONRPC(x.w, http.StatusBadRequest, false, mcpwire.ErrorMessage(nil, e))
}

// callError answers a tools/call the gateway does not pass on (a bad or unknown tool name) with a
// JSON-RPC error for its id, at HTTP 200: a 4xx would end some clients' sessions.
func (x *exchange) callError(msg *mcpwire.Message, e *mcpwire.Error) {
	x.decision = DecisionRejected
	x.g.metrics.decisions.WithLabelValues(x.label, DecisionRejected).Inc()
	writeJSONRPC(x.w, http.StatusOK, onlySSE(x.r.Header), mcpwire.ErrorMessage(msg.ID, e))
}

// writeJSONRPC writes one JSON-RPC message, the concatenation of parts: application/json, or one
// SSE event (text/event-stream) for a client that accepts only that. As JSON, the parts are
// written as they are, so that a replay sends its stored result without copying it into one
// message (mcpwire.EnvelopeParts).
func writeJSONRPC(w http.ResponseWriter, status int, sse bool, parts ...[]byte) {
	h := w.Header()
	h.Del(headerSessionID)
	h["Cache-Control"] = noStore // shared, never appended to in place: len == cap
	if sse {
		parts = [][]byte{sseEvent(bytes.Join(parts, nil))} // an event's data may span lines: WriteEvent reads it whole
		h["Content-Type"] = eventStream
	} else {
		h["Content-Type"] = applicationJSON
	}
	n := 0
	for _, part := range parts {
		n += len(part)
	}
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(status)
	for _, part := range parts {
		if _, err := w.Write(part); err != nil {
			return
		}
	}
}

// The header values of the gateway's JSON-RPC answers (writeJSONRPC, mcpTool.replay), allocated
// once.
var (
	noStore         = []string{"no-store"}
	eventStream     = []string{"text/event-stream"}
	applicationJSON = []string{"application/json"}
	replayed        = []string{"true"}
)

// onlySSE reports whether the request's Accept allows text/event-stream and not JSON: its answers
// from the gateway are then one SSE event (docs/contract.md §7 Replay).
func onlySSE(h http.Header) bool {
	jsonOK, sseOK := false, false
	for _, v := range h.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";") // media type parameters (q=) do not matter here
			switch mt = strings.TrimSpace(mt); {
			case strings.EqualFold(mt, "application/json"), strings.EqualFold(mt, "application/*"), mt == "*/*":
				jsonOK = true
			case strings.EqualFold(mt, "text/event-stream"):
				sseOK = true
			}
		}
	}
	return sseOK && !jsonOK
}

// checkMCPHeaders checks a 2026-07-28 request (version, the revision it names by protocolVersion,
// at 2026-07-28 or later): Mcp-Method must be sent and name msg's method, and a tools/call's
// Mcp-Name its tool, after DecodeHeader (docs/contract.md §7 Bad input). An intermediary that
// routed by the headers must not see another call than the server runs. Errors are
// *mcpwire.Error with code HeaderMismatch.
func checkMCPHeaders(h http.Header, msg *mcpwire.Message, version string) error {
	if msg.Kind != mcpwire.Request && msg.Kind != mcpwire.Notification {
		return nil
	}
	if !stateless(version) {
		return nil
	}
	mismatch := func(format string, args ...any) error {
		return &mcpwire.Error{Code: mcpwire.HeaderMismatch, Message: "header mismatch: " + fmt.Sprintf(format, args...)}
	}
	method, err := decodedHeader(h, headerMethod)
	switch {
	case err != nil:
		return mismatch("%s: %v", headerMethod, err)
	case method == "":
		return mismatch("%s is required on a %s request", headerMethod, protocolStateless)
	case method != msg.Method:
		return mismatch("%s does not name the body's method", headerMethod)
	case msg.Method != methodToolsCall:
		return nil
	}
	name, err := decodedHeader(h, headerName)
	switch {
	case err != nil:
		return mismatch("%s: %v", headerName, err)
	case name == "":
		return mismatch("%s is required on a tools/call", headerName)
	case name != msg.Tool:
		return mismatch("%s does not name the body's tool", headerName)
	}
	return nil
}

// protocolVersion is the MCP revision a request names: its Mcp-Protocol-Version header, else
// its params._meta protocol version (2026-07-28); "" when it names none.
func protocolVersion(h http.Header, msg *mcpwire.Message) string {
	if v := h.Get(headerProtocolVersion); v != "" {
		return v
	}
	raw := msg.Meta(metaProtocolVersion)
	if raw == nil {
		return ""
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v
}

// stateless reports whether revision is 2026-07-28 or later (revisions are dates: they sort as
// strings).
func stateless(revision string) bool { return revision >= protocolStateless }

// decodedHeader is header name of h decoded (mcpwire.DecodeHeader); "" when absent. A header sent
// twice is an error.
func decodedHeader(h http.Header, name string) (string, error) {
	values := h.Values(name)
	switch len(values) {
	case 0:
		return "", nil
	case 1:
		return mcpwire.DecodeHeader(values[0])
	}
	return "", fmt.Errorf("sent %d times", len(values))
}
