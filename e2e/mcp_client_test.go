package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/internal/eventually"
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

// mcpClient is a go-sdk client session through the gateway, and what the gateway answered to its
// tools/call requests at the HTTP level, which go-sdk does not show.
type mcpClient struct {
	*mcp.ClientSession
	way  mcpWay
	wire *wire
}

// wire is an http.RoundTripper that records the HTTP answers to tools/call requests, and the
// statuses of the answers to DELETE (the end of a session).
type wire struct {
	mu      sync.Mutex
	answers []wireAnswer
	deletes []int
}

// wireAnswer is the HTTP side of the gateway's answer to one tools/call POST.
type wireAnswer struct {
	status      int
	decision    string // Idempotency-Decision
	replayed    string // Idempotent-Replayed
	fingerprint string // Idempotency-Fingerprint
	sessionID   string // Mcp-Session-Id
	contentType string
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	isCall := false
	if req.Method == http.MethodPost && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		isCall = bytes.Contains(b, []byte(`"tools/call"`))
	}
	resp, err := Client.Transport.RoundTrip(req)
	if err == nil && req.Method == http.MethodDelete {
		w.mu.Lock()
		w.deletes = append(w.deletes, resp.StatusCode)
		w.mu.Unlock()
	}
	if err == nil && isCall {
		w.mu.Lock()
		w.answers = append(w.answers, wireAnswer{
			status:      resp.StatusCode,
			decision:    resp.Header.Get("Idempotency-Decision"),
			replayed:    resp.Header.Get("Idempotent-Replayed"),
			fingerprint: resp.Header.Get("Idempotency-Fingerprint"),
			sessionID:   resp.Header.Get("Mcp-Session-Id"),
			contentType: resp.Header.Get("Content-Type"),
		})
		w.mu.Unlock()
	}
	return resp, err
}

// last is the answer to the latest tools/call.
func (w *wire) last(t *testing.T) wireAnswer {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.answers) == 0 {
		t.Fatal("no tools/call answer recorded")
	}
	return w.answers[len(w.answers)-1]
}

// mcpConnect connects a go-sdk client to the gateway's route of way w, in w's protocol era; the
// session closes when the test ends.
func (g *Gateway) mcpConnect(t *testing.T, w mcpWay, opts *mcp.ClientOptions) *mcpClient {
	t.Helper()
	wr := &wire{}
	c := mcp.NewClient(&mcp.Implementation{Name: "idemgateway-e2e", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.Proxy + w.path, HTTPClient: &http.Client{Transport: wr}},
		&mcp.ClientSessionOptions{ProtocolVersion: w.version})
	if err != nil {
		t.Fatalf("connect %s (%s): %v", w.path, w.version, err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != w.version {
		t.Fatalf("connect %s: the session speaks %s, want %s", w.path, v, w.version)
	}
	return &mcpClient{ClientSession: cs, way: w, wire: wr}
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
func (c *mcpClient) expectDecisionHeaders(t *testing.T, decision string) wireAnswer {
	t.Helper()
	a := c.wire.last(t)
	if a.status != http.StatusOK {
		t.Errorf("HTTP status %d, want 200", a.status)
	}
	if a.decision != decision {
		t.Errorf("Idempotency-Decision %q, want %q", a.decision, decision)
	}
	if want := map[bool]string{true: "true"}[decision == "replay"]; a.replayed != want {
		t.Errorf("Idempotent-Replayed %q, want %q", a.replayed, want)
	}
	if decision != "execute" && a.sessionID != "" {
		t.Errorf("Mcp-Session-Id %q on a %s answer, want none", a.sessionID, decision)
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
