package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/routes"
)

var _ gateway.Store = (*boltstore.Store)(nil)

// newGateway serves a gateway on the embedded store in front of upstream, with one
// non_idempotent route POST /v1/tickets (receipt remote_id /id); defaults is the YAML flow
// mapping of the file's defaults block. It returns the server, the store and the gateway.
func newGateway(t *testing.T, upstream string, opts gateway.Options, defaults ...string) (*httptest.Server, gateway.Store, *gateway.Gateway) {
	t.Helper()
	if len(defaults) == 0 {
		defaults = []string{"{lock_lease: 2s}"}
	}
	yaml := fmt.Sprintf(`
upstreams:
  tickets: {url: %q, timeout: 5s}
defaults: %s
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/tickets
    class: non_idempotent
    receipt: {remote_id: /id}
`, upstream, defaults[0])
	return newGatewayYAML(t, yaml, opts)
}

// newGatewayYAML serves a gateway on the embedded store with the routes file yaml.
func newGatewayYAML(t *testing.T, yaml string, opts gateway.Options) (*httptest.Server, gateway.Store, *gateway.Gateway) {
	t.Helper()
	cfg, err := routes.Parse("routes.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	gw, err := gateway.New(cfg, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv, store, gw
}

func post(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/tickets", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestC11_NoResendAfterBytesMayHaveReachedUpstream: the upstream reads a request on a reused
// keep-alive connection and closes it without answering. Go's transport would resend a request
// that carries an Idempotency-Key header and a rewindable body; the gateway's must not.
func TestC11_NoResendAfterBytesMayHaveReachedUpstream(t *testing.T) {
	t.Parallel()
	var received atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for n := 1; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					received.Add(1)
					if req.Header.Get("Idempotency-Key") == "drop" {
						return // acted, then the connection broke: no response
					}
					body := `{"id":"T-1"}`
					fmt.Fprintf(conn, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
			}()
		}
	}()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	srv, store, _ := newGateway(t, "http://"+ln.Addr().String(), gateway.Options{TracerProvider: tp})

	if resp, _ := post(t, srv.URL, "first", `{"title":"a"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("first: status %d", resp.StatusCode)
	}
	resp, body := post(t, srv.URL, "drop", `{"title":"b"}`)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Idempotency-Decision") != "execute" {
		t.Fatalf("dropped: status %d decision %q, want 502 execute; body %s", resp.StatusCode, resp.Header.Get("Idempotency-Decision"), body)
	}
	if n := received.Load(); n != 2 {
		t.Fatalf("upstream received %d requests, want 2 (the dropped one must not be resent)", n)
	}
	state, _, err := store.Get(context.Background(), "default/create_ticket/drop")
	if err != nil || state != gateway.StateUnknown {
		t.Fatalf("record state = %q, %v; want outcome_unknown", state, err)
	}
	// Every attempt is a span event.
	var attempts int
	for _, s := range spans.GetSpans() {
		for _, e := range s.Events {
			if e.Name == "upstream.attempt" && hasAttr(s, "agent.idempotency.key", "drop") {
				attempts++
			}
		}
	}
	if attempts != 1 {
		t.Errorf("upstream.attempt events for key drop = %d, want 1", attempts)
	}
}

// TestNoTracerProvider: without Options.TracerProvider the gateway makes no spans, even when a
// recording provider is installed globally, and an incoming traceparent reaches the upstream as
// sent. (It sets the global provider: not parallel.)
func TestNoTracerProvider(t *testing.T) {
	traceparent := make(chan string, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent <- r.Header.Get("Traceparent")
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(upstream.Close)
	spans := tracetest.NewInMemoryExporter()
	before := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	srv, _, _ := newGateway(t, upstream.URL, gateway.Options{})

	const sent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(`{"a":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k-untraced")
	req.Header.Set("Traceparent", sent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := <-traceparent; got != sent {
		t.Errorf("upstream got traceparent %q, want %q", got, sent)
	}
	if n := len(spans.GetSpans()); n != 0 {
		t.Errorf("%d spans recorded without a TracerProvider, want 0", n)
	}
}

// TestAccessLine: one access line per request with the fields operators filter on; a warning of
// the request carries its tool, tenant and key too.
func TestAccessLine(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "k-fail" {
			panic(http.ErrAbortHandler) // the connection breaks: a warning, then the access line
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(upstream.Close)
	logs := &testlog.Buffer{}
	srv, _, _ := newGateway(t, upstream.URL, gateway.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(`{"a":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k-log")
	req.Header.Set("X-Actor-ID", "agent-7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	post(t, srv.URL, "k-fail", `{"a":2}`)

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3 (access, warning, access):\n%s", len(lines), logs.String())
	}
	access := lines[0]
	want := map[string]any{"level": "INFO", "msg": "request", "tool": "create_ticket", "tenant": "default", "key": "k-log",
		"key_source": "header", "method": "POST", "path": "/v1/tickets", "status": 201.0, "decision": "execute",
		"actor": "agent-7", "upstream_attempts": 1.0}
	for k, v := range want {
		if access[k] != v {
			t.Errorf("access line: %s = %v, want %v", k, access[k], v)
		}
	}
	for _, k := range []string{"duration_ms", "store_ms", "upstream_ms"} {
		if d, ok := access[k].(float64); !ok || d < 0 {
			t.Errorf("access line: %s = %v, want a duration", k, access[k])
		}
	}
	warning := lines[1]
	if warning["level"] != "WARN" || warning["tool"] != "create_ticket" || warning["tenant"] != "default" || warning["key"] != "k-fail" || warning["key_source"] != "header" {
		t.Errorf("warning line lacks the request's tool, tenant or key: %v", warning)
	}
}

func hasAttr(s tracetest.SpanStub, key, value string) bool {
	for _, a := range s.Attributes {
		if string(a.Key) == key && fmt.Sprint(a.Value.AsInterface()) == value {
			return true
		}
	}
	return false
}

// TestClientGoneUpstreamFinishes: the client gives up while the upstream works; the gateway
// finishes the call and stores the receipt, so the retry replays (contract §4).
func TestClientGoneUpstreamFinishes(t *testing.T) {
	t.Parallel()
	var executions atomic.Int32
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		n := executions.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-%d"}`, n)
	}))
	t.Cleanup(upstream.Close)
	srv, store, _ := newGateway(t, upstream.URL, gateway.Options{})

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "gone")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, func() bool {
		s, _, _ := store.Get(context.Background(), "default/create_ticket/gone")
		return s == gateway.StateInProgress
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the client's request should have been cancelled")
	}
	close(release)
	waitFor(t, func() bool {
		s, _, _ := store.Get(context.Background(), "default/create_ticket/gone")
		return s == gateway.StateCommitted
	})

	resp, body := post(t, srv.URL, "gone", `{}`)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotency-Decision") != "replay" || body != `{"id":"T-1"}` {
		t.Fatalf("retry: %d %q %s; want 201 replay {\"id\":\"T-1\"}", resp.StatusCode, resp.Header.Get("Idempotency-Decision"), body)
	}
	if n := executions.Load(); n != 1 {
		t.Fatalf("upstream executed %d times, want 1", n)
	}
}

