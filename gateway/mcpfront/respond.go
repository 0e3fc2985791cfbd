package mcpfront

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// Span attributes of a guarded tools/call (docs/contract.md §7 Traces).
var (
	attrMCPMethod      = attribute.Key("mcp.method.name")
	attrGenAITool      = attribute.Key("gen_ai.tool.name")
	attrJSONRPCID      = attribute.Key("jsonrpc.request.id")
	attrMCPProtocol    = attribute.Key("mcp.protocol.version")
	attrMCPSession     = attribute.Key("mcp.session.id") // a hash: a session id is a credential
	attrMCPKeySource   = attribute.Key("agent.idempotency.key.source")
	attrMCPClassSource = attribute.Key("agent.mcp.tool.class.source")
)

// metaIdempotency is the member of a refusal's result._meta (refusal: tool_error) that holds
// metaInfo.
const metaIdempotency = "io.github.idemgateway/idempotency"

// mcpTool is the Responder of a guarded tools/call (gateway.Capturer). The upstream call is the
// reverse proxy's, whose 2xx answer it reads itself (Capture, capture.go); a replay is the stored
// result re-enveloped with this request's id; a refusal is a tool error or a JSON-RPC error at
// HTTP 200, by the route's refusal (docs/contract.md §7).
type mcpTool struct {
	msg     mcpwire.Message // the tools/call
	call    gateway.Call    // what the identify phase reads of it (call.go)
	sse     bool            // the client accepts only text/event-stream: the gateway answers with one SSE event
	session string          // Mcp-Session-Id; "" without sessions
	version string          // the MCP revision the request names (protocolVersion); "" when none
	// classSource says where the tool's class came from: config, annotations or default.
	classSource string
	keys        [2]gateway.KeyReader // call.Keys' array: a call reads its key in at most two places of its body
	asks        *asks                // the front end's (asks.go); nil for a call read for Explain
	asked       []askKey             // this call's asks of the client
}

// traceCall names x's span "tools/call <tool>" and sets the attributes of docs/contract.md §7
// that the request holds, after Identify (which sets the tool's and the key's).
func (m *mcpTool) traceCall(x *gateway.Exchange) {
	span := x.Span()
	if !span.IsRecording() {
		return
	}
	span.SetName(methodToolsCall + " " + m.msg.Tool)
	attrs := []attribute.KeyValue{
		attrMCPMethod.String(methodToolsCall), attrGenAITool.String(m.msg.Tool),
		attrJSONRPCID.String(string(m.msg.ID)), attrMCPClassSource.String(m.classSource),
	}
	if source := x.KeySource(); source != "" {
		attrs = append(attrs, attrMCPKeySource.String(keySourceNames[source]))
	}
	if m.version != "" {
		attrs = append(attrs, attrMCPProtocol.String(m.version))
	}
	if m.session != "" {
		sum := sha256.Sum256([]byte(m.session))
		attrs = append(attrs, attrMCPSession.String(hex.EncodeToString(sum[:8])))
	}
	span.SetAttributes(attrs...)
}

// Call makes the upstream call through the reverse proxy (gateway.Exchange.Proxy). It returns
// once the upstream's answer has ended: the lease is held, and the call counted in flight
// (calls.go), until then.
func (m *mcpTool) Call(x *gateway.Exchange) { x.Proxy() }

// Replay answers with prev's stored result or error under this request's id, byte for byte
// otherwise but for result._meta["io.github.idemgateway/idempotency"], which says that it is a
// replay (replayMeta; unless replay_meta: false), so that an agent does not report the action as
// just done (docs/cases.md C29); a record that kept none (over the receipt limit, or resolved by
// an operator) replays a tool result that says the call took effect, with its remote id. Never
// Mcp-Session-Id: the answer is the gateway's, valid in any session.
func (m *mcpTool) Replay(x *gateway.Exchange, prev *record.Record) {
	w := x.Writer()
	w.Header()["Idempotent-Replayed"] = replayed // shared, as writeJSONRPC's values are
	if resp := prev.Response; prev.ResponseBodyKept && resp != nil && isMember(resp.Body) {
		member := resp.Body
		if task := m.taskNotForThisRetry(member, prev); task != "" {
			text := fmt.Sprintf("The call already took effect as task %s (idempotency key %q) and was not run again. Follow the task with tasks/get.", task, x.Key())
			m.write(w, mcpwire.Envelope(m.msg.ID, m.resultMember(text, false, m.replayMeta(x, prev))))
			return
		}
		if stateless(m.version) && !stateless(prev.MCPProtocolVersion) {
			member = withResultType(member, m.msg.ID)
		}
		// Re-enveloped under this request's id by splicing: the stored member goes out as it is,
		// with the replay's _meta written between two of its pieces.
		pieces := [3][]byte{member}
		if x.Route().MCP.ReplayMeta {
			pieces = mcpwire.WithResultMeta(member, metaIdempotency, m.replayMeta(x, prev))
		}
		parts := mcpwire.EnvelopeParts(m.msg.ID, pieces[0])
		writeJSONRPC(w, http.StatusOK, m.sse, parts[0], parts[1], parts[2], parts[3], pieces[1], pieces[2])
		return
	}
	text := fmt.Sprintf("The call already took effect (idempotency key %q) and was not run again. Its result was not kept.", x.Key())
	if prev.RemoteID != "" {
		text = fmt.Sprintf("The call already took effect (idempotency key %q), remote id %s, and was not run again. Its full result was not kept.", x.Key(), prev.RemoteID)
	}
	m.write(w, mcpwire.Envelope(m.msg.ID, m.resultMember(text, false, m.replayMeta(x, prev))))
}

