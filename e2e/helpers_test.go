package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/wiretap"
)

// expectUp checks how many tickets the sandbox created: the upstream side effects ("Up×N").
func expectUp(t *testing.T, sb *Sandbox, want int) {
	t.Helper()
	if got := sb.Stats(t).ByEndpoint[TicketsEndpoint]; got != want {
		t.Errorf("upstream side effects: Up×%d, want Up×%d", got, want)
	}
}

// expectAttempts checks how many requests reached the sandbox's ticket endpoint.
func expectAttempts(t *testing.T, sb *Sandbox, want int) {
	t.Helper()
	if got := sb.Stats(t).Requests.ByEndpoint[TicketsEndpoint]; got != want {
		t.Errorf("upstream attempts: %d, want %d", got, want)
	}
}

// expectDecision checks the status and the Idempotency-Decision header; decision "" means the
// header must be absent.
func expectDecision(t *testing.T, r Response, status int, decision string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d; body %.400s", r.Status, status, r.Body)
	}
	got := r.Header.Values("Idempotency-Decision")
	switch {
	case decision == "" && len(got) > 0:
		t.Errorf("Idempotency-Decision %q, want none", got)
	case decision != "" && (len(got) != 1 || got[0] != decision):
		t.Errorf("Idempotency-Decision %q, want %q", got, decision)
	}
}

// expectProblem checks a problem answer: status, Idempotency-Decision header (absent when
// decision is ""), and the problem's type name, status, decision ("rejected" when the header is
// absent) and retryable members.
func expectProblem(t *testing.T, r Response, status int, name, decision string, retryable bool) {
	t.Helper()
	expectDecision(t, r, status, decision)
	p := r.Problem
	if p == nil {
		t.Fatalf("Content-Type %q, want application/problem+json; body %.400s", r.Header.Get("Content-Type"), r.Body)
	}
	if !strings.HasSuffix(p.Type, ":"+name) && !strings.HasSuffix(p.Type, "/"+name) {
		t.Errorf("problem type %q, want one ending in %q", p.Type, name)
	}
	if p.Status != status {
		t.Errorf("problem status %d, want %d", p.Status, status)
	}
	wantDecision := decision
	if wantDecision == "" {
		wantDecision = "rejected"
	}
	if p.Decision != wantDecision {
		t.Errorf("problem decision %q, want %q", p.Decision, wantDecision)
	}
	switch {
	case p.Retryable == nil:
		t.Errorf("problem has no retryable member")
	case *p.Retryable != retryable:
		t.Errorf("problem retryable %v, want %v", *p.Retryable, retryable)
	}
	if p.Title == "" || p.Detail == "" {
		t.Errorf("problem title %q, detail %q: want both", p.Title, p.Detail)
	}
}

// expectRetryAfter checks that the response carries a Retry-After of whole seconds.
func expectRetryAfter(t *testing.T, r Response) {
	t.Helper()
	if v := r.Header.Get("Retry-After"); !regexp.MustCompile(`^[0-9]+$`).MatchString(v) {
		t.Errorf("Retry-After %q, want a number of seconds", v)
	}
}

var fingerprintPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// expectFingerprint checks the Idempotency-Fingerprint header and returns it.
func expectFingerprint(t *testing.T, r Response) string {
	t.Helper()
	fp := r.Header.Get("Idempotency-Fingerprint")
	if !fingerprintPattern.MatchString(fp) {
		t.Errorf("Idempotency-Fingerprint %q, want sha256: and 64 hex digits", fp)
	}
	return fp
}

// expectReplayOf checks that r replays first: the stored status and body, the replay headers.
func expectReplayOf(t *testing.T, r, first Response) {
	t.Helper()
	expectDecision(t, r, first.Status, "replay")
	if got := r.Header.Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("Idempotent-Replayed %q, want true", got)
	}
	if !bytes.Equal(r.Body, first.Body) {
		t.Errorf("replayed body\n%.400s\nwant the first response's\n%.400s", r.Body, first.Body)
	}
	if got, want := r.Header.Get("Content-Type"), first.Header.Get("Content-Type"); got != want {
		t.Errorf("replayed Content-Type %q, want %q", got, want)
	}
	if got, want := r.Header.Get("Idempotency-Fingerprint"), first.Header.Get("Idempotency-Fingerprint"); got != want {
		t.Errorf("replayed Idempotency-Fingerprint %q, want %q", got, want)
	}
}

// expectCreated checks a first execution that created a ticket, and returns the ticket's id.
func expectCreated(t *testing.T, r Response) string {
	t.Helper()
	expectDecision(t, r, http.StatusCreated, "execute")
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("Idempotent-Replayed %q on an execution", r.Header.Get("Idempotent-Replayed"))
	}
	expectFingerprint(t, r)
	if r.Status != http.StatusCreated {
		t.FailNow()
	}
	id, _ := r.json(t)["id"].(string)
	if !strings.HasPrefix(id, "T-") {
		t.Errorf("ticket id %q, want T-…", id)
	}
	return id
}

