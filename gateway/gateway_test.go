package gateway_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
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

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// post is send from the test's goroutine: a failure ends the test.
func post(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	r, err := send(url, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Response{StatusCode: r.status, Header: r.header}, r.body
}

// TestC11_NoResendAfterBytesMayHaveReachedUpstream: the upstream reads a request on a reused
// keep-alive connection and closes it without answering. Go's transport would resend a request
// that carries an Idempotency-Key header and a rewindable body; the gateway's must not. The
// upstream takes the gateway's key on Idempotency-Key (forward_key), as Stripe's does: the client's
// own key header never reaches an upstream.
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
					if strings.HasSuffix(req.Header.Get("Idempotency-Key"), "/drop") {
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
	yaml := strings.Replace(ticketsYAML("http://"+ln.Addr().String()), "timeout: 5s}", "timeout: 5s, forward_key: Idempotency-Key}", 1)
	yaml = strings.Replace(yaml, "class: non_idempotent", "class: non_idempotent, on_unknown_outcome: block", 1)
	srv, store, _ := newGatewayYAML(t, openEmbedded, yaml, gateway.Options{TracerProvider: tp})

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
	if err != nil || state != record.StateUnknown {
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
	srv, _, _ := newGateway(t, openEmbedded, upstream.URL, gateway.Options{})

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
		if b, _ := io.ReadAll(r.Body); string(b) == `{"a":2}` { // the call of key k-fail
			panic(http.ErrAbortHandler) // the connection breaks: a warning, then the access line
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(upstream.Close)
	logs := &testlog.Buffer{}
	srv, _, _ := newGateway(t, openEmbedded, upstream.URL, gateway.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
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
// finishes the call and stores the receipt, so the retry replays (docs/contract.md §4).
func TestClientGoneUpstreamFinishes(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
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
		srv, store, _ := newGateway(t, open, upstream.URL, gateway.Options{})

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
		eventually.True(t, "the call to be in_progress", func() bool {
			s, _, _ := store.Get(context.Background(), "default/create_ticket/gone")
			return s == record.StateInProgress
		})
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the client's request should have been cancelled")
		}
		close(release)
		eventually.True(t, "the call to be committed", func() bool {
			s, _, _ := store.Get(context.Background(), "default/create_ticket/gone")
			return s == record.StateCommitted
		})

		resp, body := post(t, srv.URL, "gone", `{}`)
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotency-Decision") != "replay" || body != `{"id":"T-1"}` {
			t.Fatalf("retry: %d %q %s; want 201 replay {\"id\":\"T-1\"}", resp.StatusCode, resp.Header.Get("Idempotency-Decision"), body)
		}
		if n := executions.Load(); n != 1 {
			t.Fatalf("upstream executed %d times, want 1", n)
		}
	})
}

// TestLargeResponseNotKept: a committed response larger than MaxReceiptBodyBytes reaches the
// client whole; the receipt keeps status and remote id is absent, and the replay says the body
// was not kept (docs/cases.md C10's bounded outcome).
func TestLargeResponseNotKept(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		big := `{"id":"T-9","pad":"` + strings.Repeat("x", 4096) + `"}`
		var executions atomic.Int32
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			executions.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, big)
		}))
		t.Cleanup(upstream.Close)
		srv, _, _ := newGateway(t, open, upstream.URL, gateway.Options{MaxReceiptBodyBytes: 1024})

		if resp, body := post(t, srv.URL, "big", `{}`); resp.StatusCode != 201 || body != big {
			t.Fatalf("first: %d, %d bytes; want 201 and the whole body", resp.StatusCode, len(body))
		}
		resp, body := post(t, srv.URL, "big", `{}`)
		if resp.StatusCode != 201 || resp.Header.Get("Idempotency-Decision") != "replay" ||
			resp.Header.Get("Idempotency-Replay-Body") != "omitted" || body != "" {
			t.Fatalf("replay: %d %q %q body %d bytes", resp.StatusCode, resp.Header.Get("Idempotency-Decision"), resp.Header.Get("Idempotency-Replay-Body"), len(body))
		}
		// No body, so no Content-Type: application/json over an empty body would not parse.
		if ct := resp.Header.Values("Content-Type"); len(ct) != 0 {
			t.Fatalf("replay without its body carries Content-Type %q, want none", ct)
		}
		if n := executions.Load(); n != 1 {
			t.Fatalf("upstream executed %d times, want 1", n)
		}
	})
}

