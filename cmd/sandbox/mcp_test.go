package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// mcpPaths are the sandbox's MCP endpoints, each with the protocol version a client speaks to it
// and whether its answers are SSE streams (which carry progress notifications).
var mcpPaths = []struct {
	path, version string
	sessions, sse bool
}{
	{"/mcp", "2025-11-25", true, true},
	{"/mcp-json", "2025-11-25", true, false},
	{"/mcp-stateless", "2026-07-28", false, true},
}

// ticketID is the id in a result's structuredContent ("" when absent).
func ticketID(res *mcp.CallToolResult) string {
	m, _ := res.StructuredContent.(map[string]any)
	id, _ := m["id"].(string)
	return id
}

// TestMCPTools calls every tool on every endpoint and checks the answer and the counters.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	for _, p := range mcpPaths {
		t.Run(strings.TrimPrefix(p.path, "/"), func(t *testing.T) {
			t.Parallel()
			_, srv := newTestSandbox(t)
			cs := connectMCP(t, srv.URL+p.path, p.version, nil)
			if got := cs.ID() != ""; got != p.sessions {
				t.Errorf("session id %q: has a session = %v, want %v", cs.ID(), got, p.sessions)
			}
			ctx := t.Context()

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			readOnly := map[string]bool{}
			for _, tl := range tools.Tools {
				readOnly[tl.Name] = tl.Annotations != nil && tl.Annotations.ReadOnlyHint
			}
			want := map[string]bool{"create_ticket": false, "search_tickets": true, "slow_create": false,
				"progress_create": false, "failing_create": false, "broken_create": false, "confirm_create": false}
			if len(readOnly) != len(want) {
				t.Errorf("tools %v, want %v", readOnly, want)
			}
			for name, ro := range want {
				if got, ok := readOnly[name]; !ok || got != ro {
					t.Errorf("tool %s: listed %v, readOnlyHint %v; want listed, readOnlyHint %v", name, ok, got, ro)
				}
			}

			created := callTool(t, ctx, cs, "create_ticket", map[string]any{"title": "Disk full on db-1", "priority": "high"})
			id := ticketID(created)
			if created.IsError || !strings.HasPrefix(id, "T-") {
				t.Errorf("create_ticket: isError %v, structuredContent %v; want a ticket T-…", created.IsError, created.StructuredContent)
			}
			again := callTool(t, ctx, cs, "create_ticket", map[string]any{"title": "Disk full on db-1", "priority": "high"})
			if id2 := ticketID(again); id2 == id || !strings.HasPrefix(id2, "T-") {
				t.Errorf("second create_ticket: id %q after %q: the sandbox must create again", id2, id)
			}

			search := callTool(t, ctx, cs, "search_tickets", map[string]any{"query": "Disk full"})
			m, _ := search.StructuredContent.(map[string]any)
			if found, _ := m["tickets"].([]any); search.IsError || len(found) != 2 {
				t.Errorf("search_tickets: isError %v, structuredContent %v; want the 2 tickets", search.IsError, search.StructuredContent)
			}

			failed := callTool(t, ctx, cs, "failing_create", map[string]any{"title": "Printer on fire"})
			if !failed.IsError || len(failed.Content) == 0 || failed.StructuredContent != nil {
				t.Errorf("failing_create: isError %v, content %v, structuredContent %v; want a tool error with a text only",
					failed.IsError, failed.Content, failed.StructuredContent)
			} else if text, _ := failed.Content[0].(*mcp.TextContent); text == nil || !strings.Contains(text.Text, "nothing was created") {
				t.Errorf("failing_create: content %v, want a text that says nothing was created", failed.Content[0])
			}

			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "broken_create", Arguments: map[string]any{"title": "Printer on fire"}})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError {
				t.Errorf("broken_create: error %v, want a JSON-RPC error %d", err, jsonrpc.CodeInternalError)
			}

			st := getStats(t, srv.Client(), srv.URL)
			for ep, want := range map[string]int64{mcpCreateTicket: 2, mcpBrokenCreate: 1, mcpSlowCreate: 0, mcpProgressCreate: 0} {
				if got := st.ByEndpoint[ep]; got != want {
					t.Errorf("effects of %s: %d, want %d", ep, got, want)
				}
			}
			if st.Total != 3 {
				t.Errorf("effects in all: %d, want 3 (search_tickets and failing_create have none)", st.Total)
			}
			for ep, want := range map[string]int64{mcpCreateTicket: 2, mcpSearchTickets: 1, mcpFailingCreate: 1, mcpBrokenCreate: 1} {
				if got := st.Requests.ByEndpoint[ep]; got != want {
					t.Errorf("calls of %s: %d, want %d", ep, got, want)
				}
			}
			if st.InFlight != 0 {
				t.Errorf("in flight %d after every call answered", st.InFlight)
			}
		})
	}
}