// pending is a request sent from another goroutine.
type pending struct {
	done chan struct{}
	resp Response
	err  error
}

// goSend sends req from a new goroutine; wait returns its response.
func goSend(g *Gateway, req Request) *pending {
	p := &pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.resp, p.err = g.Send(req)
	}()
	return p
}

func (p *pending) wait(t *testing.T) Response {
	t.Helper()
	<-p.done
	if p.err != nil {
		t.Fatalf("request: %v", p.err)
	}
	return p.resp
}

// heldDetached returns the headers of a call that the sandbox holds on name until release, then
// performs whatever became of its caller.
func heldDetached(name string) map[string]string {
	return map[string]string{headerHold: name, HeaderDetach: "1"}
}

// waitUp polls the sandbox until it has performed want ticket side effects (an upstream that acts
// after its caller left does so on its own time), then checks that there are exactly that many.
func waitUp(t *testing.T, sb *Sandbox, want int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("the sandbox to perform Up×%d", want), func() bool {
		return sb.Stats(t).ByEndpoint[TicketsEndpoint] >= want
	})
	expectUp(t, sb, want)
}

// held returns req with the headers of a call that the sandbox holds on name until the test
// releases it, and then performs whatever became of its caller (heldDetached).
func held(req Request, name string) Request {
	hdr := heldDetached(name)
	for k, v := range req.Header {
		hdr[k] = v
	}
	req.Header = hdr
	return req
}

// sendHeldDuplicates sends req, held under name, to each gateway of gws at the same moment. It
// waits until one of them has reached the upstream and every other has been answered while that
// one is held, then releases it. It returns the answers in the order of gws and the index of the
// one that was held. A second request that reaches the upstream is a test error (it executed
// twice); it is released too, so that the test can go on.
func sendHeldDuplicates(t *testing.T, sb *Sandbox, name string, req Request, gws []*Gateway) (resps []Response, heldAt int) {
	t.Helper()
	req = held(req, name)
	type result struct {
		i    int
		resp Response
		err  error
	}
	results := make(chan result, len(gws))
	start := make(chan struct{})
	for i, g := range gws {
		go func() {
			<-start
			r, err := g.Send(req)
			results <- result{i, r, err}
		}()
	}
	close(start)
	resps = make([]Response, len(gws))
	answered := make([]bool, len(gws))
	deadline := time.After(holdTimeout)
	arrivals, answers := 0, 0
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for arrivals == 0 || answers+arrivals < len(gws) {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("request %d: %v", r.i, r.err)
			}
			resps[r.i], answered[r.i] = r.resp, true
			answers++
		case <-poll.C:
			if arrivals = sb.holding(t, name); arrivals > 1 {
				t.Errorf("%d requests with key %q reached the upstream while the first was held: executed more than once", arrivals, req.Key)
			}
		case <-deadline:
			t.Fatalf("after %s: %d of %d requests answered, %d held at the upstream", holdTimeout, answers, len(gws), arrivals)
		}
	}
	sb.release(t, name)
	heldAt = -1
	for answers < len(gws) {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("request %d: %v", r.i, r.err)
			}
			resps[r.i], answered[r.i] = r.resp, true
			answers++
			if heldAt == -1 {
				heldAt = r.i
			}
		case <-deadline:
			t.Fatalf("after %s: the released request was not answered", holdTimeout)
		}
	}
	if heldAt == -1 {
		t.Fatalf("every request was answered before the held one was released: %d answers", answers)
	}
	return resps, heldAt
}

const ticketBody = `{"title":"Disk full on db-1","priority":"high","customer_id":"c-42"}`

// expectConflict checks a 422 idempotency-key-reused with its members (docs/contract.md §4).
// existingRemoteID "" means the member must be absent or empty (the first request is in flight).
func expectConflict(t *testing.T, r Response, existingFP, existingRemoteID string) {
	t.Helper()
	expectProblem(t, r, http.StatusUnprocessableEntity, "idempotency-key-reused", "conflict", false)
	p := r.Problem
	if p == nil {
		return
	}
	if p.Reason != "idempotency_key_reused_with_different_effect" {
		t.Errorf("reason %q, want idempotency_key_reused_with_different_effect", p.Reason)
	}
	if p.ExistingFingerprint != existingFP {
		t.Errorf("existing_fingerprint %q, want the first request's %q", p.ExistingFingerprint, existingFP)
	}
	if !fingerprintPattern.MatchString(p.ReceivedFingerprint) || p.ReceivedFingerprint == existingFP {
		t.Errorf("received_fingerprint %q, want a fingerprint other than %q", p.ReceivedFingerprint, existingFP)
	}
	if h := r.Header.Get("Idempotency-Fingerprint"); h != p.ReceivedFingerprint {
		t.Errorf("Idempotency-Fingerprint %q, want received_fingerprint %q", h, p.ReceivedFingerprint)
	}
	if p.ExistingRemoteID != existingRemoteID {
		t.Errorf("existing_remote_id %q, want %q", p.ExistingRemoteID, existingRemoteID)
	}
	if p.IdempotencyKey == "" {
		t.Errorf("no idempotency_key in the problem")
	}
}

