package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
	"github.com/idemgateway/idemgateway/server"
)

// rawSession opens a session on the gateway's /mcp by raw HTTP, speaking version, and returns
// its Mcp-Session-Id.
func rawSession(t *testing.T, url, version string) string {
	t.Helper()
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	status, h, body := postRaw(t, url, init)
	sid := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	if status, _, body := postRaw(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", version); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	return sid
}

// TestMCPCancelAbsorbedHoweverSent: a client's notifications/cancelled of a guarded call in flight
// never reaches the server (cancel: finish), also when it spells the call's id otherwise (5.0 for
// 5, "\u0061" for "a": the server reads them as the same id) or sends it in a batch (which a
// 2025-03-26 server takes): the tool runs to its end and the client gets its result.
func TestMCPCancelAbsorbedHoweverSent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, callID, cancel string
		status               int
	}{
		{"number spelt otherwise", "5", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5.0}}`, http.StatusAccepted},
		{"string escaped", `"a"`, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\u0061"}}`, http.StatusAccepted},
		{"in a batch", "5", `[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}]`, http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := newMCPUpstream(t, nil)
			srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
			url := srv.URL + "/mcp"
			sid := rawSession(t, url, "2025-03-26") // no Mcp-Protocol-Version below: the server takes batches
			answer := make(chan string, 1)
			go func() {
				_, _, body := postRaw(t, url, `{"jsonrpc":"2.0","id":`+c.callID+`,"method":"tools/call","params":{"name":"slow_create","_meta":{"`+metaKey+`":"k1"}}}`, "Mcp-Session-Id", sid)
				answer <- body
			}()
			up.awaitStarted(t) // the call is in flight, until finish is closed
			if status, _, body := postRaw(t, url, c.cancel, "Mcp-Session-Id", sid); status != c.status {
				t.Errorf("cancel: %d %s, want %d", status, body, c.status)
			}
			close(up.finish)
			if body := <-answer; !strings.Contains(body, `"structuredContent":{"id":"T-1"}`) {
				t.Errorf("the call answered %s, want its result", body)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if n := up.finished["slow_create"]; n != 1 {
				t.Errorf("the tool finished %d times, want 1: the cancel reached the server", n)
			}
		})
	}
}

// TestMCPClientGoneMidSSE: a client that drops the connection while its guarded call streams
// (no cancel sent) leaves the call to run to its end (cancel: finish): the record settles on its
// result, and the retry replays it.
func TestMCPClientGoneMidSSE(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	url := srv.URL + "/mcp"
	sid := rawSession(t, url, "2025-11-25")
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow_create","arguments":{"ms":300},"_meta":{"` + metaKey + `":"k1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(call))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Idempotency-Decision") != "execute" {
		t.Fatalf("decision %q, want execute", resp.Header.Get("Idempotency-Decision"))
	}
	_ = resp.Body.Close() // before the answer: the connection is dropped
	tr.CloseIdleConnections()
	retry := strings.Replace(call, `"id":5`, `"id":6`, 1)
	var body string
	eventually.True(t, "a retry that replays", func() bool {
		var h http.Header
		_, h, body = postRaw(t, url, retry, "Mcp-Session-Id", sid)
		return h.Get("Idempotency-Decision") == "replay"
	})
	if !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":6,"result":`) || !strings.Contains(body, `"T-1"`) {
		t.Errorf("replay %s, want the first call's result under id 6", body)
	}
	if n := up.count("slow_create"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// TestMCPEndlessJSONAnswer: an upstream whose JSON answer to a guarded call never ends is read up
// to a bound, not into memory until the upstream timeout: the call's outcome is unknown, and the
// client hears so once the bound is reached, not at the timeout (two minutes here: the answer
// names the bound as its reason, which only an answer before the timeout can).
func TestMCPEndlessJSONAnswer(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`)
		chunk := []byte(strings.Repeat("x", 1<<20))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(upstream.Close)
	srv, _, _ := newGatewayYAML(t, openEmbedded, strings.Replace(mcpRoutes(upstream.URL, ""), "timeout: 10s", "timeout: 2m", 1), gateway.Options{})
	status, h, body := postRaw(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","_meta":{"`+metaKey+`":"k1"}}}`)
	if status != http.StatusOK || len(body) > 1<<20 || !strings.Contains(body, "Unknown whether the call took effect") ||
		!strings.Contains(body, "a JSON answer of more than") {
		t.Errorf("%d %v %.400s, want the gateway's answer that the outcome is unknown, for an answer over the bound", status, h, body)
	}
}