// taskNotForThisRetry returns the task id of member, a stored result of prev, when it is a task
// handle that this retry may not be sent (docs/contract.md §9 Tasks): one of another protocol era,
// or one the retry did not ask for (2025-11-25: params.task) or cannot read (2026-07-28: the tasks
// extension undeclared). "" otherwise: no handle, or one the retry may have.
func (m *mcpTool) taskNotForThisRetry(member []byte, prev *record.Record) string {
	if !bytes.Contains(member, []byte(`"task`)) { // neither shape: the common replay reads nothing more
		return ""
	}
	f, err := mcpwire.ReadFinal(mcpwire.Envelope(m.msg.ID, member))
	if err != nil || !f.Task {
		return ""
	}
	if stateless(m.version) == stateless(prev.MCPProtocolVersion) &&
		(stateless(m.version) && m.msg.DeclaresExtension(extensionTasks) || !stateless(m.version) && m.msg.AsksForTask()) {
		return ""
	}
	var id string
	if json.Unmarshal(f.TaskID, &id) != nil || id == "" {
		id = "(no task id)"
	}
	return id
}

// extensionTasks is the MCP tasks extension, which a 2026-07-28 client declares to be sent task
// handles.
const extensionTasks = "io.modelcontextprotocol/tasks"

// replayMeta is the JSON of result._meta["io.github.idemgateway/idempotency"] in every replay of
// prev (docs/contract.md §9 Said in band), the stored result's or the gateway's own text in its
// place: the decision, the key, the tool as the call names it, the remote id, and when the call
// was first executed.
func (m *mcpTool) replayMeta(x *gateway.Exchange, prev *record.Record) json.RawMessage {
	b, _ := json.Marshal(struct { // strings always encode
		Decision        string `json:"decision"`
		Key             string `json:"key"`
		Tool            string `json:"tool"`
		RemoteID        string `json:"remoteId,omitempty"`
		FirstExecutedAt string `json:"firstExecutedAt,omitempty"`
	}{gateway.DecisionReplay, x.Key(), m.msg.Tool, prev.RemoteID, executedAt(prev.StartedAt)})
	return b
}

// executedAt is t in RFC 3339, UTC; "" for the zero time (a record that kept none).
func executedAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// withResultType is member, a stored result, with "resultType":"complete" added when it has
// none: a 2026-07-28 client requires it, and a result stored from an earlier revision's call
// lacks it (docs/contract.md §7 Replay). An error, or a result that has one, is member unchanged.
func withResultType(member, id []byte) []byte {
	f, err := mcpwire.ReadFinal(mcpwire.Envelope(id, member))
	if err != nil || f.HasError || f.ResultType != "" {
		return member
	}
	at := len(`{"result":`)
	at += bytes.IndexByte(member[at:], '{') + 1 // a result is an object
	add := `"resultType":"complete"`
	if rest := bytes.TrimLeft(member[at:], " \t\r\n"); len(rest) == 0 || rest[0] != '}' {
		add += ","
	}
	out := make([]byte, 0, len(member)+len(add))
	return append(append(append(out, member[:at]...), add...), member[at:]...)
}

// isMember reports whether a receipt's body is a final response's member (mcpwire.Final.Member).
func isMember(b []byte) bool {
	return bytes.HasPrefix(b, []byte(`{"result":`)) || bytes.HasPrefix(b, []byte(`{"error":`))
}