// TestSpanAttributes: the server span carries the attributes of docs/contract.md §6.
func TestSpanAttributes(t *testing.T) {
	t.Parallel()
	var executions atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executions.Add(1)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"T-7"}`)
	}))
	t.Cleanup(upstream.Close)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	srv, _, _ := newGateway(t, openEmbedded, upstream.URL, gateway.Options{TracerProvider: tp})
	// Both calls name their actor in the route's actor_header (default X-Actor-ID).
	actor := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k-span"}, "X-Actor-Id": {"agent-7"}}
	if a := do(t, http.MethodPost, srv.URL+"/v1/tickets", actor, `{"a":1}`); a.status != http.StatusCreated {
		t.Fatalf("first call: %d, want 201", a.status)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = actor.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if body := string(b); resp.Header.Get("Idempotency-Decision") != "replay" || body != `{"id":"T-7"}` || executions.Load() != 1 {
		t.Fatalf("replay: %q %s, %d upstream calls; want the replay of T-7 and 1 call", resp.Header.Get("Idempotency-Decision"), body, executions.Load())
	}

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
			"agent.actor":                         "agent-7",
		}
		for k, v := range want {
			if !hasAttr(got[i], k, v) {
				t.Errorf("span %d (%s): attribute %s != %q; attributes %v", i, got[i].Name, k, v, got[i].Attributes)
			}
		}
	}
}

// TestConcurrentDuplicates: ten identical requests at once: one execution (docs/cases.md C01). With
// concurrency reject the nine others get 409 in_progress; with wait they get the replay. The
// upstream holds the execution until the nine are answered (reject) or wait (wait), so no
// duplicate can arrive after the receipt is stored.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		for _, concurrency := range []string{"reject", "wait"} {
			t.Run(concurrency, func(t *testing.T) {
				t.Parallel()
				testConcurrentDuplicates(t, open, concurrency)
			})
		}
	})
}

func testConcurrentDuplicates(t *testing.T, open storeFactory, concurrency string) {
	up := newHeldUpstream(t, nil)
	srv, _, gw := newGateway(t, open, up.URL, gateway.Options{}, "{concurrency: "+concurrency+", wait_timeout: 1m}")
	const n = 10
	answers := make(chan result, n)
	for range n {
		go func() {
			r, err := send(srv.URL, "dup", `{"x":1}`)
			answers <- result{r, err}
		}()
	}
	count := map[string]int{}
	receive := func() {
		t.Helper()
		select {
		case r := <-answers:
			if r.err != nil {
				t.Fatal(r.err)
			}
			count[r.String()]++
		case <-time.After(hangTimeout):
			t.Fatalf("no answer within %s; so far %v", hangTimeout, count)
		}
	}
	up.awaitCalls(t, 1)
	others := "201 replay"
	if concurrency == "reject" {
		others = "409 in_progress"
		for range n - 1 { // while the execution is held
			receive()
		}
	} else {
		eventually.True(t, "every duplicate to wait", func() bool { return gw.Waiting("default/create_ticket/dup") == n-1 })
	}
	up.releaseAll()
	for sum(count) < n {
		receive()
	}
	if count["201 execute"] != 1 || count[others] != n-1 || up.calls.Load() != 1 {
		t.Fatalf("decisions %v, executions %d; want 1 execute, %d %s, 1 execution", count, up.calls.Load(), n-1, others)
	}
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestDecisionMetrics: every decision is counted in idemgateway_decisions_total{tool,decision},
// outcome_unknown and in_progress too (the alerts watch them), and the replay does not call the
// upstream.
func TestDecisionMetrics(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		var executions atomic.Int32
		held, release := make(chan struct{}, 1), make(chan struct{})
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			executions.Add(1)
			b, _ := io.ReadAll(r.Body)
			switch string(b) {
			case `{"fail":1}`: // a 502: the outcome is unknown
				w.WriteHeader(http.StatusBadGateway)
				return
			case `{"hold":1}`: // held until the test releases it
				held <- struct{}{}
				<-release
			}
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"T-1"}`)
		}))
		t.Cleanup(upstream.Close)
		unhold := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unhold) // before the upstream closes, whatever fails
		reg := gateway.NewRegistry()
		srv, _, _ := newGateway(t, open, upstream.URL, gateway.Options{Metrics: reg})
		post(t, srv.URL, "m", `{"a":1}`)
		if resp, body := post(t, srv.URL, "m", `{"a":1}`); resp.Header.Get("Idempotency-Decision") != "replay" || body != `{"id":"T-1"}` || executions.Load() != 1 {
			t.Fatalf("replay: %q %s, %d upstream calls; want replay of T-1, 1 call", resp.Header.Get("Idempotency-Decision"), body, executions.Load())
		}
		post(t, srv.URL, "m", `{"a":2}`)
		post(t, srv.URL, "", `{"a":2}`)
		post(t, srv.URL, "u", `{"fail":1}`)
		if resp, _ := post(t, srv.URL, "u", `{"fail":1}`); resp.Header.Get("Idempotency-Decision") != "outcome_unknown" {
			t.Fatalf("retry of a 502: %q, want outcome_unknown", resp.Header.Get("Idempotency-Decision"))
		}
		call := sendAsync(srv.URL, "h", `{"hold":1}`)
		select {
		case <-held:
		case <-time.After(hangTimeout):
			t.Fatalf("the held call did not reach the upstream within %s", hangTimeout)
		}
		if resp, _ := post(t, srv.URL, "h", `{"hold":1}`); resp.Header.Get("Idempotency-Decision") != "in_progress" {
			t.Fatalf("duplicate of a held call: %q, want in_progress", resp.Header.Get("Idempotency-Decision"))
		}
		unhold()
		if r := await(t, call, "the held call"); r.String() != "201 execute" {
			t.Fatalf("the held call: %s, want 201 execute", r)
		}
		want := `
# HELP idemgateway_decisions_total Decisions on side-effecting routes: execute, replay, conflict, in_progress, outcome_unknown, rejected.
# TYPE idemgateway_decisions_total counter
idemgateway_decisions_total{decision="conflict",tool="create_ticket"} 1
idemgateway_decisions_total{decision="execute",tool="create_ticket"} 3
idemgateway_decisions_total{decision="in_progress",tool="create_ticket"} 1
idemgateway_decisions_total{decision="outcome_unknown",tool="create_ticket"} 1
idemgateway_decisions_total{decision="rejected",tool="create_ticket"} 1
idemgateway_decisions_total{decision="replay",tool="create_ticket"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idemgateway_decisions_total"); err != nil {
			t.Fatal(err)
		}
		if n, err := testutil.GatherAndCount(reg, "idemgateway_store_duration_seconds", "idemgateway_upstream_duration_seconds"); err != nil || n == 0 {
			t.Fatalf("store and upstream histograms: %d series, %v", n, err)
		}
		if n := executions.Load(); n != 3 {
			t.Fatalf("upstream called %d times, want 3 (the replay, conflict, rejected request, outcome_unknown and in_progress call none)", n)
		}
	})
}

// TestEncodedBodyNamed: a JSON body sent gzip-encoded is refused as an invalid body whose detail
// says that it came with a Content-Encoding the gateway does not decode, not merely that a byte is
// no JSON; nothing reaches the upstream.
func TestEncodedBodyNamed(t *testing.T) {
	t.Parallel()
	up, executions := countingUpstream(t)
	srv, _, _ := newGateway(t, openEmbedded, up.URL, gateway.Options{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"title":"printer on fire"}`))
	_ = zw.Close()
	status, _, body := postRaw(t, srv.URL+"/v1/tickets", gz.String(), "Content-Encoding", "gzip", "Idempotency-Key", "gz-1")
	if status != http.StatusBadRequest || !strings.Contains(body, "invalid-body") ||
		!strings.Contains(body, `Content-Encoding \"gzip\"`) || executions.Load() != 0 {
		t.Errorf("a gzip-encoded JSON body: %d %s, %d executions; want 400 invalid-body naming the encoding, none", status, body, executions.Load())
	}
}

