package mcpfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
)

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

// badMessage answers a POST whose body is no JSON-RPC message the gateway serves, or whose
// headers do not match it: 400 with a JSON-RPC error and no id (docs/contract.md §7 Bad input);
// a request whose id was read (mcpwire.RequestError: a tools/call naming no tool) is a refused
// call (callError). The upstream is not called.
func badMessage(x *gateway.Exchange, err error) {
	var re *mcpwire.RequestError
	if errors.As(err, &re) {
		callError(x, re.ID, re.Err)
		return
	}
	e, ok := err.(*mcpwire.Error)
	if !ok {
		e = &mcpwire.Error{Code: mcpwire.InvalidRequest, Message: err.Error()}
	}
	x.Rejected()
	writeJSONRPC(x.Writer(), http.StatusBadRequest, false, mcpwire.ErrorMessage(nil, e))
}

// callError answers a tools/call the gateway does not pass on (no tool named, a bad or unknown
// tool name) with a JSON-RPC error for its id, at HTTP 200: a 4xx would end some clients' sessions.
func callError(x *gateway.Exchange, id []byte, e *mcpwire.Error) {
	x.Rejected()
	writeJSONRPC(x.Writer(), http.StatusOK, onlySSE(x.Request().Header), mcpwire.ErrorMessage(id, e))
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

// The header values of the gateway's JSON-RPC answers (writeJSONRPC, mcpTool.Replay), allocated
// once.
var (
	noStore         = []string{"no-store"}
	eventStream     = []string{"text/event-stream"}
	applicationJSON = []string{"application/json"}
	replayed        = []string{"true"}
)

// sseEvent is msg as one SSE event.
func sseEvent(msg []byte) []byte {
	var b bytes.Buffer
	_ = mcpwire.WriteEvent(&b, &mcpwire.Event{Data: msg}) // a bytes.Buffer does not fail
	return b.Bytes()
}

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

// readMessage reads body, POSTed with the headers h, into msg (the zero Message when it is no
// JSON-RPC message), and checks h against it (checkHeaders). version is the MCP revision the
// request names, read once: the header check and a guarded call's answers use it.
func readMessage(msg *mcpwire.Message, h http.Header, body []byte) (version string, err error) {
	if err := msg.Parse(body); err != nil {
		return "", err
	}
	version = protocolVersion(h, msg)
	return version, checkHeaders(h, msg, version)
}

// checkHeaders checks a 2026-07-28 request (version, the revision it names by protocolVersion, at
// 2026-07-28 or later): Mcp-Method must be sent and name msg's method, and a tools/call's Mcp-Name
// its tool, after DecodeHeader (docs/contract.md §7 Bad input). An intermediary that routed by the
// headers must not see another call than the server runs. Errors are *mcpwire.Error with code
// HeaderMismatch.
func checkHeaders(h http.Header, msg *mcpwire.Message, version string) error {
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