// Refuse answers ref at HTTP 200 as the route's refusal says. An authentication failure stays
// an HTTP 401 or 403, which a client's authorization flow reads.
func (m *mcpTool) Refuse(x *gateway.Exchange, ref *gateway.Refusal) {
	var unauthenticated *auth.Error
	if errors.As(ref.Err, &unauthenticated) || errors.Is(ref.Err, problem.ErrTenantMismatch) || errors.Is(ref.Err, problem.ErrActorMismatch) {
		x.RefuseHTTP(ref)
		return
	}
	info := &metaInfo{Decision: ref.Decision, Retryable: problem.Retryable(ref.Err), Key: x.Key(), Tool: x.Route().Name,
		RetryAfterMs: ref.RetryAfter.Milliseconds()}
	if c := ref.Conflict; c != nil {
		info.ExistingFingerprint, info.ReceivedFingerprint = c.ExistingFingerprint, c.ReceivedFingerprint
		info.DifferingFields, info.ExistingRemoteID = c.DifferingFields, c.ExistingRemoteID
	}
	m.write(x.Writer(), m.answer(x, m.refusalText(x, ref), info, ref.Err))
}

// Failed answers a call whose upstream exchange failed and whose record oc settled.
func (m *mcpTool) Failed(x *gateway.Exchange, w http.ResponseWriter, fault error, oc gateway.Outcome) {
	m.write(w, m.unsettled(x, fault, oc))
}

// unsettled is the answer to a call that got no final response (its exchange failed, or its
// answer ended before it) and whose record oc settled: not executed, or an unknown outcome.
func (m *mcpTool) unsettled(x *gateway.Exchange, fault error, oc gateway.Outcome) []byte {
	info := &metaInfo{Decision: x.Decision(), Retryable: oc.Released(), Key: x.Key(), Tool: x.Route().Name, Outcome: outcomeUnknown}
	if oc.Class() == gateway.NotCommitted {
		info.Outcome = outcomeNotCommitted
		text := fmt.Sprintf("Not executed: the tool's server could not be reached (%v), so nothing was done. Retry this same call with the same key.", fault)
		return m.answer(x, text, info, fault)
	}
	then := "Idempotency key %q is held until an operator resolves it."
	if oc.Released() {
		then = "A retry with the same key %q runs the call again."
	}
	text := fmt.Sprintf("Unknown whether the call took effect: it reached the tool's server, but no complete answer came back (%v). "+
		"Do not retry it with a new key: check first whether its effect exists. "+then, fault, x.Key())
	return m.answer(x, text, info, fmt.Errorf("%w: %w", problem.ErrOutcomeUnknown, fault))
}

// answer is the gateway's own answer to the call: a tool error (refusal: tool_error) whose text
// is written for a model and whose _meta holds info, or a JSON-RPC error coded by err (refusal:
// jsonrpc_error) whose data is info.
func (m *mcpTool) answer(x *gateway.Exchange, text string, info *metaInfo, err error) []byte {
	if x.Route().MCP.Refusal == routes.RefuseJSONRPCError {
		code, typ := refusalCode(err)
		info.Type = typ
		return mcpwire.ErrorMessage(m.msg.ID, &mcpwire.Error{Code: code, Message: text, Data: info})
	}
	return mcpwire.Envelope(m.msg.ID, m.resultMember(text, true, info))
}

// write sends msg at HTTP 200 (docs/contract.md §7 Refusals: a 4xx ends some clients' sessions).
func (m *mcpTool) write(w http.ResponseWriter, msg []byte) {
	writeJSONRPC(w, http.StatusOK, m.sse, msg)
}

// metaInfo is what a refusal or a replay without a kept result tells of the key
// (docs/contract.md §7 Refusals): result._meta["io.github.idemgateway/idempotency"], or
// error.data.
type metaInfo struct {
	// Type is error.data.type (refusal: jsonrpc_error only): idempotency_key_conflict, ...
	Type                string   `json:"type,omitempty"`
	Decision            string   `json:"decision"`
	Retryable           bool     `json:"retryable"`
	Key                 string   `json:"key,omitempty"`
	Tool                string   `json:"tool"` // the scope name, route/tool
	ExistingFingerprint string   `json:"existingFingerprint,omitempty"`
	ReceivedFingerprint string   `json:"receivedFingerprint,omitempty"`
	DifferingFields     []string `json:"differingFields,omitempty"`
	ExistingRemoteID    string   `json:"existingRemoteId,omitempty"`
	RetryAfterMs        int64    `json:"retryAfterMs,omitempty"`
	// Outcome is what became of an executed call the gateway answers itself: outcomeUnknown or
	// outcomeNotCommitted (docs/contract.md §9 Said in band).
	Outcome string `json:"outcome,omitempty"`
}

// The values of metaInfo.Outcome.
const (
	outcomeUnknown      = "unknown"
	outcomeNotCommitted = "not_committed"
)