// TestCutOff: a shutdown whose grace ran out cuts off the calls still under way. The cut-off
// call answers its client 502 upstream-failed saying that the gateway shut down, and leaves its
// record outcome_unknown (the route blocks unknown outcomes), never free: a retry does not execute
// again, neither before the upstream acts on the request it was sent nor after. The upstream's
// timeout is an hour: only the cut ends the held call.
func TestCutOff(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		h := &heldCall{up: newHeldUpstream(t, nil)}
		h.srv, h.store, h.gw = newGatewayYAML(t, open, strings.Replace(ticketsYAML(h.up.URL), "timeout: 5s", "timeout: 1h", 1), gateway.Options{})
		h.done = sendAsync(h.srv.URL, "cut", `{}`)
		h.up.awaitCalls(t, 1)
		if n := h.gw.CutOff(); n != 1 {
			t.Fatalf("CutOff cut %d calls, want 1", n)
		}
		r := await(t, h.done, "the cut-off call")
		if detail, _ := r.problem["detail"].(string); r.status != http.StatusBadGateway || r.problem["type"] != problem.TypePrefix+"upstream-failed" ||
			!strings.Contains(detail, "the gateway shut down") || r.problem["retryable"] != false {
			t.Fatalf("the cut-off call: %s %v, want 502 upstream-failed, not retryable, saying that the gateway shut down", r, r.problem)
		}
		if state, _, _ := h.store.Get(context.Background(), "default/create_ticket/cut"); state != record.StateUnknown {
			t.Fatalf("state after the cut = %q, want outcome_unknown", state)
		}
		resp, _ := post(t, h.srv.URL, "cut", `{}`)
		if resp.StatusCode != http.StatusConflict || resp.Header.Get("Idempotency-Decision") != "outcome_unknown" || h.up.calls.Load() != 1 {
			t.Fatalf("retry: %d %q, %d executions; want 409 outcome_unknown, 1", resp.StatusCode, resp.Header.Get("Idempotency-Decision"), h.up.calls.Load())
		}
		h.up.releaseAll()
		resp, _ = post(t, h.srv.URL, "cut", `{}`)
		if resp.StatusCode != http.StatusConflict || h.up.calls.Load() != 1 {
			t.Fatalf("retry after the upstream was released: %d, %d executions; want 409, 1", resp.StatusCode, h.up.calls.Load())
		}
		if n := h.gw.InFlight(); n != 0 {
			t.Errorf("%d calls in flight once the cut-off call answered, want 0", n)
		}
	})
}