// TestLargeResponseNotKept: a committed response larger than MaxReceiptBodyBytes reaches the
// client whole; the receipt keeps status and remote id is absent, and the replay says the body
// was not kept (case C10's bounded outcome).
func TestLargeResponseNotKept(t *testing.T) {
	t.Parallel()
	big := `{"id":"T-9","pad":"` + strings.Repeat("x", 4096) + `"}`
	var executions atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executions.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, big)
	}))
	t.Cleanup(upstream.Close)
	srv, _, _ := newGateway(t, upstream.URL, gateway.Options{MaxReceiptBodyBytes: 1024})

	if resp, body := post(t, srv.URL, "big", `{}`); resp.StatusCode != 201 || body != big {
		t.Fatalf("first: %d, %d bytes; want 201 and the whole body", resp.StatusCode, len(body))
	}
	resp, body := post(t, srv.URL, "big", `{}`)
	if resp.StatusCode != 201 || resp.Header.Get("Idempotency-Decision") != "replay" ||
		resp.Header.Get("Idempotency-Replay-Body") != "omitted" || body != "" {
		t.Fatalf("replay: %d %q %q body %d bytes", resp.StatusCode, resp.Header.Get("Idempotency-Decision"), resp.Header.Get("Idempotency-Replay-Body"), len(body))
	}
	if n := executions.Load(); n != 1 {
		t.Fatalf("upstream executed %d times, want 1", n)
	}
}