// TestMCPSlowCreateCompletes: slow_create creates its ticket when the client gives up on the call
// (it cancels, go-sdk sends notifications/cancelled) and is in flight meanwhile.
func TestMCPSlowCreateCompletes(t *testing.T) {
	t.Parallel()
	for _, p := range mcpPaths {
		t.Run(strings.TrimPrefix(p.path, "/"), func(t *testing.T) {
			t.Parallel()
			s, srv := newTestSandbox(t)
			cs := connectMCP(t, srv.URL+p.path, p.version, nil)

			// The client gives up once the call is in the tool, whatever the machine's pace; the
			// tool works ten seconds more, so it is still in flight when the test looks.
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			gaveUp := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow_create", Arguments: map[string]any{"title": "Slow", "ms": 10000}})
				gaveUp <- err
			}()
			eventually.True(t, "slow_create in flight", func() bool { return s.snapshot().InFlight == 1 })
			cancel()
			if err := <-gaveUp; err == nil {
				t.Fatal("slow_create (10 s) answered though its client gave up")
			}
			if st := s.snapshot(); st.InFlight != 1 || st.ByEndpoint[mcpSlowCreate] != 0 {
				t.Errorf("after the client gave up: in flight %d, effects %d; want 1 and 0", st.InFlight, st.ByEndpoint[mcpSlowCreate])
			}
			waitIdle(t, s)
			st := s.snapshot()
			if got := st.ByEndpoint[mcpSlowCreate]; got != 1 {
				t.Errorf("slow_create effects %d after it finished, want 1: the call must complete", got)
			}
			// In the sessions era go-sdk sends notifications/cancelled, which ends the call's
			// context; a stateless client only stops reading. Either way the ticket is created.
			if got, want := st.Cancelled.ByEndpoint[mcpSlowCreate], map[bool]int64{true: 1}[p.sessions]; got != want {
				t.Errorf("slow_create cancelled %d times, want %d", got, want)
			}

			// The session is still usable, and a call that waits long enough gets the ticket.
			res := callTool(t, t.Context(), cs, "slow_create", map[string]any{"title": "Slow", "ms": 50})
			if !strings.HasPrefix(ticketID(res), "T-") {
				t.Errorf("slow_create: structuredContent %v, want a ticket", res.StructuredContent)
			}
		})
	}
}

