package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/wiretap"
)

// The MCP side of the end-to-end tests: go-sdk clients through the gateway's kind: mcp routes
// (testdata/mcp.yaml.tmpl) to the sandbox's MCP server, and what to expect of them
// (docs/contract.md §7).

const (
	// metaKey is the member of params._meta that carries the idempotency key (the routes' key.meta).
	metaKey = "io.github.idemgateway/idempotencyKey"
	// metaIdempotency is the member of a refusal's _meta in which the gateway explains it.
	metaIdempotency = "io.github.idemgateway/idempotency"
)

// mcpWay is one way the sandbox's MCP server answers, behind a route of testdata/mcp.yaml.tmpl.
type mcpWay struct {
	name    string // the subtest's name
	path    string // the route's path on the gateway
	route   string // the route's name: the records' tool is route/tool
	version string // the protocol version the client asks for
}

// mcpWays are both protocol eras, and JSON and SSE answers.
var mcpWays = []mcpWay{
	{"sessions-sse", "/mcp", "tickets", "2025-11-25"},
	{"sessions-json", "/mcp-json", "tickets_json", "2025-11-25"},
	{"stateless", "/mcp-stateless", "tickets_stateless", "2026-07-28"},
}

// Routes of testdata/mcp.yaml.tmpl besides mcpWays.
var (
	rpcWay         = mcpWay{"jsonrpc-refusals", "/rpc/mcp-json", "tickets_rpc", "2025-11-25"}
	timeoutWay     = mcpWay{"timeout", "/timeout/mcp-json", "tickets_timeout", "2025-11-25"}
	annotationsWay = mcpWay{"annotations", "/annotations/mcp", "tickets_annotations", "2025-11-25"}
)

// newMCPEnv starts a store of kind, a sandbox and a gateway on the MCP routes.
func newMCPEnv(t *testing.T, kind storeKind) *env {
	t.Helper()
	return newEnv(t, kind, envOptions{routes: "mcp.yaml.tmpl"})
}

// forEachMCPStore runs test as a parallel subtest per store kind, each in an env of its own on the
// MCP routes.
func forEachMCPStore(t *testing.T, test func(t *testing.T, e *env)) {
	t.Helper()
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			test(t, newMCPEnv(t, kind))
		})
	}
}

// forEachWay runs test as a subtest per way, one after another in e: they share its sandbox, so a
// subtest reads the sandbox's counters as differences and uses keys of its own.
func forEachWay(t *testing.T, e *env, ways []mcpWay, test func(t *testing.T, w mcpWay)) {
	t.Helper()
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			test(t, w)
			e.sb.waitIdle(t)
		})
	}
}

// mcpClient is a go-sdk client session through the gateway, and the tap on what the gateway
// answered its tools/call and DELETE requests at the HTTP level, which go-sdk does not show.
type mcpClient struct {
	*mcp.ClientSession
	way mcpWay
	tap *wiretap.Tap
}

// lastAnswer is the HTTP answer to the client's latest tools/call; the test fails when there was
// none.
func (c *mcpClient) lastAnswer(t *testing.T) wiretap.Answer {
	t.Helper()
	a := c.tap.Last()
	if a.Status == 0 {
		t.Fatal("no tools/call answer recorded")
	}
	return a
}