// TestSpanAttributes: the server span carries the attributes of contract §6.
func TestSpanAttributes(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"T-7"}`)
	}))
	t.Cleanup(upstream.Close)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	srv, _, _ := newGateway(t, upstream.URL, gateway.Options{TracerProvider: tp})
	post(t, srv.URL, "k-span", `{"a":1}`)
	resp, _ := post(t, srv.URL, "k-span", `{"a":1}`)

	var got tracetest.SpanStubs
	children := map[trace.SpanID][]string{} // server span -> names of its child spans, sorted
	for _, sp := range spans.GetSpans() {
		if sp.SpanKind == trace.SpanKindServer {
			got = append(got, sp)
		} else {
			children[sp.Parent.SpanID()] = append(children[sp.Parent.SpanID()], sp.Name)
			slices.Sort(children[sp.Parent.SpanID()])
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d server spans, want 2", len(got))
	}
	// Child spans: each store call, and the upstream call (an otelhttp client span).
	if c := fmt.Sprint(children[got[0].SpanContext.SpanID()]); c != "[HTTP POST store.claim store.commit]" {
		t.Errorf("children of the execution: %s", c)
	}
	if c := fmt.Sprint(children[got[1].SpanContext.SpanID()]); c != "[store.claim]" {
		t.Errorf("children of the replay: %s", c)
	}
	for i, decision := range []string{"execute", "replay"} {
		want := map[string]string{
			"agent.tool.name":                     "create_ticket",
			"agent.tool.side_effect":              "true",
			"agent.idempotency.key":               "k-span",
			"agent.idempotency.fingerprint":       resp.Header.Get("Idempotency-Fingerprint"),
			"agent.idempotency.decision":          decision,
			"agent.idempotency.receipt.remote_id": "T-7",
			"agent.tenant":                        "default",
		}
		for k, v := range want {
			if !hasAttr(got[i], k, v) {
				t.Errorf("span %d (%s): attribute %s != %q; attributes %v", i, got[i].Name, k, v, got[i].Attributes)
			}
		}
	}
}

// TestConcurrentDuplicates: ten identical requests at once: one execution. With concurrency
// reject the nine others get 409 in_progress; with wait they get the replay (case C01).
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		concurrency string
		others      string
	}{
		{"reject", "409 in_progress"},
		{"wait", "201 replay"},
	} {
		t.Run(tt.concurrency, func(t *testing.T) {
			t.Parallel()
			testConcurrentDuplicates(t, "{concurrency: "+tt.concurrency+", wait_timeout: 5s}", tt.others)
		})
	}
}

func testConcurrentDuplicates(t *testing.T, defaults, others string) {
	var executions atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executions.Add(1)
		time.Sleep(200 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	srv, _, _ := newGateway(t, upstream.URL, gateway.Options{}, defaults)
	var wg sync.WaitGroup
	decisions := make(chan string, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := post(t, srv.URL, "dup", `{"x":1}`)
			decisions <- fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Idempotency-Decision"))
		}()
	}
	wg.Wait()
	close(decisions)
	count := map[string]int{}
	for d := range decisions {
		count[d]++
	}
	if count["201 execute"] != 1 || count[others] != 9 || executions.Load() != 1 {
		t.Fatalf("decisions %v, executions %d; want 1 execute, 9 %s, 1 execution", count, executions.Load(), others)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDecisionMetrics: every decision is counted in idemgateway_decisions_total{tool,decision}.
func TestDecisionMetrics(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	reg := gateway.NewRegistry()
	srv, _, _ := newGateway(t, upstream.URL, gateway.Options{Metrics: reg})
	post(t, srv.URL, "m", `{"a":1}`)
	post(t, srv.URL, "m", `{"a":1}`)
	post(t, srv.URL, "m", `{"a":2}`)
	post(t, srv.URL, "", `{"a":2}`)
	want := `
# HELP idemgateway_decisions_total Decisions on side-effecting routes: execute, replay, conflict, in_progress, outcome_unknown, rejected.
# TYPE idemgateway_decisions_total counter
idemgateway_decisions_total{decision="conflict",tool="create_ticket"} 1
idemgateway_decisions_total{decision="execute",tool="create_ticket"} 1
idemgateway_decisions_total{decision="rejected",tool="create_ticket"} 1
idemgateway_decisions_total{decision="replay",tool="create_ticket"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idemgateway_decisions_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "idemgateway_store_duration_seconds", "idemgateway_upstream_duration_seconds"); err != nil || n == 0 {
		t.Fatalf("store and upstream histograms: %d series, %v", n, err)
	}
}