// TestMCPSessionEndWaitsForGuardedCall: a client that ends its session (DELETE, as go-sdk's
// ClientSession.Close does) while a guarded call of the session runs does not cut the call's
// answer off: the server would end the call's stream without its final response, leaving the
// record outcome_unknown although the tool completed. The DELETE waits for the session's guarded
// calls (cancel: finish), the record settles on the result, and a retry replays it.
func TestMCPSessionEndWaitsForGuardedCall(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	url := srv.URL + "/mcp"
	sid := rawSession(t, url, "2025-11-25")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_create","_meta":{"` + metaKey + `":"k1"}}}`
	answer := make(chan string, 1)
	go func() {
		_, _, body := postRaw(t, url, call, "Mcp-Session-Id", sid)
		answer <- body
	}()
	up.awaitStarted(t) // the call is in flight until finish is closed: once the DELETE is sent
	req, err := http.NewRequest(http.MethodDelete, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", sid)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { close(up.finish) },
	}))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Errorf("DELETE: %d, want the server's 2xx", resp.StatusCode)
	}
	if body := <-answer; !strings.Contains(body, `"structuredContent":{"id":"T-1"}`) {
		t.Errorf("the call answered %s, want its result", body)
	}
	_, h, body := postRaw(t, url, call, "Mcp-Session-Id", rawSession(t, url, "2025-11-25"))
	if h.Get("Idempotency-Decision") != "replay" || !strings.Contains(body, `"T-1"`) {
		t.Errorf("retry in a new session: %q %s, want the replay of T-1", h.Get("Idempotency-Decision"), body)
	}
	if n := up.count("slow_create"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// TestMCPToolNamesBoundMetricSeries: a client may call tools by any name the server does not have
// (unknown_tools: allow, the default); each call is guarded under its own scope name
// "route/<tool>", but the metrics label them all "route/*", so that made-up names cannot grow the
// gateway's memory or the metrics backend's series.
func TestMCPToolNamesBoundMetricSeries(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	reg := gateway.NewRegistry()
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{Metrics: reg})
	const names = 50
	for i := range names {
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no_such_tool_%d","_meta":{"%s":"k"}}}`, i, metaKey)
		postRaw(t, srv.URL+"/mcp", call)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tool" && strings.HasPrefix(l.GetValue(), "tickets/") {
					tools[l.GetValue()] = true
				}
			}
		}
	}
	if len(tools) != 1 || !tools["tickets/*"] {
		t.Errorf("tool label values for %d tool names the server does not have: %v; want only tickets/*", names, tools)
	}
}

// TestMCPShutdownEndsGETStreams: a go-sdk client keeps a GET stream open for as long as its
// session lasts; the server's graceful shutdown ends it instead of waiting for it until the
// deadline (after which the guarded calls still under way would be abandoned outcome_unknown),
// and lets a guarded call in flight finish.
func TestMCPShutdownEndsGETStreams(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	cfg, err := routes.Parse("routes.yaml", []byte(mcpRoutes(up.url, "")), nil)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, openEmbedded(t), gateway.Options{Fronts: fronts, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(gw, server.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterOnShutdown(gw.EndStreams) // as cmd/idemgateway registers it
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	cs, _ := connectMCP(t, "http://"+ln.Addr().String(), "2025-11-25", nil) // opens its GET stream
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	result := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), toolParams("slow_create", "k1", nil))
		result <- answer{res, err}
	}()
	up.awaitStarted(t)                                  // the call is in flight until finish is closed:
	srv.RegisterOnShutdown(func() { close(up.finish) }) // once the shutdown has begun
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v after %v, want it done once the guarded call is", err, time.Since(start))
	}
	if a := <-result; a.err != nil || structuredID(t, a.res) != "T-1" {
		t.Errorf("the guarded call in flight got %v, want its result", a.err)
	}
}

