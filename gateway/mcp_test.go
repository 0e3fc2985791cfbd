package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/wiretap"
	"github.com/idemgateway/idemgateway/record"
)

// mcpServerModes are the upstream servers and client revisions the guarded call tests run on.
var mcpServerModes = []struct {
	name    string
	opts    *mcp.StreamableHTTPOptions
	version string
}{
	{"sessions-sse", nil, "2025-11-25"},
	{"sessions-json", &mcp.StreamableHTTPOptions{JSONResponse: true}, "2025-11-25"},
	{"stateless-2026", &mcp.StreamableHTTPOptions{Stateless: true}, ""},
}

// TestMCPRetryReplaysWithRetryID: a retry of a tools/call is a new JSON-RPC request with a new
// id (the go-sdk client numbers its requests), in the same session or a new one. The gateway
// replays the first call's result under the retry's id, which the client accepts; the tool ran
// once, and the replay carries no Mcp-Session-Id.
func TestMCPRetryReplaysWithRetryID(t *testing.T) {
	t.Parallel()
	for _, mode := range mcpServerModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			up := newMCPUpstream(t, mode.opts)
			srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
			cs, tap := connectMCP(t, srv.URL, mode.version, nil)
			args := map[string]any{"title": "printer on fire"}
			first := callTool(t, cs, "create_ticket", "k1", args)
			if got := lastDecision(tap); got != "execute" {
				t.Fatalf("first call: decision %q, want execute", got)
			}
			again := callTool(t, cs, "create_ticket", "k1", args)
			if got := lastDecision(tap); got != "replay replayed" {
				t.Fatalf("retry: decision %q, want a replay without Mcp-Session-Id", got)
			}
			other, tap2 := connectMCP(t, srv.URL, mode.version, nil) // a new session, a new connection
			across := callTool(t, other, "create_ticket", "k1", args)
			if got := lastDecision(tap2); got != "replay replayed" {
				t.Fatalf("retry in a new session: decision %q, want a replay", got)
			}
			for _, res := range []*mcp.CallToolResult{again, across} {
				if id := structuredID(t, res); id != structuredID(t, first) || res.IsError {
					t.Errorf("replayed %s (isError %v), want the first call's %s", id, res.IsError, structuredID(t, first))
				}
			}
			if n := up.count("create_ticket"); n != 1 {
				t.Errorf("the tool ran %d times, want 1", n)
			}
			// The session still serves calls after replays.
			if id := structuredID(t, callTool(t, cs, "create_ticket", "k2", args)); id != "T-2" {
				t.Errorf("a new key created %s, want T-2", id)
			}
		})
	}
}

// TestMCPConflict: a key reused with other arguments is refused at HTTP 200, as a tool error the
// model can read (refusal: tool_error) or a JSON-RPC error -32010 (refusal: jsonrpc_error); the
// tool does not run again, and the client's session still works afterwards.
func TestMCPConflict(t *testing.T) {
	t.Parallel()
	for _, refusal := range []string{"tool_error", "jsonrpc_error"} {
		t.Run(refusal, func(t *testing.T) {
			t.Parallel()
			up := newMCPUpstream(t, nil)
			srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, "    refusal: "+refusal+"\n"), gateway.Options{})
			cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
			callTool(t, cs, "create_ticket", "k1", map[string]any{"title": "printer on fire"})
			ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
			defer cancel()
			res, err := cs.CallTool(ctx, toolParams("create_ticket", "k1", map[string]any{"title": "coffee machine"}))
			if got := lastDecision(tap); got != "conflict" {
				t.Errorf("decision %q, want conflict", got)
			}
			switch refusal {
			case "tool_error":
				if err != nil {
					t.Fatal(err)
				}
				text := resultText(res)
				if !res.IsError || !strings.Contains(text, `key "k1" was first used with different arguments (differs at /params/arguments/title)`) {
					t.Errorf("isError %v, text %q", res.IsError, text)
				}
				info, _ := res.Meta["io.github.idemgateway/idempotency"].(map[string]any)
				if info["decision"] != "conflict" || info["key"] != "k1" || info["tool"] != "tickets/create_ticket" || info["existingRemoteId"] != "T-1" {
					t.Errorf("_meta %v", res.Meta)
				}
				if res.StructuredContent != nil {
					t.Errorf("a refusal with structuredContent %v", res.StructuredContent)
				}
			case "jsonrpc_error":
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) || werr.Code != -32010 || !strings.Contains(string(werr.Data), `"type":"idempotency_key_conflict"`) {
					t.Fatalf("error %v, want JSON-RPC -32010 idempotency_key_conflict", err)
				}
			}
			if n := up.count("create_ticket"); n != 1 {
				t.Errorf("the tool ran %d times, want 1", n)
			}
			if id := structuredID(t, callTool(t, cs, "create_ticket", "k2", map[string]any{"title": "coffee machine"})); id != "T-2" {
				t.Errorf("after the refusal, a new key created %s, want T-2", id)
			}
		})
	}
}

