package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/gateway"
)

// metaKey is the params._meta member the tests' routes read keys from.
const metaKey = "io.github.idemgateway/idempotencyKey"

// mcpUpstream is a real MCP server (go-sdk) behind the gateway, with tools that count their
// calls: create_ticket (structuredContent {id}), search_tickets (readOnlyHint), failing_create
// (an isError result), broken_create (acts, then answers JSON-RPC error -32603),
// progress_create (a progress notification, then waits for the client to have it before it
// answers), slow_create (sleeps arguments.ms, whatever the client does).
type mcpUpstream struct {
	url      string
	requests atomic.Int32 // HTTP requests the server got
	mu       sync.Mutex
	calls    map[string]int // tool calls by tool
	finished map[string]int // slow_create calls that slept to the end, and were not cancelled
	progress chan struct{}  // closed by the test once the client got progress_create's notification
}

// newMCPUpstream serves a go-sdk MCP server with opts (nil: sessions, SSE answers).
func newMCPUpstream(t *testing.T, opts *mcp.StreamableHTTPOptions) *mcpUpstream {
	t.Helper()
	u := &mcpUpstream{calls: map[string]int{}, finished: map[string]int{}, progress: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object"}`)
	add := func(name string, ann *mcp.ToolAnnotations, h func(ctx context.Context, req *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error)) {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: schema, Annotations: ann}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.calls[name]++
			n := u.calls[name]
			u.mu.Unlock()
			return h(ctx, req, n)
		})
	}
	created := func(n int) *mcp.CallToolResult {
		id := fmt.Sprintf("T-%d", n)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created " + id}}, StructuredContent: map[string]any{"id": id}}
	}
	add("create_ticket", nil, func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		return created(n), nil
	})
	add("search_tickets", &mcp.ToolAnnotations{ReadOnlyHint: true}, func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("search %d", n)}}}, nil
	})
	add("failing_create", nil, func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the title is taken"}}}, nil
	})
	add("broken_create", nil, func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32603, Message: "the ticket was created, then the server broke"}
	})
	add("progress_create", nil, func(ctx context.Context, req *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2}); err != nil {
			return nil, err
		}
		select { // the final answer waits for the client to have seen the progress: it was streamed live
		case <-u.progress:
		case <-time.After(hangTimeout):
			return nil, errors.New("the client never got the progress notification")
		}
		return created(n), nil
	})
	add("slow_create", nil, func(ctx context.Context, req *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		var args struct{ MS int }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		select {
		case <-time.After(time.Duration(args.MS) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err() // cancelled mid-effect: what the gateway must prevent
		}
		u.mu.Lock()
		u.finished["slow_create"]++
		u.mu.Unlock()
		return created(n), nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// count returns how many calls of tool the server ran.
func (u *mcpUpstream) count(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}

// mcpRoutes is a routes file with one kind: mcp route "tickets" at /mcp in front of upstream;
// route is extra YAML of the route (indented four spaces), e.g. "    refusal: jsonrpc_error\n".
func mcpRoutes(upstream, route string) string {
	return fmt.Sprintf(`
upstreams:
  mcp: {url: %q, timeout: 10s}
defaults: {lock_lease: 2s}
routes:
  - name: tickets
    kind: mcp
    upstream: mcp
    path: /mcp
    key: {meta: %s}
    tools:
      create_ticket: {receipt: {remote_id: /result/structuredContent/id}}
      progress_create: {receipt: {remote_id: /result/structuredContent/id}}
      slow_create: {receipt: {remote_id: /result/structuredContent/id}}
      search_tickets: {class: read_only}
%s`, upstream, metaKey, route)
}

// decisions records the Idempotency-Decision and Idempotent-Replayed headers of the gateway's
// answers to a client's tools/call requests, in order.
type decisions struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string // "decision" or "decision replayed"
}

func (d *decisions) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(r)
	if err == nil && resp.Request.Header.Get("Mcp-Method") != "notifications/cancelled" {
		if dec := resp.Header.Get("Idempotency-Decision"); dec != "" {
			if resp.Header.Get("Idempotent-Replayed") == "true" {
				dec += " replayed"
			}
			if resp.Header.Get("Mcp-Session-Id") != "" && strings.Contains(dec, "replay") {
				dec += " with-session-id"
			}
			d.mu.Lock()
			d.seen = append(d.seen, dec)
			d.mu.Unlock()
		}
	}
	return resp, err
}

func (d *decisions) last() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.seen) == 0 {
		return ""
	}
	return d.seen[len(d.seen)-1]
}

// connectMCP connects a go-sdk client to the gateway's /mcp, speaking version ("" : the client's
// latest), and returns its session and the decisions it saw.
func connectMCP(t *testing.T, gw, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, *decisions) {
	t.Helper()
	d := &decisions{next: http.DefaultTransport}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw + "/mcp", HTTPClient: &http.Client{Transport: d}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, d
}

// callTool calls tool with args under key (none when empty), bounded by hangTimeout.
func callTool(t *testing.T, cs *mcp.ClientSession, tool, key string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, toolParams(tool, key, args))
	if err != nil {
		t.Fatalf("%s with key %q: %v", tool, key, err)
	}
	return res
}