// mcpConnect connects a go-sdk client to the gateway's route of way w, in w's protocol era; the
// session closes when the test ends.
func (g *Gateway) mcpConnect(t *testing.T, w mcpWay, opts *mcp.ClientOptions) *mcpClient {
	t.Helper()
	tap := wiretap.New(Client.Transport)
	c := mcp.NewClient(&mcp.Implementation{Name: "idemgateway-e2e", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.Proxy + w.path, HTTPClient: &http.Client{Transport: tap}},
		&mcp.ClientSessionOptions{ProtocolVersion: w.version})
	if err != nil {
		t.Fatalf("connect %s (%s): %v", w.path, w.version, err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != w.version {
		t.Fatalf("connect %s: the session speaks %s, want %s", w.path, v, w.version)
	}
	return &mcpClient{ClientSession: cs, way: w, tap: tap}
}

// call calls tool with args and, unless key is "", the idempotency key in params._meta.
func (c *mcpClient) call(ctx context.Context, tool string, args map[string]any, key string) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if key != "" {
		p.Meta = mcp.Meta{metaKey: key}
	}
	return c.CallTool(ctx, p)
}

// mustCall is call within 20 seconds that fails the test on a protocol error.
func (c *mcpClient) mustCall(t *testing.T, tool string, args map[string]any, key string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := c.call(ctx, tool, args, key)
	if err != nil {
		t.Fatalf("%s %s (key %q): %v", c.way.path, tool, key, err)
	}
	return res
}

// mcpAnswer is what a call made in the background (goCall) answered.
type mcpAnswer struct {
	res *mcp.CallToolResult
	err error
}

// goCall is call in a goroutine of its own, bounded by 20 seconds and by ctx: a test holds the
// call (slow_create's hold) and meanwhile sends what must meet it under way.
func (c *mcpClient) goCall(ctx context.Context, tool string, args map[string]any, key string) <-chan mcpAnswer {
	done := make(chan mcpAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		res, err := c.call(ctx, tool, args, key)
		done <- mcpAnswer{res, err}
	}()
	return done
}

// expectUsable checks that the session still works: a tools/list passes through the gateway.
func (c *mcpClient) expectUsable(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.ListTools(ctx, nil); err != nil {
		t.Errorf("the session is not usable any more: tools/list: %v", err)
	}
}

// expectTicket checks a result that created (or replays) a ticket, and returns its id.
func expectTicket(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	m, _ := res.StructuredContent.(map[string]any)
	id, _ := m["id"].(string)
	if res.IsError || !strings.HasPrefix(id, "T-") {
		t.Fatalf("isError %v, structuredContent %v, content %v; want a ticket T-…", res.IsError, res.StructuredContent, texts(res))
	}
	return id
}

// texts are the text contents of a result.
func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

// expectRefusal checks a refusal of the gateway as a tool error (refusal: tool_error): isError, a
// text for the model, no structuredContent, and _meta[metaIdempotency] with the decision and
// retryable. It returns that _meta member.
func expectRefusal(t *testing.T, res *mcp.CallToolResult, decision string, retryable bool) map[string]any {
	t.Helper()
	if !res.IsError {
		t.Fatalf("isError false, structuredContent %v; want a refusal (%s)", res.StructuredContent, decision)
	}
	if res.StructuredContent != nil {
		t.Errorf("a refusal with structuredContent %v", res.StructuredContent)
	}
	if tx := texts(res); len(tx) == 0 || strings.TrimSpace(strings.Join(tx, "")) == "" {
		t.Errorf("a refusal without a text for the model: content %v", res.Content)
	}
	m, _ := res.Meta[metaIdempotency].(map[string]any)
	if m == nil {
		t.Fatalf("_meta %v: no %q object", res.Meta, metaIdempotency)
	}
	if m["decision"] != decision {
		t.Errorf("_meta decision %v, want %s (text %q)", m["decision"], decision, texts(res))
	}
	if m["retryable"] != retryable {
		t.Errorf("_meta retryable %v, want %v", m["retryable"], retryable)
	}
	return m
}

// expectDecisionHeaders checks the HTTP answer of the latest tools/call: its
// Idempotency-Decision, Idempotent-Replayed on a replay only, and never an Mcp-Session-Id on a
// replay or a refusal.
func (c *mcpClient) expectDecisionHeaders(t *testing.T, decision string) wiretap.Answer {
	t.Helper()
	a := c.lastAnswer(t)
	if a.Status != http.StatusOK {
		t.Errorf("HTTP status %d, want 200", a.Status)
	}
	if a.Decision != decision {
		t.Errorf("Idempotency-Decision %q, want %q", a.Decision, decision)
	}
	if want := map[bool]string{true: "true"}[decision == "replay"]; a.Replayed != want {
		t.Errorf("Idempotent-Replayed %q, want %q", a.Replayed, want)
	}
	if decision != "execute" && a.SessionID != "" {
		t.Errorf("Mcp-Session-Id %q on a %s answer, want none", a.SessionID, decision)
	}
	return a
}

// mcpCounts are the sandbox's counters of one MCP tool: side effects, calls that reached it, calls
// it saw cancelled.
type mcpCounts struct{ effects, calls, cancelled int }

// mcpCounts reads the counters of tool ("create_ticket").
func (sb *Sandbox) mcpCounts(t *testing.T, tool string) mcpCounts {
	t.Helper()
	st := sb.Stats(t)
	return mcpCounts{effects: st.ByEndpoint["mcp."+tool], calls: st.Requests.ByEndpoint["mcp."+tool],
		cancelled: st.Cancelled.ByEndpoint["mcp."+tool]}
}

// expectSince checks how many effects and calls of tool the sandbox counted since before.
func (sb *Sandbox) expectSince(t *testing.T, tool string, before mcpCounts, effects, calls int) {
	t.Helper()
	now := sb.mcpCounts(t, tool)
	if got := now.effects - before.effects; got != effects {
		t.Errorf("%s: %d side effects, want %d", tool, got, effects)
	}
	if got := now.calls - before.calls; got != calls {
		t.Errorf("%s: %d calls reached the server, want %d", tool, got, calls)
	}
	// cancel: finish (the default): a client's cancel never reaches the server (docs/contract.md §7).
	if got := now.cancelled - before.cancelled; got != 0 {
		t.Errorf("%s: the server saw %d calls cancelled, want none", tool, got)
	}
}

// waitIdle waits until the sandbox serves nothing: a tool that outlived its client has finished.
func (sb *Sandbox) waitIdle(t *testing.T) {
	t.Helper()
	eventually.True(t, "the sandbox to finish its calls", func() bool {
		st := sb.Stats(t)
		return st.InFlight != nil && *st.InFlight == 0
	})
}