// TestMCPIsErrorNotStored: a result with isError: true means not committed (tool_error's
// default): the key is released and a retry runs the tool again.
func TestMCPIsErrorNotStored(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
	for i := 1; i <= 2; i++ {
		res := callTool(t, cs, "failing_create", "k1", nil)
		if !res.IsError || resultText(res) != "the title is taken" {
			t.Errorf("call %d: isError %v, %q: want the tool's own error", i, res.IsError, resultText(res))
		}
		if got := lastDecision(tap); got != "execute" {
			t.Errorf("call %d: decision %q, want execute", i, got)
		}
	}
	if n := up.count("failing_create"); n != 2 {
		t.Errorf("the tool ran %d times, want 2", n)
	}
}

// TestMCPProtocolErrorAfterEffectUnknown: a JSON-RPC error outside the not-committed codes
// (-32603 from a tool that acted) leaves the outcome unknown: the client gets the error, and a
// retry with the key is refused as outcome_unknown without calling the tool.
func TestMCPProtocolErrorAfterEffectUnknown(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	var werr *jsonrpc.Error
	if _, err := cs.CallTool(ctx, toolParams("broken_create", "k1", nil)); !errors.As(err, &werr) || werr.Code != -32603 {
		t.Fatalf("first call: %v, want the server's -32603", err)
	}
	res := callTool(t, cs, "broken_create", "k1", nil)
	info, _ := res.Meta["io.github.idemgateway/idempotency"].(map[string]any)
	if !res.IsError || lastDecision(tap) != "outcome_unknown" || info["decision"] != "outcome_unknown" ||
		!strings.Contains(resultText(res), "may or may not have taken effect") {
		t.Errorf("retry: decision %q, isError %v, %q", lastDecision(tap), res.IsError, resultText(res))
	}
	if n := up.count("broken_create"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// TestMCPProgressStreamedNotReplayed: an SSE answer's progress notification reaches the client
// while the call runs (the tool answers only once the client has it), and the replay holds the
// result alone.
func TestMCPProgressStreamedNotReplayed(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	var progress atomic.Int32
	var once sync.Once
	cs, tap := connectMCP(t, srv.URL, "2025-11-25", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			progress.Add(1)
			once.Do(func() { close(up.progress) })
		},
	})
	call := func() *mcp.CallToolResult {
		p := toolParams("progress_create", "k1", nil)
		p.SetProgressToken("p1")
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		defer cancel()
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := call()
	again := call()
	if lastDecision(tap) != "replay replayed" || structuredID(t, again) != structuredID(t, first) {
		t.Errorf("retry: decision %q, %s", lastDecision(tap), resultText(again))
	}
	if n := progress.Load(); n != 1 {
		t.Errorf("the client got %d progress notifications, want 1 (none replayed)", n)
	}
	if n := up.count("progress_create"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// TestMCPCancelAbsorbed: a client that gives up on a slow guarded call sends
// notifications/cancelled; the gateway answers it 202 and keeps it from the server (cancel:
// finish), so the tool completes, the record settles, and the retry replays its result. The
// client gives up while the tool runs, or while the gateway still claims the key (the call is
// then not yet at the server, and the cancel must not reach it first).
func TestMCPCancelAbsorbed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		holdClaim bool
	}{
		{"while the tool runs", false},
		{"while the key is claimed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testMCPCancelAbsorbed(t, tc.holdClaim)
		})
	}
}