// resultMember is the member `{"result":…}` of a CallToolResult holding text, with isError, and
// info (a *metaInfo, or a replay's JSON) in its _meta; no structuredContent (docs/contract.md §7
// Refusals). A 2026-07-28 request gets resultType, which that revision requires.
func (m *mcpTool) resultMember(text string, isError bool, info any) []byte {
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	result := struct {
		ResultType string         `json:"resultType,omitempty"`
		Content    []content      `json:"content"`
		IsError    bool           `json:"isError,omitempty"`
		Meta       map[string]any `json:"_meta"`
	}{Content: []content{{"text", text}}, IsError: isError, Meta: map[string]any{metaIdempotency: info}}
	if stateless(m.version) {
		result.ResultType = "complete"
	}
	b, _ := json.Marshal(result) // strings, bools and ints always encode
	out := make([]byte, 0, len(b)+len(`{"result":}`))
	return append(append(append(out, `{"result":`...), b...), '}')
}

// refusalCode is the JSON-RPC error code and error.data.type of a refusal: docs/contract.md §7
// Refusals, -32010 to -32015; the input errors their JSON-RPC codes; anything else -32603.
func refusalCode(err error) (int, string) {
	codes := []struct {
		err  error
		code int
		typ  string
	}{
		{problem.ErrConflict, mcpwire.Conflict, "idempotency_key_conflict"},
		{problem.ErrInProgress, mcpwire.InProgress, "idempotency_key_in_progress"},
		{problem.ErrOutcomeUnknown, mcpwire.OutcomeUnknown, "idempotency_outcome_unknown"},
		{problem.ErrMissingKey, mcpwire.KeyMissing, "idempotency_key_required"},
		{problem.ErrInvalidKey, mcpwire.KeyInvalid, "idempotency_key_invalid"},
		{problem.ErrKeyMismatch, mcpwire.KeyInvalid, "idempotency_key_mismatch"},
		{problem.ErrStoreUnavailable, mcpwire.StoreUnavailable, "idempotency_store_unavailable"},
		{problem.ErrInvalidBody, mcpwire.InvalidParams, "invalid_params"},
		{problem.ErrBodyTooLarge, mcpwire.InvalidRequest, "body_too_large"},
		{problem.ErrBodyTooComplex, mcpwire.InvalidRequest, "body_too_complex"},
		{problem.ErrInvalidRequest, mcpwire.InvalidRequest, "invalid_request"},
		{problem.ErrUpstream, -32603, "upstream_failed"},
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code, c.typ
		}
	}
	return -32603, "internal_error"
}

// refusalText is what a refusal tells a model: what happened, and what to do next.
func (m *mcpTool) refusalText(x *gateway.Exchange, ref *gateway.Refusal) string {
	err, key := ref.Err, x.Key()
	switch {
	case errors.Is(err, problem.ErrConflict):
		differs := ""
		if c := ref.Conflict; c != nil && len(c.DifferingFields) > 0 {
			differs = " (differs at " + strings.Join(c.DifferingFields, ", ") + ")"
		}
		return fmt.Sprintf("Not executed: idempotency key %q was first used with different arguments%s. "+
			"For a new action use a new key; to retry the first call, resend its original arguments.", key, differs)
	case errors.Is(err, problem.ErrInProgress):
		return fmt.Sprintf("Not executed: a call with idempotency key %q is still running. Retry this same call with the same key in %s "+
			"to get its result; do not use a new key, or the action may happen twice.", key, max(ref.RetryAfter, time.Second))
	case errors.Is(err, problem.ErrOutcomeUnknown):
		return fmt.Sprintf("Not executed: the earlier call with idempotency key %q may or may not have taken effect (%v). "+
			"Do not retry it with a new key: check first whether its effect exists. Retries with this key are refused until an operator resolves it.", key, err)
	case errors.Is(err, problem.ErrMissingKey):
		return fmt.Sprintf("Not executed: tool %s needs an idempotency key and this call carried none; the host or tool "+
			"wrapper sends it in %s. Use one new key per intended action, and the same key when you retry that action.", x.Route().Name, m.call.KeyPlaces())
	case errors.Is(err, problem.ErrInvalidKey):
		return fmt.Sprintf("Not executed: the idempotency key is invalid (%v). Send a key of printable ASCII characters, the same one for every retry.", err)
	case errors.Is(err, problem.ErrKeyMismatch):
		return fmt.Sprintf("Not executed: the call carries two different idempotency keys (%v). Send the key of this action in one place, or the same key in both.", err)
	case errors.Is(err, problem.ErrStoreUnavailable):
		return "Not executed: the idempotency store is unavailable, so nothing was done. Retry this same call with the same key in a second."
	case errors.Is(err, problem.ErrOverloaded):
		return "Not executed: the gateway is too busy to read this call, so nothing was done. Retry this same call with the same key in a second."
	case errors.Is(err, record.ErrCorrupt):
		return fmt.Sprintf("Not executed: the record of idempotency key %q cannot be read; an operator must delete it. Do not retry with a new key without checking whether the action happened.", key)
	}
	return fmt.Sprintf("Not executed: %v.", err)
}