// TestCutOffAfterCallsFinished: a call that has finished is no longer under way: once the
// gateway's handlers have returned, it counts no call in flight, and CutOff cuts nothing and
// leaves the committed records as they were.
func TestCutOffAfterCallsFinished(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up, executions := countingUpstream(t)
		srv, store, gw := newGateway(t, open, up.URL, gateway.Options{})
		for _, key := range []string{"done-1", "done-2", "done-1"} { // two executions, one replay
			if resp, _ := post(t, srv.URL, key, `{}`); resp.StatusCode != http.StatusCreated {
				t.Fatalf("%s: %d, want 201", key, resp.StatusCode)
			}
		}
		srv.Close() // blocks until every handler, and so every execution, has returned
		if n := gw.InFlight(); n != 0 {
			t.Errorf("%d calls in flight after all finished, want 0", n)
		}
		if n := gw.CutOff(); n != 0 {
			t.Errorf("CutOff cut %d calls, want 0", n)
		}
		for _, key := range []string{"done-1", "done-2"} {
			if state, _, _ := store.Get(context.Background(), "default/create_ticket/"+key); state != record.StateCommitted {
				t.Errorf("%s after CutOff: %q, want committed", key, state)
			}
		}
		if n := executions.Load(); n != 2 {
			t.Errorf("upstream executed %d times, want 2", n)
		}
	})
}

// TestCutOffLaterExecutions: once a shutdown's grace ran out, an execution that starts afterwards
// (a waiting duplicate that finds the key freed, a request still claiming) is cut off as it starts:
// it makes no connection to the upstream, frees its key, and answers 502 upstream-failed saying
// that the gateway shut down, retryable.
func TestCutOffLaterExecutions(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up, executions := countingUpstream(t)
		srv, store, gw := newGateway(t, open, up.URL, gateway.Options{})
		if n := gw.CutOff(); n != 0 {
			t.Fatalf("CutOff cut %d calls, want 0", n)
		}
		r, err := send(srv.URL, "after-cut", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if detail, _ := r.problem["detail"].(string); r.status != http.StatusBadGateway || !strings.Contains(detail, "the gateway shut down") || r.problem["retryable"] != true {
			t.Errorf("a call after the cut: %s %v, want 502 saying that the gateway shut down, retryable", r, r.problem)
		}
		if state, _, _ := store.Get(context.Background(), "default/create_ticket/after-cut"); state != "" || executions.Load() != 0 {
			t.Errorf("after the cut: record %q, %d executions; want the key freed, none", state, executions.Load())
		}
	})
}