// claimGate is a real store whose first Claim waits, once it has said so on claiming, until
// release is closed.
type claimGate struct {
	record.Store
	claims   atomic.Int32
	claiming chan struct{}
	release  chan struct{}
}

func (s *claimGate) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload, error) {
	if s.claims.Add(1) == 1 {
		close(s.claiming)
		<-s.release
	}
	return s.Store.Claim(ctx, key, owner, payload, lease, ttl)
}

func testMCPCancelAbsorbed(t *testing.T, holdClaim bool) {
	up := newMCPUpstream(t, nil)
	reg := gateway.NewRegistry()
	store := openEmbedded(t)
	gate := &claimGate{Store: store, claiming: make(chan struct{}), release: make(chan struct{})}
	reached := (<-chan struct{})(up.started)
	if holdClaim {
		store, reached = gate, gate.claiming
	}
	release := sync.OnceFunc(func() { close(gate.release); close(up.finish) })
	srv, _, _ := newGatewayOn(t, store, mcpRoutes(up.url, ""), gateway.Options{Metrics: reg})
	t.Cleanup(release) // before the server closes, which waits for the held handler
	cs, _ := connectMCP(t, srv.URL, "2025-11-25", nil)
	args := map[string]any{} // slow_create runs until release: the cancel comes while it is in flight
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, toolParams("slow_create", "k1", args))
		called <- err
	}()
	select {
	case <-reached:
	case <-time.After(hangTimeout):
		t.Fatal("the call never reached the point where the client gives up")
	}
	cancel()
	if err := <-called; err == nil {
		t.Fatal("the call answered though the client gave up")
	}
	eventually.True(t, "the client's notifications/cancelled to be absorbed", func() bool {
		return metricValue(t, reg, "idemgateway_mcp_cancels_absorbed_total", "route", "tickets") == 1
	})
	release()
	eventually.True(t, "slow_create to finish", func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return up.finished["slow_create"] == 1
	})
	// The record settles once the tool's answer is read; the retry may come first and be refused.
	var res *mcp.CallToolResult
	eventually.True(t, "a retry answered with the tool's result", func() bool {
		res = callTool(t, cs, "slow_create", "k1", args)
		return !res.IsError
	})
	if id := structuredID(t, res); id != "T-1" {
		t.Errorf("retry got %s, want the first call's T-1", id)
	}
	if n := up.count("slow_create"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	for method, atLeast := range map[string]float64{"initialize": 1, "tools/call": 2, "notifications/cancelled": 1} {
		if n := metricValue(t, reg, "idemgateway_mcp_messages_total", "route", "tickets", "method", method); n < atLeast {
			t.Errorf("idemgateway_mcp_messages_total{method=%q} = %v, want at least %v", method, n, atLeast)
		}
	}
}