// TestAbandon: a shutdown whose grace ran out marks the calls still under way outcome_unknown:
// never free, so no retry executes again; the cut-off call's own commit is then refused.
func TestAbandon(t *testing.T) {
	t.Parallel()
	h := startHeldCall(t, "cut")
	srv, store, gw, executions := h.srv, h.store, h.gw, &h.executions
	if n := gw.Abandon(context.Background()); n != 1 {
		t.Fatalf("Abandon marked %d records, want 1", n)
	}
	if state, _, _ := store.Get(context.Background(), "default/create_ticket/cut"); state != gateway.StateUnknown {
		t.Fatalf("state after Abandon = %q", state)
	}
	close(h.release)
	<-h.done
	resp, _ := post(t, srv.URL, "cut", `{}`)
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Idempotency-Decision") != "outcome_unknown" || executions.Load() != 1 {
		t.Fatalf("retry: %d %q, %d executions; want 409 outcome_unknown, 1", resp.StatusCode, resp.Header.Get("Idempotency-Decision"), executions.Load())
	}
}

// TestReloadKeepsRequestsUnderWay: a request under way finishes under the routes it started with;
// the next one sees the new routes.
func TestReloadKeepsRequestsUnderWay(t *testing.T) {
	t.Parallel()
	h := startHeldCall(t, "old")
	srv, store, gw := h.srv, h.store, h.gw

	cfg, err := routes.Parse("routes.yaml", []byte(`
upstreams:
  tickets: {url: `+h.upstream+`}
routes:
  - {name: create_ticket_v2, upstream: tickets, method: POST, path: /v2/tickets, class: non_idempotent}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if err := gw.Reload(&routes.Config{}); err == nil {
		t.Fatal("Reload of a config without routes succeeded")
	}
	if resp, _ := post(t, srv.URL, "new", `{}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a new request on the removed route: %d, want 404", resp.StatusCode)
	}
	close(h.release)
	if status := <-h.done; status != http.StatusCreated {
		t.Fatalf("the request under way: %d, want 201", status)
	}
	if state, _, _ := store.Get(context.Background(), "default/create_ticket/old"); state != gateway.StateCommitted {
		t.Fatalf("its record: %q, want committed", state)
	}
}

// claimCounter is a real store that counts its claims.
type claimCounter struct {
	gateway.Store
	claims atomic.Int32
}

func (c *claimCounter) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, []byte, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, key, owner, payload, lease, ttl)
}

// TestWaitIsWokenNotPolled: with concurrency: wait, duplicates sleep until the first request's
// receipt is stored and are woken by it: each reads the record a bounded number of times, however
// long the upstream takes (a poll every 20 ms would read it about a hundred times here).
func TestWaitIsWokenNotPolled(t *testing.T) {
	t.Parallel()
	var executions atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executions.Add(1)
		time.Sleep(2 * time.Second)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	base, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	store := &claimCounter{Store: base}
	cfg, err := routes.Parse("routes.yaml", []byte(`
upstreams:
  tickets: {url: `+upstream.URL+`}
defaults: {concurrency: wait, wait_timeout: 10s}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, store, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)

	const waiters = 5
	var wg sync.WaitGroup
	decisions := make(chan string, waiters+1)
	for range waiters + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := post(t, srv.URL, "slow", `{}`)
			decisions <- resp.Header.Get("Idempotency-Decision")
		}()
	}
	wg.Wait()
	close(decisions)
	count := map[string]int{}
	for d := range decisions {
		count[d]++
	}
	if count["execute"] != 1 || count["replay"] != waiters || executions.Load() != 1 {
		t.Fatalf("decisions %v, executions %d", count, executions.Load())
	}
	// Per waiter: the first claim, one after it starts listening, one after it is woken, and the
	// 500 ms safety-net polls of a 2 s wait (at most 4): 7. A 20 ms poll would make about 100.
	if n := store.claims.Load(); n > 1+waiters*7 {
		t.Fatalf("%d claims for %d waiters: they polled", n, waiters)
	}
}

// heldCall is a request under way: the gateway has sent it upstream, and the upstream holds it
// until release is closed; done then receives the client's status.
type heldCall struct {
	srv        *httptest.Server
	store      gateway.Store
	gw         *gateway.Gateway
	upstream   string
	executions atomic.Int32
	release    chan struct{}
	done       chan int
}

// startHeldCall starts a gateway whose upstream holds every call, sends one request with key, and
// returns once the upstream has it.
func startHeldCall(t *testing.T, key string) *heldCall {
	t.Helper()
	h := &heldCall{release: make(chan struct{}), done: make(chan int, 1)}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.executions.Add(1)
		<-h.release
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	h.upstream = upstream.URL
	h.srv, h.store, h.gw = newGateway(t, upstream.URL, gateway.Options{})
	go func() {
		resp, _ := post(t, h.srv.URL, key, `{}`)
		h.done <- resp.StatusCode
	}()
	waitFor(t, func() bool { return h.executions.Load() == 1 })
	return h
}