// TestReloadKeepsRequestsUnderWay: a request under way finishes under the routes it started with;
// the next one sees the new routes.
func TestReloadKeepsRequestsUnderWay(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		h := startHeldCall(t, open, "old")
		cfg, err := routes.Parse("routes.yaml", []byte(`
upstreams:
  tickets: {url: `+h.up.URL+`}
routes:
  - {name: create_ticket_v2, upstream: tickets, method: POST, path: /v2/tickets, class: non_idempotent}
`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.gw.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		if err := h.gw.Reload(&routes.Config{}); err == nil {
			t.Fatal("Reload of a config without routes succeeded")
		}
		if resp, _ := post(t, h.srv.URL, "new", `{}`); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("a new request on the removed route: %d, want 404", resp.StatusCode)
		}
		h.up.releaseAll()
		if r := await(t, h.done, "the request under way"); r.status != http.StatusCreated {
			t.Fatalf("the request under way: %s, want 201", r)
		}
		if state, _, _ := h.store.Get(context.Background(), "default/create_ticket/old"); state != record.StateCommitted {
			t.Fatalf("its record: %q, want committed", state)
		}
	})
}

// notifyingClaimCounter is a claimCounter of a store with settle notices (Redis), which it
// passes through.
type notifyingClaimCounter struct {
	*claimCounter
	notifier record.SettleNotifier
}

func (c notifyingClaimCounter) WatchSettled(ctx context.Context, key string, settled func()) (func(), error) {
	return c.notifier.WatchSettled(ctx, key, settled)
}

// waitingGateway serves a gateway with concurrency: wait on store, counting its claims, whose
// waiters only a wake-up can end: the safety poll and the wait for the store to listen are
// longer than the test may take.
func waitingGateway(t *testing.T, store record.Store, upstream string) (*httptest.Server, *claimCounter, *gateway.Gateway) {
	t.Helper()
	counted := &claimCounter{Store: store}
	var wrapped record.Store = counted
	if n, ok := store.(record.SettleNotifier); ok {
		wrapped = notifyingClaimCounter{counted, n}
	}
	cfg, err := routes.Parse("routes.yaml", []byte(ticketsYAML(upstream, "{concurrency: wait, wait_timeout: 40s}")), nil)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, wrapped, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gw.SetWaitTimers(2*hangTimeout, hangTimeout)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv, counted, gw
}

// TestWaitIsWokenNotPolled: duplicates that wait (concurrency: wait) for a call held upstream are
// woken by the settle of its receipt: the gateway counts every one of them woken by its settle (or,
// on Redis, by the store's notice of it, which may come first). The safety poll is set longer than
// the test, so a settle that wakes nobody leaves the waiters without an answer.
func TestWaitIsWokenNotPolled(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up := newHeldUpstream(t, nil)
		srv, store, gw := waitingGateway(t, open(t), up.URL)
		first := sendAsync(srv.URL, "slow", `{}`)
		up.awaitCalls(t, 1)
		const waiters = 5
		var dups []<-chan result
		for range waiters {
			dups = append(dups, sendAsync(srv.URL, "slow", `{}`))
		}
		// Each waiter claims, listens, and reads the record again (in_progress) before it sleeps.
		eventually.True(t, "every waiter to claim twice", func() bool { return store.claims.Load() == 1+2*waiters })
		up.releaseAll()
		if r := await(t, first, "the first request"); r.String() != "201 execute" {
			t.Fatalf("the first request: %s", r)
		}
		for i, d := range dups {
			if r := await(t, d, "a waiter"); r.String() != "201 replay" || r.body != `{"id":"T-1"}` {
				t.Fatalf("waiter %d: %s %s, want 201 replay of T-1", i, r, r.body)
			}
		}
		bySettle, byNotice, byPoll := gw.WakeUps()
		if bySettle+byNotice != waiters || byPoll != 0 || up.calls.Load() != 1 {
			t.Fatalf("woken by the settle %d, by the store's notice %d, polls %d, %d upstream calls; want %d woken, no poll, 1 call",
				bySettle, byNotice, byPoll, up.calls.Load(), waiters)
		}
	})
}