// TestMCPBadInput: a body that is not one JSON-RPC message, a batch holding a guarded tools/call,
// and a 2026-07-28 request whose Mcp-Method or Mcp-Name is missing or names another method or tool
// than the body are answered 400 with a JSON-RPC error and no id; the server never hears of them.
func TestMCPBadInput(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_ticket","arguments":{},"_meta":{"` + metaKey + `":"k1"}}}`
	v2026 := []string{"Mcp-Protocol-Version", "2026-07-28"}
	for _, c := range []struct {
		name, body string
		header     []string
		code       int
	}{
		{"not JSON", `{"jsonrpc":`, nil, -32700},
		{"not JSON-RPC", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, nil, -32600},
		{"batch with a guarded call", `[` + call + `]`, nil, -32600},
		{"a tools/call notification naming no tool", `{"jsonrpc":"2.0","method":"tools/call","params":{}}`, nil, -32602},
		{"2026 without Mcp-Method", call, v2026, -32020},
		{"2026 with another method", call, append(v2026, "Mcp-Method", "tools/list", "Mcp-Name", "create_ticket"), -32020},
		{"2026 with another tool", call, append(v2026, "Mcp-Method", "tools/call", "Mcp-Name", "search_tickets"), -32020},
		{"2026 without Mcp-Name", call, append(v2026, "Mcp-Method", "tools/call"), -32020},
		{"2026 by _meta with another tool", strings.Replace(call, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`, 1),
			[]string{"Mcp-Method", "tools/call", "Mcp-Name", "=?base64?c2VhcmNoX3RpY2tldHM=?="}, -32020},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := postRaw(t, srv.URL+"/mcp", c.body, c.header...)
			var msg struct {
				ID    json.RawMessage `json:"id"`
				Error struct{ Code int }
			}
			if err := json.Unmarshal([]byte(body), &msg); err != nil {
				t.Fatalf("%d %s: %v", status, body, err)
			}
			if status != http.StatusBadRequest || msg.Error.Code != c.code || string(msg.ID) != "null" || h.Get("Content-Type") != "application/json" {
				t.Errorf("%d %s, want 400 with JSON-RPC error %d and id null", status, body, c.code)
			}
		})
	}
	if n := up.requests.Load(); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
	// The same call with headers that match reaches the server: Mcp-Name base64-encoded too (which
	// go-sdk's server does not decode, and refuses itself).
	call = strings.Replace(call, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},`, 1)
	status, _, body := postRaw(t, srv.URL+"/mcp", call, append(v2026, "Mcp-Method", "tools/call", "Mcp-Name", "=?base64?Y3JlYXRlX3RpY2tldA==?=")...)
	if n := up.requests.Load(); n != 1 || !strings.Contains(body, "Mcp-Name header value '=?base64?") {
		t.Errorf("base64 Mcp-Name: the server got %d requests; %d %s", n, status, body)
	}
	status, _, body = postRaw(t, srv.URL+"/mcp", call, append(v2026, "Mcp-Method", "tools/call", "Mcp-Name", "create_ticket")...)
	if status != http.StatusOK || !strings.Contains(body, `"id":7`) || up.count("create_ticket") != 1 {
		t.Errorf("matching headers: %d %s, tool calls %d", status, body, up.count("create_ticket"))
	}
}

// TestMCPToolCallNamingNoTool: a tools/call whose params name no tool (none, null, an array, a
// name that is no string or is sent twice) is a request whose id could be read: it is refused
// with -32602 for that id at HTTP 200, as a bad tool name is, and as one SSE event to a client
// that accepts only that, so that the client can match the refusal to its call (JSON-RPC 2.0 §5:
// the id is null only when it cannot be read). The server never hears of it.
func TestMCPToolCallNamingNoTool(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	for _, c := range []struct{ name, id, params string }{
		{"no params", `15`, ``},
		{"params null", `"call-16"`, `,"params":null`},
		{"params an array", `17`, `,"params":["create_ticket"]`},
		{"name a number", `18`, `,"params":{"name":5,"arguments":{}}`},
		{"name twice", `19`, `,"params":{"name":"create_ticket","name":"search_tickets"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":` + c.id + `,"method":"tools/call"` + c.params + `}`
			status, h, answer := postRaw(t, srv.URL+"/mcp", body)
			var msg struct {
				ID    json.RawMessage `json:"id"`
				Error struct{ Code int }
			}
			if err := json.Unmarshal([]byte(answer), &msg); err != nil {
				t.Fatalf("%d %s: %v", status, answer, err)
			}
			if status != http.StatusOK || msg.Error.Code != -32602 || string(msg.ID) != c.id || h.Get("Content-Type") != "application/json" {
				t.Errorf("%s: %d %s, want 200 with JSON-RPC error -32602 and id %s", body, status, answer, c.id)
			}
			status, h, answer = postRaw(t, srv.URL+"/mcp", body, "Accept", "text/event-stream")
			if status != http.StatusOK || h.Get("Content-Type") != "text/event-stream" || !strings.Contains(answer, `"id":`+c.id+`,`) || !strings.Contains(answer, "-32602") {
				t.Errorf("%s, SSE only: %d %q, want one SSE event with -32602 and id %s", body, status, answer, c.id)
			}
		})
	}
	if n := up.requests.Load(); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

// TestMCPReplayAsOneSSEEvent: a retry whose Accept allows only text/event-stream gets the replay
// as one SSE event, its id the retry's byte for byte (a string id, then a big integer).
func TestMCPReplayAsOneSSEEvent(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"t"},"_meta":{"` + metaKey + `":"k1"}}}`
	}
	if status, _, body := postRaw(t, srv.URL+"/mcp", call(`"first"`)); status != http.StatusOK || !strings.Contains(body, `"id":"first"`) {
		t.Fatalf("first call: %d %s", status, body)
	}
	for _, id := range []string{`"r\u00e9try"`, `12345678901234567890123`} {
		status, h, body := postRaw(t, srv.URL+"/mcp", call(id), "Accept", "text/event-stream")
		want := `data: {"jsonrpc":"2.0","id":` + id + `,"result":{`
		if status != http.StatusOK || h.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(body, "event: message\n"+want) && !strings.HasPrefix(body, want) ||
			strings.Count(body, "data:") != 1 || h.Get("Idempotent-Replayed") != "true" || h.Get("Mcp-Session-Id") != "" {
			t.Errorf("id %s: %d %v\n%s", id, status, h, body)
		}
	}
	if n := up.count("create_ticket"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// TestJSONRPCRouteReplaysRetryID (docs/cases.md C16): a kind: http route whose fingerprint reads
// the body as JSON-RPC replays the stored response under the retry's id, the rest byte for byte.
func TestJSONRPCRouteReplaysRetryID(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ ID json.RawMessage }
		_ = json.NewDecoder(r.Body).Decode(&req)
		n := calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0", "result":{"id":"T-%d"},"id":%s}`, n, req.ID)
	}))
	t.Cleanup(upstream.Close)
	srv, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(`
upstreams:
  rpc: {url: %q}
routes:
  - name: rpc
    upstream: rpc
    method: POST
    path: /rpc
    class: non_idempotent
    fingerprint: {body: {format: jsonrpc}}
`, upstream.URL), gateway.Options{})
	body := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"create","params":{"title":"t"}}`
	}
	if _, _, got := postRaw(t, srv.URL+"/rpc", body("1"), "Idempotency-Key", "k1"); got != `{"jsonrpc":"2.0", "result":{"id":"T-1"},"id":1}` {
		t.Fatalf("first call: %s", got)
	}
	// The commit found the id, after the result, once: a replay splices there without reading
	// the body again.
	stored, span, err := gw.ResponseIDSpan(t.Context(), "default", "rpc", "k1")
	if err != nil || span[0] == 0 || string(stored[span[0]:span[1]]) != "1" || span[1] != len(stored)-1 {
		t.Fatalf("the stored response %s keeps the id span %v (%v); want that of its id 1", stored, span, err)
	}
	for _, id := range []string{`2`, `"two"`, `98765432109876543210`} {
		_, h, got := postRaw(t, srv.URL+"/rpc", body(id), "Idempotency-Key", "k1")
		if want := `{"jsonrpc":"2.0", "result":{"id":"T-1"},"id":` + id + `}`; got != want || h.Get("Idempotency-Decision") != "replay" {
			t.Errorf("retry %s: %s %s, want a replay of %s", id, h.Get("Idempotency-Decision"), got, want)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the upstream got %d calls, want 1", n)
	}
}

// TestMCPSpan: a guarded call's span is named "tools/call <tool>" and carries the attributes of
// docs/contract.md §7, the session id hashed.
func TestMCPSpan(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{TracerProvider: tp})
	cs, _ := connectMCP(t, srv.URL, "2025-11-25", nil)
	callTool(t, cs, "create_ticket", "k1", map[string]any{"title": "t"})
	var span *tracetest.SpanStub
	eventually.True(t, "the span of the call", func() bool {
		for _, sp := range spans.GetSpans() { // the server span ends once the handler returned
			if sp.Name == "tools/call create_ticket" {
				span = &sp
			}
		}
		return span != nil
	})
	attrs := map[string]string{}
	for _, a := range span.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, want := range map[string]string{
		"agent.tool.name": "tickets/create_ticket", "agent.tool.side_effect": "true", "gen_ai.tool.name": "create_ticket",
		"mcp.method.name": "tools/call", "mcp.protocol.version": "2025-11-25", "agent.idempotency.key": "k1",
		"agent.idempotency.key.source": "meta", "agent.idempotency.decision": "execute",
		"agent.mcp.tool.class.source": "default", "agent.idempotency.receipt.remote_id": "T-1",
	} {
		if attrs[k] != want {
			t.Errorf("%s = %q, want %q", k, attrs[k], want)
		}
	}
	if id := attrs["jsonrpc.request.id"]; id == "" {
		t.Error("no jsonrpc.request.id")
	}
	if s := attrs["mcp.session.id"]; len(s) != 16 || s == cs.ID() {
		t.Errorf("mcp.session.id %q, want a 16-digit hash of the session id", s)
	}
}

// TestMCPReplayWithoutKeptResult: a result over the receipt limit is not kept; a retry replays a
// valid tool result that says the call took effect, with its remote id, and the _meta of every
// replay.
func TestMCPReplayWithoutKeptResult(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{MaxReceiptBodyBytes: 16})
	cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
	callTool(t, cs, "create_ticket", "k1", nil)
	res := callTool(t, cs, "create_ticket", "k1", nil)
	info, _ := res.Meta["io.github.idemgateway/idempotency"].(map[string]any)
	if lastDecision(tap) != "replay replayed" || res.IsError || !strings.Contains(resultText(res), "already took effect") ||
		!strings.Contains(resultText(res), "T-1") || info["decision"] != "replay" || info["remoteId"] != "T-1" ||
		info["tool"] != "create_ticket" || info["firstExecutedAt"] == nil {
		t.Errorf("decision %q, isError %v, %q, _meta %v", lastDecision(tap), res.IsError, resultText(res), res.Meta)
	}
	if n := up.count("create_ticket"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// TestMCPRefusalCodes: refusal: jsonrpc_error answers a call without a key -32013 and, with
// concurrency: reject, a duplicate of a call in flight -32011 (retryable, with retryAfterMs), with
// the id of the refused request.
func TestMCPRefusalCodes(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, "    refusal: jsonrpc_error\n    concurrency: reject\n"), gateway.Options{})
	cs, _ := connectMCP(t, srv.URL, "2025-11-25", nil)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	var werr *jsonrpc.Error
	if _, err := cs.CallTool(ctx, toolParams("create_ticket", "", nil)); !errors.As(err, &werr) || werr.Code != -32013 ||
		!strings.Contains(werr.Message, `params._meta["`+metaKey+`"]`) {
		t.Errorf("no key: %v, want -32013 naming params._meta", err)
	}
	slow := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, toolParams("slow_create", "k1", nil))
		slow <- err
	}()
	up.awaitStarted(t) // the first call holds the key until finish is closed
	_, err := cs.CallTool(ctx, toolParams("slow_create", "k1", nil))
	if !errors.As(err, &werr) || werr.Code != -32011 || !strings.Contains(string(werr.Data), `"retryable":true`) ||
		!strings.Contains(string(werr.Data), `"retryAfterMs":1000`) || !strings.Contains(string(werr.Data), `"type":"idempotency_key_in_progress"`) {
		t.Errorf("duplicate in flight: %v, want -32011 in progress", err)
	}
	close(up.finish)
	if err := <-slow; err != nil {
		t.Errorf("the first call: %v", err)
	}
}

// TestMCPStreamCutIsUnknown: an SSE answer that ends before the call's response leaves the outcome
// unknown; the client gets the gateway's answer for its id (not a hang), which says outcome
// unknown, and the progress that came before it.
func TestMCPStreamCutIsUnknown(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: s1\nretry: 1000\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n")
	}))
	t.Cleanup(upstream.Close)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(upstream.URL, ""), gateway.Options{})
	call := `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"create_ticket","_meta":{"` + metaKey + `":"k1"}}}`
	status, h, body := postRaw(t, srv.URL+"/mcp", call)
	events := strings.Split(strings.TrimSpace(body), "\n\n")
	if status != http.StatusOK || h.Get("Content-Type") != "text/event-stream" || len(events) != 2 ||
		strings.Contains(body, "id: s1") || strings.Contains(body, "retry:") || !strings.Contains(events[0], "notifications/progress") ||
		!strings.Contains(events[1], `"id":"c1","result":{`) || !strings.Contains(events[1], "Unknown whether the call took effect") ||
		!strings.Contains(events[1], `"outcome":"unknown"`) {
		t.Fatalf("%d %v\n%s", status, h, body)
	}
	_, _, body = postRaw(t, srv.URL+"/mcp", strings.Replace(call, `"c1"`, `"c2"`, 1))
	if !strings.Contains(body, `"id":"c2"`) || !strings.Contains(body, `"decision":"outcome_unknown"`) || calls.Load() != 1 {
		t.Errorf("retry: %s, %d upstream calls", body, calls.Load())
	}
}

// TestMCPReplayAcrossEras: the receipt of a 2025-11-25 call replays to a 2026-07-28 retry with
// the resultType that revision requires, and a refusal to such a retry has one too; a 2025
// retry gets the result as stored, byte for byte with replay_meta: false.
func TestMCPReplayAcrossEras(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	srv, _, gw := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, "    replay_meta: false\n"), gateway.Options{})
	old := func(id, title string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"` + title + `"},"_meta":{"` + metaKey + `":"k1"}}}`
	}
	modern := func(id, title string) string {
		return strings.Replace(old(id, title), `"_meta":{`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},`, 1)
	}
	v2025 := []string{"Mcp-Protocol-Version", "2025-11-25"}
	v2026 := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "create_ticket"}
	_, _, first := postRaw(t, srv.URL+"/mcp", old("1", "a"), v2025...)
	if strings.Contains(first, "resultType") || !strings.Contains(first, `"id":1`) {
		t.Fatalf("first call (2025-11-25): %s", first)
	}
	_, h, replay := postRaw(t, srv.URL+"/mcp", modern("2", "a"), v2026...)
	if h.Get("Idempotency-Decision") != "replay" || !strings.HasPrefix(replay, `{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":`) {
		t.Errorf("2026-07-28 retry: %s %s", h.Get("Idempotency-Decision"), replay)
	}
	_, _, conflict := postRaw(t, srv.URL+"/mcp", modern("3", "b"), v2026...)
	if !strings.Contains(conflict, `"result":{"resultType":"complete","content":`) || !strings.Contains(conflict, `"isError":true`) {
		t.Errorf("2026-07-28 conflict: %s", conflict)
	}
	_, _, again := postRaw(t, srv.URL+"/mcp", old("4", "a"), v2025...)
	_, data, _ := strings.Cut(strings.TrimSpace(first), "data: ") // the server answered with one SSE event
	if want := strings.Replace(data, `"id":1`, `"id":4`, 1); again != want {
		t.Errorf("2025-11-25 retry:\n%s\nwant\n%s", again, want)
	}
	// The receipt keeps the revision its call was made under (docs/operations.md).
	code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/default/tickets%2Fcreate_ticket/k1", "", "")
	if code != http.StatusOK || rec["mcp_protocol_version"] != "2025-11-25" {
		t.Errorf("the receipt: %d %v; want mcp_protocol_version 2025-11-25", code, rec)
	}
}

