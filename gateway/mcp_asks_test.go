package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
)

// A server that asks the client for confirmation in the middle of a guarded call (docs/cases.md
// C28): the person's wait is not the upstream's.

// confirmUpstream is a go-sdk server (sessions, SSE answers) whose confirm_create tool asks the
// client for confirmation (elicitation/create) and creates a ticket when it is accepted. It counts
// tickets, and the clients' answers that reached it.
type confirmUpstream struct {
	url     string
	created atomic.Int32
	answers atomic.Int32  // JSON-RPC responses POSTed to it: the clients' answers to its asks
	stop    chan struct{} // closed at the test's end: an ask no answer reaches ends then
}

func newConfirmUpstream(t *testing.T) *confirmUpstream {
	t.Helper()
	u := &confirmUpstream{stop: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "confirm_create", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-u.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Create the ticket?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
			if err != nil || res.Action != "accept" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("not confirmed (%v)", err)}}}, nil
			}
			id := fmt.Sprintf("T-%d", u.created.Add(1))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created " + id}}, StructuredContent: map[string]any{"id": id}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"result"`)) && !bytes.Contains(body, []byte(`"method"`)) {
				u.answers.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(u.stop) }) // before srv.Close, which waits for the tool
	u.url = srv.URL
	return u
}

// confirmRoutes is a kind: mcp route in front of upstream with the given upstream timeout and
// stream_idle_timeout (which bounds a wait on the client).
func confirmRoutes(upstream, timeout, idle string) string {
	return fmt.Sprintf(`
upstreams:
  mcp: {url: %q, timeout: %s, mcp: {stream_idle_timeout: %s}}
routes:
  - name: tickets
    kind: mcp
    upstream: mcp
    path: /mcp
    key: {meta: %s}
    tools:
      confirm_create: {receipt: {remote_id: /result/structuredContent/id}}
`, upstream, timeout, idle, metaKey)
}

// confirmingClient connects a go-sdk client whose person answers each confirmation (accept) once
// the test closes answer; asked gets a value when a confirmation is asked for. answers records the
// HTTP status of each answer the client POSTs.
func confirmingClient(t *testing.T, gw string, asked chan<- struct{}, answer <-chan struct{}) (*mcp.ClientSession, *answerStatuses) {
	t.Helper()
	statuses := &answerStatuses{next: http.DefaultTransport}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- struct{}{}
			select {
			case <-answer:
				return &mcp.ElicitResult{Action: "accept"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	// The session's GET stream is bounded by stream_idle_timeout too: the client reconnects it.
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw + "/mcp", HTTPClient: &http.Client{Transport: statuses}, MaxRetries: 10},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, statuses
}

// answerStatuses records the HTTP status of each JSON-RPC response a client POSTs.
type answerStatuses struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []int
}

func (a *answerStatuses) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Method == http.MethodPost && r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := a.next.RoundTrip(r)
	if err == nil && bytes.Contains(body, []byte(`"result"`)) && !bytes.Contains(body, []byte(`"method"`)) {
		a.mu.Lock()
		a.got = append(a.got, resp.StatusCode)
		a.mu.Unlock()
	}
	return resp, err
}

func (a *answerStatuses) statuses() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.got...)
}

// callConfirm calls confirm_create under the key k1 in the background; its answer, or the error
// as a tool error's text, comes on the channel.
func callConfirm(cs *mcp.ClientSession) <-chan *mcp.CallToolResult {
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), toolParams("confirm_create", "k1", nil))
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	return done
}

// TestConfirmationOutlivesTheUpstreamTimeout (case C28, in-process; e2e TestC28_*): the tool asks
// for confirmation, and the person answers after the route's upstream timeout (1 s) has passed: the call is still in
// flight, the accepted action happens once, and its result is the receipt a retry replays.
func TestConfirmationOutlivesTheUpstreamTimeout(t *testing.T) {
	t.Parallel()
	up := newConfirmUpstream(t)
	srv, _, _ := newGatewayYAML(t, openEmbedded, confirmRoutes(up.url, "1s", "1m"), gateway.Options{})
	asked, answer := make(chan struct{}, 1), make(chan struct{})
	cs, _ := confirmingClient(t, srv.URL, asked, answer)
	done := callConfirm(cs)
	<-asked
	// The person's time, in wall time past the upstream timeout: only wall time shows that the
	// timeout does not run while the server waits on the client.
	time.Sleep(1500 * time.Millisecond)
	close(answer)
	res := <-done
	if res.IsError || structuredID(t, res) != "T-1" {
		t.Fatalf("the confirmed call: %s, want its ticket", resultText(res))
	}
	if again := callTool(t, cs, "confirm_create", "k1", nil); again.IsError || structuredID(t, again) != "T-1" {
		t.Errorf("the retry: %s, want the ticket replayed", resultText(again))
	}
	if n := up.created.Load(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}
	if n := up.answers.Load(); n != 1 { // counted as it reached the server, before the ticket
		t.Errorf("the server got %d answers, want the one relayed", n)
	}
}

// TestLateConfirmationNotRelayed (case C28): the person does not answer within stream_idle_timeout
// (1 s), which bounds the wait: the call ends with an unknown outcome. The answer that comes
// after is refused 409 with a JSON-RPC error, and never reaches the server, which does not act.
func TestLateConfirmationNotRelayed(t *testing.T) {
	t.Parallel()
	up := newConfirmUpstream(t)
	srv, _, _ := newGatewayYAML(t, openEmbedded, confirmRoutes(up.url, "10s", "1s"), gateway.Options{})
	asked, answer := make(chan struct{}, 1), make(chan struct{})
	cs, statuses := confirmingClient(t, srv.URL, asked, answer)
	done := callConfirm(cs)
	<-asked
	res := <-done // the hold's limit ends the call
	if !res.IsError || !strings.Contains(resultText(res), "Unknown whether the call took effect") ||
		!strings.Contains(resultText(res), "upstream timed out after 1s waiting on the client") {
		t.Fatalf("a call whose confirmation outlived stream_idle_timeout: %s, want an unknown outcome", resultText(res))
	}
	close(answer)
	eventually.True(t, "the late answer refused", func() bool { s := statuses.statuses(); return len(s) == 1 && s[0] == http.StatusConflict })
	if n, c := up.answers.Load(), up.created.Load(); n != 0 || c != 0 {
		t.Errorf("the server got %d answers and created %d tickets, want none", n, c)
	}
}