func toolParams(tool, key string, args map[string]any) *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if key != "" {
		p.Meta = mcp.Meta{metaKey: key}
	}
	return p
}

// structuredID is the id of a create tool's structuredContent.
func structuredID(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("no structuredContent object in %s", resultText(res))
	}
	id, _ := m["id"].(string)
	return id
}

// resultText is the text of a tool result's content.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

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
			cs, d := connectMCP(t, srv.URL, mode.version, nil)
			args := map[string]any{"title": "printer on fire"}
			first := callTool(t, cs, "create_ticket", "k1", args)
			if got := d.last(); got != "execute" {
				t.Fatalf("first call: decision %q, want execute", got)
			}
			again := callTool(t, cs, "create_ticket", "k1", args)
			if got := d.last(); got != "replay replayed" {
				t.Fatalf("retry: decision %q, want a replay without Mcp-Session-Id", got)
			}
			other, d2 := connectMCP(t, srv.URL, mode.version, nil) // a new session, a new connection
			across := callTool(t, other, "create_ticket", "k1", args)
			if got := d2.last(); got != "replay replayed" {
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
			cs, d := connectMCP(t, srv.URL, "2025-11-25", nil)
			callTool(t, cs, "create_ticket", "k1", map[string]any{"title": "printer on fire"})
			ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
			defer cancel()
			res, err := cs.CallTool(ctx, toolParams("create_ticket", "k1", map[string]any{"title": "coffee machine"}))
			if got := d.last(); got != "conflict" {
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

// TestMCPReadOnlyToolNeverStored: a tool the file classes read_only passes through with no key
// read and nothing stored, also when the client sends a key.
func TestMCPReadOnlyToolNeverStored(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	cs, d := connectMCP(t, srv.URL, "2025-11-25", nil)
	for i := 1; i <= 2; i++ {
		if got, want := resultText(callTool(t, cs, "search_tickets", "k1", nil)), fmt.Sprintf("search %d", i); got != want {
			t.Errorf("call %d: %q, want %q", i, got, want)
		}
	}
	if len(d.seen) != 0 {
		t.Errorf("decisions %v on a read_only tool, want none", d.seen)
	}
}

// TestMCPIsErrorNotStored: a result with isError: true means not committed (tool_error's
// default): the key is released and a retry runs the tool again.
func TestMCPIsErrorNotStored(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	cs, d := connectMCP(t, srv.URL, "2025-11-25", nil)
	for i := 1; i <= 2; i++ {
		res := callTool(t, cs, "failing_create", "k1", nil)
		if !res.IsError || resultText(res) != "the title is taken" {
			t.Errorf("call %d: isError %v, %q: want the tool's own error", i, res.IsError, resultText(res))
		}
		if got := d.last(); got != "execute" {
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
	cs, d := connectMCP(t, srv.URL, "2025-11-25", nil)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	var werr *jsonrpc.Error
	if _, err := cs.CallTool(ctx, toolParams("broken_create", "k1", nil)); !errors.As(err, &werr) || werr.Code != -32603 {
		t.Fatalf("first call: %v, want the server's -32603", err)
	}
	res := callTool(t, cs, "broken_create", "k1", nil)
	info, _ := res.Meta["io.github.idemgateway/idempotency"].(map[string]any)
	if !res.IsError || d.last() != "outcome_unknown" || info["decision"] != "outcome_unknown" ||
		!strings.Contains(resultText(res), "may or may not have taken effect") {
		t.Errorf("retry: decision %q, isError %v, %q", d.last(), res.IsError, resultText(res))
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
	cs, d := connectMCP(t, srv.URL, "2025-11-25", &mcp.ClientOptions{
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
	if d.last() != "replay replayed" || structuredID(t, again) != structuredID(t, first) {
		t.Errorf("retry: decision %q, %s", d.last(), resultText(again))
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
// finish), so the tool completes, the record settles, and the retry replays its result.
func TestMCPCancelAbsorbed(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	reg := gateway.NewRegistry()
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{Metrics: reg})
	cs, _ := connectMCP(t, srv.URL, "2025-11-25", nil)
	args := map[string]any{"ms": 600}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := cs.CallTool(ctx, toolParams("slow_create", "k1", args)); err == nil {
		t.Fatal("the call answered before the client's deadline")
	}
	deadline := time.Now().Add(hangTimeout)
	for {
		up.mu.Lock()
		done := up.finished["slow_create"]
		up.mu.Unlock()
		absorbed := metricValue(t, reg, "idemgateway_mcp_cancels_absorbed_total", "route", "tickets")
		if done == 1 && absorbed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow_create finished %d times, cancels absorbed %v; want 1 and 1", done, absorbed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The record settles once the tool's answer is read; the retry may come first and wait.
	var res *mcp.CallToolResult
	for {
		res = callTool(t, cs, "slow_create", "k1", args)
		if !res.IsError || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if id := structuredID(t, res); id != "T-1" {
		t.Errorf("retry got %s, want the first call's T-1", id)
	}
	if n := up.count("slow_create"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}