// expectNoRoute checks a 404 no-route problem. The request is on no route, so the problem's
// decision member (a §4 member, for requests on a route) may be absent.
func expectNoRoute(t *testing.T, r Response) {
	t.Helper()
	if r.Problem != nil && r.Problem.Decision == "" {
		r.Problem.Decision = "rejected"
	}
	expectProblem(t, r, http.StatusNotFound, "no-route", "", false)
}

// rawConn is a raw connection to a listener of the gateway at base ("http://host:port").
func rawConn(t *testing.T, base string, readBuffer int) (*net.TCPConn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.TCPConn)
	if readBuffer > 0 {
		if err := conn.SetReadBuffer(readBuffer); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

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

// newMCPEnv starts a store of kind, a sandbox and a gateway on the MCP routes.
func newMCPEnv(t *testing.T, kind storeKind) *env {
	t.Helper()
	return newEnv(t, kind, envOptions{routes: "mcp.yaml.tmpl"})
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

// The official TypeScript MCP client (e2e/mcpts), which runTS runs through the gateway.

// tsConfig is what e2e/mcpts/call.mjs does: call tool Times times with the key in _meta.
type tsConfig struct {
	URL       string         `json:"url"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	MetaKey   string         `json:"metaKey"`
	Key       string         `json:"key"`
	Times     int            `json:"times"`
	Parallel  bool           `json:"parallel"`
}

// tsOutput is what call.mjs prints.
type tsOutput struct {
	SessionID *string           `json:"sessionId"`
	IDs       []json.RawMessage `json:"ids"`
	Calls     []tsCall          `json:"calls"`
}

// tsCall is one call's outcome as the TypeScript client saw it.
type tsCall struct {
	IsError           bool           `json:"isError"`
	Texts             []string       `json:"texts"`
	StructuredContent map[string]any `json:"structuredContent"`
	Meta              map[string]any `json:"meta"`
	Error             *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	SessionID *string `json:"sessionId"`
}

// ticket is the ticket id of a successful call, "" otherwise.
func (c tsCall) ticket() string {
	id, _ := c.StructuredContent["id"].(string)
	if c.IsError || c.Error != nil || !strings.HasPrefix(id, "T-") {
		return ""
	}
	return id
}

// decision is the decision of a refusal's _meta, "" when there is none.
func (c tsCall) decision() string {
	m, _ := c.Meta[metaIdempotency].(map[string]any)
	d, _ := m["decision"].(string)
	return d
}

// runTS runs the TypeScript client with cfg against the gateway's route of way w.
func (g *Gateway) runTS(t *testing.T, w mcpWay, cfg tsConfig) tsOutput {
	t.Helper()
	cfg.URL, cfg.MetaKey = g.Proxy+w.path, metaKey
	var out tsOutput
	runNode(t, "call.mjs", cfg, &out)
	if len(out.Calls) != cfg.Times {
		t.Fatalf("call.mjs printed %d calls, want %d", len(out.Calls), cfg.Times)
	}
	return out
}

// runNode runs script, a client of e2e/mcpts, with cfg as its JSON argument, and reads the JSON
// line it prints into out. Without Node.js or the installed clients the test fails, saying what to
// install: it is never skipped.
func runNode(t *testing.T, script string, cfg, out any) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: the TypeScript MCP clients need Node.js 20+ and npm " +
			"(Debian: apt-get install nodejs npm), then make mcpts (npm ci --prefix e2e/mcpts)")
	}
	if _, err := os.Stat(filepath.Join("mcpts", "node_modules", ".package-lock.json")); err != nil {
		t.Fatal("the TypeScript MCP clients are not installed: run make mcpts (npm ci --prefix e2e/mcpts)")
	}
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("mcpts", script), string(arg))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %s: %v\n%s", script, arg, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s printed %q: %v\n%s", script, stdout.String(), err, stderr.String())
	}
}

// expectSameSession checks that no answer moved the client to another session (it adopts any
// Mcp-Session-Id it sees; a replay or a refusal must carry none).
func (out tsOutput) expectSameSession(t *testing.T) {
	t.Helper()
	for i, c := range out.Calls {
		if (c.SessionID == nil) != (out.SessionID == nil) || c.SessionID != nil && *c.SessionID != *out.SessionID {
			t.Errorf("call %d: the client's session is %v after it, %v before: an answer carried Mcp-Session-Id", i, deref(c.SessionID), deref(out.SessionID))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// logCount counts the gateway's JSON log lines whose msg is msg.
func (p *process) logCount(msg string) int {
	n := 0
	for _, line := range strings.Split(p.Out.String(), "\n") {
		var l struct{ Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			n++
		}
	}
	return n
}

// waitLog polls the process's output until it holds n JSON log lines whose msg is msg.
func (p *process) waitLog(t *testing.T, msg string, n int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%d log lines %q of %s", n, msg, p.name), func() bool {
		return p.logCount(msg) >= n
	})
}