// TestWaitEndedOnPollCountedOnce: a duplicate that waits at one gateway for a call another gateway
// runs, on a store without settle notices, learns of the settle from its safety poll alone. Its
// wait counts once in idemgateway_wait_wakeups_total{cause="poll"} however many polls found the
// record still in progress: the metric counts waits that ended on the poll (docs/operations.md).
func TestWaitEndedOnPollCountedOnce(t *testing.T) {
	t.Parallel()
	store := openEmbedded(t)
	up := newHeldUpstream(t, nil)
	running, _, _ := newGatewayOn(t, store, ticketsYAML(up.URL), gateway.Options{})
	counted := &claimCounter{Store: store} // no WatchSettled: the poll alone ends a wait
	cfg, err := routes.Parse("routes.yaml", []byte(ticketsYAML(up.URL, "{concurrency: wait, wait_timeout: 40s}")), nil)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, counted, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gw.SetWaitTimers(20*time.Millisecond, hangTimeout)
	waiting := httptest.NewServer(gw)
	t.Cleanup(waiting.Close)

	first := sendAsync(running.URL, "k", `{}`)
	up.awaitCalls(t, 1)
	dup := sendAsync(waiting.URL, "k", `{}`)
	// Its claim, its read once listening, then one read after each poll: three polls at least.
	eventually.True(t, "the duplicate to read the record after three polls", func() bool { return counted.claims.Load() >= 5 })
	up.releaseAll()
	if r := await(t, first, "the first request"); r.String() != "201 execute" {
		t.Fatalf("the first request: %s", r)
	}
	if r := await(t, dup, "the duplicate"); r.String() != "201 replay" {
		t.Fatalf("the duplicate: %s, want 201 replay", r)
	}
	if bySettle, byNotice, byPoll := gw.WakeUps(); bySettle != 0 || byNotice != 0 || byPoll != 1 {
		t.Errorf("woken by a settle %d, by a notice %d, waits ended on the poll %d; want 0, 0, 1", bySettle, byNotice, byPoll)
	}
}

// TestWaitIsWokenAcrossProcesses: two gateway processes share one Redis; the duplicates waiting at
// the second are woken by the store's notice of the first's settle (WatchSettled), not by a poll.
func TestWaitIsWokenAcrossProcesses(t *testing.T) {
	t.Parallel()
	redisSrv := redistest.Start(t, redistest.Options{})
	up := newHeldUpstream(t, nil)
	a, _, _ := waitingGateway(t, redisStoreOn(t, redisSrv), up.URL)
	b, storeB, gwB := waitingGateway(t, redisStoreOn(t, redisSrv), up.URL)
	first := sendAsync(a.URL, "k", `{}`)
	up.awaitCalls(t, 1)
	const waiters = 3
	var dups []<-chan result
	for range waiters {
		dups = append(dups, sendAsync(b.URL, "k", `{}`))
	}
	eventually.True(t, "every waiter on gateway B to claim twice", func() bool { return storeB.claims.Load() == 2*waiters })
	up.releaseAll()
	if r := await(t, first, "the first request"); r.String() != "201 execute" {
		t.Fatalf("the first request: %s", r)
	}
	for i, d := range dups {
		if r := await(t, d, "a waiter"); r.String() != "201 replay" {
			t.Fatalf("waiter %d at the second gateway: %s, want 201 replay", i, r)
		}
	}
	bySettle, byNotice, byPoll := gwB.WakeUps()
	if bySettle != 0 || byNotice != waiters || byPoll != 0 || up.calls.Load() != 1 {
		t.Fatalf("second gateway: woken by its settle %d, by the notice %d, polls %d; %d upstream calls; want 0, %d, 0, 1 call",
			bySettle, byNotice, byPoll, up.calls.Load(), waiters)
	}
}