// TestMCPCancelForwarded: with cancel: forward, the client's notifications/cancelled reaches the
// server, which stops the tool; the outcome is unknown, since no final response was seen.
func TestMCPCancelForwarded(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	reg := gateway.NewRegistry()
	srv, store, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, "    cancel: forward\n"), gateway.Options{Metrics: reg})
	cs, _ := connectMCP(t, srv.URL, "2025-11-25", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, toolParams("slow_create", "k1", nil)) // runs until cancelled
		called <- err
	}()
	up.awaitStarted(t) // the client gives up once the tool runs: its cancel reaches a server that knows the call
	cancel()
	if err := <-called; err == nil {
		t.Fatal("the call answered though the client gave up")
	}
	eventually.True(t, "the record to be outcome_unknown", func() bool {
		state, _, err := store.Get(context.Background(), record.ScopeKey{Tenant: "default", Tool: "tickets/slow_create", Key: "k1"}.String())
		if err != nil {
			t.Fatal(err)
		}
		return state == record.StateUnknown
	})
	up.mu.Lock()
	finished := up.finished["slow_create"]
	up.mu.Unlock()
	if absorbed := metricValue(t, reg, "idemgateway_mcp_cancels_absorbed_total", "route", "tickets"); finished != 0 || absorbed != 0 {
		t.Errorf("the tool finished %d times, %v cancels absorbed; want the cancel forwarded and the tool stopped", finished, absorbed)
	}
}