// TestMCPSlowCreateHold: slow_create with a hold creates its ticket only once a test releases
// the hold, even after its client gave up; a reset ends the wait without a ticket. The end-to-end
// tests so hold a guarded call under way for as long as they need, without racing a clock.
func TestMCPSlowCreateHold(t *testing.T) {
	t.Parallel()
	for _, p := range mcpPaths {
		t.Run(strings.TrimPrefix(p.path, "/"), func(t *testing.T) {
			t.Parallel()
			s, srv := newTestSandbox(t)
			cs := connectMCP(t, srv.URL+p.path, p.version, nil)
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			call := func(ctx context.Context, hold string) <-chan answer {
				done := make(chan answer, 1)
				go func() {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow_create", Arguments: map[string]any{"title": "Held", "hold": hold}})
					done <- answer{res, err}
				}()
				return done
			}

			ctx, cancel := context.WithCancel(t.Context())
			gaveUp := call(ctx, "h1")
			waitHeld(t, s, "h1", 1)
			cancel() // the client gives up: the hold still decides
			if a := <-gaveUp; a.err == nil {
				t.Fatalf("slow_create answered %+v though its client gave up", a.res)
			}
			if st := s.snapshot(); st.ByEndpoint[mcpSlowCreate] != 0 {
				t.Fatalf("a ticket was created before the hold was released (%d)", st.ByEndpoint[mcpSlowCreate])
			}
			release(t, srv.URL, "h1")
			waitIdle(t, s)
			if got := s.snapshot().ByEndpoint[mcpSlowCreate]; got != 1 {
				t.Errorf("slow_create effects %d after the release, want 1", got)
			}

			aborted := call(t.Context(), "h2")
			waitHeld(t, s, "h2", 1)
			send(t, newClient(), srv.URL, request{path: "/_sandbox/reset"})
			if a := <-aborted; a.err != nil || !a.res.IsError || ticketID(a.res) != "" {
				t.Errorf("a call whose hold a reset ended: %+v, %v; want a tool error without a ticket", a.res, a.err)
			}
			if got := s.snapshot().ByEndpoint[mcpSlowCreate]; got != 0 {
				t.Errorf("slow_create effects %d after the reset, want 0", got)
			}
		})
	}
}

// waitIdle waits until no MCP tool call or API request is in flight.
func waitIdle(t *testing.T, s *sandbox) {
	t.Helper()
	eventually.True(t, "no call in flight", func() bool { return s.snapshot().InFlight == 0 })
}

// TestMCPProgressCreate: progress_create sends its notifications while it works, before its
// answer, on the endpoints that answer with SSE streams: the answer is held (progress_create's
// hold) until the client has them all.
func TestMCPProgressCreate(t *testing.T) {
	t.Parallel()
	for _, p := range mcpPaths {
		t.Run(strings.TrimPrefix(p.path, "/"), func(t *testing.T) {
			t.Parallel()
			s, srv := newTestSandbox(t)
			var (
				mu       sync.Mutex
				progress []float64
			)
			cs := connectMCP(t, srv.URL+p.path, p.version, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					progress = append(progress, req.Params.Progress)
				},
			})
			params := &mcp.CallToolParams{Name: "progress_create", Arguments: map[string]any{"title": "Migrate", "steps": 3, "step_ms": 50, "hold": "answer"}}
			params.SetProgressToken("tok-1")
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			answered := make(chan answer, 1)
			go func() {
				res, err := cs.CallTool(t.Context(), params)
				answered <- answer{res, err}
			}()
			waitHeld(t, s, "answer", 1)
			if p.sse {
				var got []float64
				eventually.True(t, "three progress notifications, before the answer", func() bool {
					mu.Lock()
					defer mu.Unlock()
					got = slices.Clone(progress)
					return len(got) >= 3
				})
				if !slices.Equal(got, []float64{1, 2, 3}) {
					t.Errorf("progress notifications %v, want [1 2 3]", got)
				}
			}
			release(t, srv.URL, "answer")
			a := <-answered
			if a.err != nil {
				t.Fatal(a.err)
			}
			if !strings.HasPrefix(ticketID(a.res), "T-") {
				t.Errorf("progress_create: structuredContent %v, want a ticket", a.res.StructuredContent)
			}
			if n := s.snapshot().ByEndpoint[mcpProgressCreate]; n != 1 {
				t.Errorf("progress_create effects %d, want 1", n)
			}
		})
	}
}

// TestMCPBadArguments: a wait out of bounds is a tool error without effect.
func TestMCPBadArguments(t *testing.T) {
	t.Parallel()
	s, srv := newTestSandbox(t)
	cs := connectMCP(t, srv.URL+"/mcp-json", "2025-11-25", nil)
	for tool, args := range map[string]map[string]any{
		"slow_create":     {"title": "x", "ms": maxSlowMS + 1},
		"progress_create": {"title": "x", "steps": maxSteps + 1},
	} {
		if res := callTool(t, t.Context(), cs, tool, args); !res.IsError {
			t.Errorf("%s %v: isError false, want a tool error", tool, args)
		}
	}
	if st := s.snapshot(); st.Total != 0 {
		t.Errorf("effects %d after refused calls, want 0", st.Total)
	}
}