// TestWaitTimeout: a waiter (concurrency: wait) whose wait_timeout lapses while the first call is
// still held gets 409 in_progress with Retry-After, and the upstream is called once.
func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up := newHeldUpstream(t, nil)
		srv, _, _ := newGateway(t, open, up.URL, gateway.Options{}, "{concurrency: wait, wait_timeout: 100ms}")
		first := sendAsync(srv.URL, "held", `{}`)
		up.awaitCalls(t, 1)
		// The first call is held until the waiter has its answer: only wait_timeout can end its wait.
		r := await(t, sendAsync(srv.URL, "held", `{}`), "the waiter")
		if r.String() != "409 in_progress" || r.retryAfter == "" {
			t.Fatalf("the waiter: %s Retry-After %q; want 409 in_progress with Retry-After", r, r.retryAfter)
		}
		up.releaseAll()
		if r := await(t, first, "the first request"); r.String() != "201 execute" {
			t.Fatalf("the first request: %s", r)
		}
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
	})
}

// TestWaitAfterRelease: a waiter (concurrency: wait) whose first call is not committed (the
// upstream answered 503: the key is freed) executes the call itself.
func TestWaitAfterRelease(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up := newHeldUpstream(t, func(n int32) int {
			if n == 1 {
				return http.StatusServiceUnavailable
			}
			return http.StatusCreated
		})
		srv, _, gw := newGateway(t, open, up.URL, gateway.Options{}, "{concurrency: wait, wait_timeout: 1m}")
		first := sendAsync(srv.URL, "freed", `{}`)
		up.awaitCalls(t, 1)
		waiter := sendAsync(srv.URL, "freed", `{}`)
		eventually.True(t, "the duplicate to wait", func() bool { return gw.Waiting("default/create_ticket/freed") == 1 })
		up.release(1)
		if r := await(t, first, "the first request"); r.String() != "503 execute" {
			t.Fatalf("the first request: %s, want 503 execute", r)
		}
		up.awaitCalls(t, 2) // the waiter's own execution
		up.release(2)
		if r := await(t, waiter, "the waiter"); r.String() != "201 execute" || r.body != `{"id":"T-2"}` {
			t.Fatalf("the waiter: %s %s, want 201 execute T-2", r, r.body)
		}
	})
}

// TestConflictInEveryState: a request with a different fingerprint under a key that is
// in_progress, committed or outcome_unknown gets 422 (docs/cases.md C05, C12), and calls no upstream.
func TestConflictInEveryState(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up := newHeldUpstream(t, func(n int32) int {
			if n == 2 {
				return http.StatusInternalServerError // the outcome is unknown
			}
			return http.StatusCreated
		})
		srv, store, _ := newGateway(t, open, up.URL, gateway.Options{})
		states := []struct{ key, state string }{
			{"committed", record.StateCommitted},
			{"unknown", record.StateUnknown},
			{"in-progress", record.StateInProgress}, // held until the test ends
		}
		var held <-chan result
		for i, st := range states {
			call := sendAsync(srv.URL, st.key, `{"a":1}`)
			up.awaitCalls(t, int32(i+1))
			if st.state == record.StateInProgress {
				held = call
				continue
			}
			up.release(int32(i + 1))
			await(t, call, st.key)
		}
		for _, st := range states {
			if state, _, err := store.Get(context.Background(), "default/create_ticket/"+st.key); err != nil || state != st.state {
				t.Fatalf("record %s: state %q, %v; want %s", st.key, state, err, st.state)
			}
			r, err := send(srv.URL, st.key, `{"a":2}`)
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != "422 conflict" {
				t.Errorf("a %s key, another fingerprint: %s %s; want 422 conflict", st.state, r, r.body)
			}
		}
		up.releaseAll()
		if r := await(t, held, "the held call"); r.String() != "201 execute" {
			t.Errorf("the held call: %s", r)
		}
		if n := up.calls.Load(); n != 3 {
			t.Errorf("%d upstream calls, want 3 (none for the conflicts)", n)
		}
	})
}

// heldCall is a request under way: the gateway has sent it upstream, and the upstream holds it
// until it is released; done then receives the client's answer.
type heldCall struct {
	srv   *httptest.Server
	store record.Store
	gw    *gateway.Gateway
	up    *heldUpstream
	done  <-chan result
}

// startHeldCall starts a gateway on a store of open whose upstream holds every call, sends one
// request with key, and returns once the upstream has it.
func startHeldCall(t *testing.T, open storeFactory, key string) *heldCall {
	t.Helper()
	h := &heldCall{up: newHeldUpstream(t, nil)}
	h.srv, h.store, h.gw = newGateway(t, open, h.up.URL, gateway.Options{})
	h.done = sendAsync(h.srv.URL, key, `{}`)
	h.up.awaitCalls(t, 1)
	return h
}