// TestMCPDiscoveryHonoursTTLFloor: a server whose tool list says ttlMs: 1 (stale at once) does
// not get a listing (a session, initialize, tools/list, DELETE) per guarded call: the gateway
// lists again no sooner than minToolsTTL (a second) on its clock, which the test moves.
func TestMCPDiscoveryHonoursTTLFloor(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	var lists atomic.Int32
	up.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if l, ok := res.(*mcp.ListToolsResult); ok {
				lists.Add(1)
				l.TTLMs = 1
			}
			return res, err
		}
	})
	yaml := strings.Replace(mcpRoutes(up.url, ""), "timeout: 10s}", "timeout: 10s, mcp: {discover_tools: true, trust_annotations: true}}", 1)
	srv, _, gw := newGatewayYAML(t, openEmbedded, yaml, gateway.Options{})
	c := testclock.New(time.Now())
	gw.SetClock(c.Now)
	call := func(i int) {
		postRaw(t, srv.URL+"/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","_meta":{"%s":"k%d"}}}`, metaKey, i))
	}
	call(0)
	eventually.True(t, "the first listing", func() bool { return lists.Load() == 1 })
	for i := range 20 {
		call(1 + i)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("the server was listed %d times for 21 calls within the floor, want once", n)
	}
	c.Advance(time.Second + time.Millisecond) // past the floor: the next call lists again
	call(21)
	eventually.True(t, "the second listing, once the floor passed", func() bool { return lists.Load() == 2 })
}

// TestMCPNoFinalAnswerIs200: the gateway's answer in place of an upstream's 2xx that holds no
// final response (a 202 or a 204 to a tools/call, an empty batch) goes at HTTP 200: a client reads no body from a
// 202 and would wait for the call's response forever, and a 204 cannot carry one.
func TestMCPNoFinalAnswerIs200(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, ct, body string
		status         int
		want           string // in the answer
		decision       string // of the retry
	}{
		{"202", "", "", http.StatusAccepted, "Unknown whether the call took effect", "outcome_unknown"},
		{"an empty JSON batch", "application/json", "[ ]", http.StatusOK, "Unknown whether the call took effect", "outcome_unknown"},
		{"204", "", "", http.StatusNoContent, "Unknown whether the call took effect", "outcome_unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.ct != "" {
					w.Header().Set("Content-Type", c.ct)
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			t.Cleanup(upstream.Close)
			srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(upstream.URL, ""), gateway.Options{})
			call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","_meta":{"` + metaKey + `":"k1"}}}`
			if status, _, body := postRaw(t, srv.URL+"/mcp", call); status != http.StatusOK || !strings.Contains(body, c.want) {
				t.Errorf("%d %.200s, want 200 with %s", status, body, c.want)
			}
			if _, h, body := postRaw(t, srv.URL+"/mcp", call); h.Get("Idempotency-Decision") != c.decision {
				t.Errorf("retry: %q %.200s, want %s", h.Get("Idempotency-Decision"), body, c.decision)
			}
		})
	}
}