// TestMCPMetaKey: the key in params._meta is a JSON string, escapes decoded (`"k\u0031"` is the
// key k1); any other value is refused -32014 (refusal: jsonrpc_error) without calling the server.
func TestMCPMetaKey(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, "    refusal: jsonrpc_error\n"), gateway.Options{})
	call := func(key string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","_meta":{"` + metaKey + `":` + key + `}}}`
	}
	for _, c := range []struct{ key, want string }{
		{`"k1"`, "execute "},
		{`"k\u0031"`, "replay "},
		{`17`, `"code":-32014`},
		{`7`, `"code":-32014`}, // one byte: no string to look into
		{`""`, `"code":-32014`},
		{`"k\u00e9"`, `"code":-32014`},
	} {
		_, h, body := postRaw(t, srv.URL+"/mcp", call(c.key))
		if got := h.Get("Idempotency-Decision") + " " + body; !strings.Contains(got, c.want) {
			t.Errorf("key %s: %s, want %s", c.key, got, c.want)
		}
	}
	if n := up.count("create_ticket"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// TestMCPKeylessCallPassesThrough: a tool whose key is optional passes a call without one
// through: it runs each time, and nothing is stored.
func TestMCPKeylessCallPassesThrough(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	yaml := strings.Replace(mcpRoutes(up.url, ""), "create_ticket: {receipt:", "create_ticket: {key: {required: false}, receipt:", 1)
	srv, _, _ := newGatewayYAML(t, openEmbedded, yaml, gateway.Options{})
	cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
	for i := 1; i <= 2; i++ {
		if id, want := structuredID(t, callTool(t, cs, "create_ticket", "", nil)), fmt.Sprintf("T-%d", i); id != want {
			t.Errorf("call %d created %s, want %s", i, id, want)
		}
		if got := lastDecision(tap); got != "execute" {
			t.Errorf("call %d: decision %q, want execute", i, got)
		}
	}
}

// TestMCPAuthenticatesBeforeReadingTheBody: with clients, a POST without an accepted credential is
// refused 401 before its body is read (a declared length over max_body_bytes is not even looked
// at), so an unauthenticated caller makes the gateway read and parse nothing; the server is not
// called. With the credential the same route serves the call.
func TestMCPAuthenticatesBeforeReadingTheBody(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	routesFile := strings.Replace(mcpRoutes(up.url, ""), "routes:\n", `clients:
  api_keys:
    - {name: agent, key: "`+keyHash("s3cret")+`", tenant: acme}
routes:
`, 1)
	srv, _, gw := newGatewayYAML(t, openEmbedded, routesFile, gateway.Options{})
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"a"},"_meta":{"%s":"k"}}}`, metaKey)

	// A raw request, since Go's client will not send a body shorter than its declared length.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", 64<<20, call)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unauthenticated POST declaring a body over max_body_bytes: %d, want 401", resp.StatusCode)
	}
	if status, _, body := postRaw(t, srv.URL+"/mcp", call); status != http.StatusUnauthorized {
		t.Errorf("unauthenticated tools/call: %d %s, want 401", status, body)
	}
	if status, _, body := postRaw(t, srv.URL+"/mcp", call, "Authorization", "Bearer s3cret"); status != http.StatusOK {
		t.Errorf("authenticated tools/call: %d %s, want 200", status, body)
	}
	if n := up.count("create_ticket"); n != 1 {
		t.Errorf("create_ticket ran %d times, want 1 (the authenticated call)", n)
	}
	// The tool's route admits the call as the client the route authenticated: its tenant.
	if code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/acme/tickets%2Fcreate_ticket/k", "", ""); code != http.StatusOK {
		t.Errorf("the receipt under the client's tenant: %d %v", code, rec)
	}
}

// lastDecision is the last of decisions(tap), "" when there is none.
func lastDecision(tap *wiretap.Tap) string {
	d := decisions(tap)
	if len(d) == 0 {
		return ""
	}
	return d[len(d)-1]
}