// TestMCPBatchedFinalResponse: a tool server of 2025-03-26 may send its messages batched, in one
// SSE event or a JSON answer: the call's final response found in a batch (after a progress
// notification, or alone) settles the record committed, the client gets the answer once, as the
// server sent it, with no answer of the gateway's after it, and a retry replays it.
func TestMCPBatchedFinalResponse(t *testing.T) {
	t.Parallel()
	const progress = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`
	final := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"T-7 created"}]}}`
	}
	for _, c := range []struct {
		name, ct string
		body     func(id string) string
	}{
		{"SSE, progress and final", "text/event-stream", func(id string) string { return "data: [" + progress + "," + final(id) + "]\n\n" }},
		{"SSE, final alone", "text/event-stream", func(id string) string { return "data: [" + final(id) + "]\n\n" }},
		{"JSON", "application/json", func(id string) string { return "[" + final(id) + "]" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				var msg struct{ ID json.RawMessage }
				_ = json.NewDecoder(r.Body).Decode(&msg)
				w.Header().Set("Content-Type", c.ct)
				_, _ = io.WriteString(w, c.body(string(msg.ID)))
			}))
			t.Cleanup(upstream.Close)
			srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(upstream.URL, ""), gateway.Options{})
			call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_ticket","_meta":{"` + metaKey + `":"k1"}}}`
			status, h, body := postRaw(t, srv.URL+"/mcp", call)
			if status != http.StatusOK || h.Get("Idempotency-Decision") != "execute" || strings.Count(body, `"id":7`) != 1 ||
				!strings.Contains(body, "T-7 created") || strings.Contains(body, "Unknown whether") {
				t.Errorf("%d %q %.400s, want 200 execute with the server's answer for id 7 once, and nothing after it", status, h.Get("Idempotency-Decision"), body)
			}
			status, h, body = postRaw(t, srv.URL+"/mcp", strings.Replace(call, `"id":7`, `"id":8`, 1))
			if status != http.StatusOK || h.Get("Idempotency-Decision") != "replay" || !strings.Contains(body, `"id":8`) || !strings.Contains(body, "T-7 created") || calls.Load() != 1 {
				t.Errorf("retry: %d %q %.400s, %d upstream calls; want the replay for id 8, 1 call", status, h.Get("Idempotency-Decision"), body, calls.Load())
			}
		})
	}
}

// TestMCPCutOffMidStream: a shutdown that cuts off a guarded call whose SSE answer has begun (the
// client has read a progress notification, then nothing comes) ends the answer with the tool
// error of an unknown outcome that says the gateway shut down, not "context canceled", and leaves
// the record outcome_unknown with that reason. The upstream's timeout is an hour: only the cut
// ends the call.
func TestMCPCutOffMidStream(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(upstream.Close)
	srv, store, gw := newGatewayYAML(t, openEmbedded, strings.Replace(mcpRoutes(upstream.URL, ""), "timeout: 10s", "timeout: 1h", 1), gateway.Options{})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","_meta":{"` + metaKey + `":"k1"}}}`
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(call))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, "notifications/progress") {
		t.Fatalf("the answer's first line %q, %v: want the progress notification", line, err)
	}
	if n := gw.CutOff(); n != 1 {
		t.Fatalf("CutOff cut %d calls, want 1", n)
	}
	rest, _ := io.ReadAll(rd)
	if body := string(rest); !strings.Contains(body, "Unknown whether the call took effect") || !strings.Contains(body, "the gateway shut down") || strings.Contains(body, "context canceled") {
		t.Errorf("the rest of the cut-off call's answer %.600s: want the unknown outcome's tool error saying that the gateway shut down", body)
	}
	state, stored, _ := store.Get(context.Background(), record.ScopeKey{Tenant: "default", Tool: "tickets/create_ticket", Key: "k1"}.String())
	if state != record.StateUnknown || !bytes.Contains(stored.Settle, []byte("the gateway shut down")) {
		t.Errorf("record %q %q, want outcome_unknown saying that the gateway shut down", state, stored.Settle)
	}
}

// TestMCPToolListNotInvalidatedByContent: what a tool's result says is not a
// notifications/tools/list_changed: a read-only tool whose (SSE) result text names that method
// leaves the classes the gateway learned from the server's tool list, so the tool's next call still
// passes through and is not refused for want of a key.
func TestMCPToolListNotInvalidatedByContent(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	up.server.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text}}}, nil
		})
	yaml := strings.Replace(mcpRoutes(up.url, ""), "timeout: 10s}", "timeout: 10s, mcp: {trust_annotations: true}}", 1)
	srv, _, _ := newGatewayYAML(t, openEmbedded, yaml, gateway.Options{})
	cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"on MCP, servers send notifications/tools/list_changed", "again"} {
		if res := callTool(t, cs, "echo", "", map[string]any{"text": text}); res.IsError || len(decisions(tap)) != 0 {
			t.Fatalf("echo %q: %s (decisions %v), want it passed through", text, resultText(res), decisions(tap))
		}
	}
}
