package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/testlog"
)

// hangBound only bounds a wait that a broken sandbox would make endless; nothing is timed by it.
const hangBound = 20 * time.Second

// leaveTest is a sandbox whose delays end when the test says, behind a server that hands the test
// each request's context, so that a test can see the server notice that a client went away.
type leaveTest struct {
	s       *sandbox
	srv     *httptest.Server
	log     *testlog.Buffer
	ctxs    chan context.Context // the server-side context of each request, as it arrives
	delayed chan struct{}        // a request has started its delay
	fire    chan time.Time       // closed by the test: every delay ends
}

func newLeaveTest(t *testing.T) *leaveTest {
	t.Helper()
	lt := &leaveTest{log: &testlog.Buffer{}, ctxs: make(chan context.Context, 16), delayed: make(chan struct{}, 16), fire: make(chan time.Time)}
	lt.s = newSandbox(slog.New(slog.NewTextHandler(lt.log, nil)))
	lt.s.after = func(time.Duration) <-chan time.Time {
		lt.delayed <- struct{}{}
		return lt.fire
	}
	lt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/_sandbox/") {
			lt.ctxs <- r.Context()
		}
		lt.s.ServeHTTP(w, r)
	}))
	t.Cleanup(lt.srv.Close)
	return lt
}

// leave sends rq from another goroutine, waits until the sandbox holds it in its delay (or, when
// held is set, until it waits on that hold), cancels the client's request and waits until the
// server has noticed that the client went away.
func (lt *leaveTest) leave(t *testing.T, rq request, held string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lt.srv.URL+rq.path, strings.NewReader(rq.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", rq.contentType)
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := newClient().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	srvCtx := recvWithin(t, lt.ctxs, "the request to reach the sandbox")
	if held == "" {
		recvWithin(t, lt.delayed, "the request to start its delay")
	} else {
		waitHeld(t, lt.s, held, 1)
	}
	cancel()
	if err := recvWithin(t, errc, "the client to give up"); !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want context.Canceled", err)
	}
	recvWithin(t, srvCtx.Done(), "the server to notice that the client went away")
}

// recvWithin receives from c, failing the test if nothing comes before hangBound.
func recvWithin[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(hangBound):
		t.Fatalf("gave up after %s waiting for %s", hangBound, what)
		panic("unreachable")
	}
}

// TestDetachActsAfterTheClientLeft (docs/guarantees.md#the-chaos-suite-e2echaos): a client that
// goes away during the delay (a gateway that timed out, disconnected or died) cuts a plain request
// short, without effect; a detached one (X-Sandbox-Detach) is performed after the delay, and its
// effect counted, although nobody reads the answer. Both waits, the delay and a hold, are checked,
// on every endpoint.
func TestDetachActsAfterTheClientLeft(t *testing.T) {
	t.Parallel()
	for _, cr := range creates {
		for _, wait := range []string{"delay", "hold"} {
			for _, detach := range []bool{false, true} {
				name := cr.endpoint + "/" + wait + "/plain"
				if detach {
					name = cr.endpoint + "/" + wait + "/detached"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					lt := newLeaveTest(t)
					h := map[string]string{headerDelay: "1h"} // ended by lt.fire, not by the clock
					held := ""
					if wait == "hold" {
						h, held = map[string]string{headerHold: "h1"}, "h1"
					}
					if detach {
						h[headerDetach] = "1"
					}
					lt.leave(t, cr.req.with(h), held)
					if wait == "hold" {
						release(t, lt.srv.URL, held)
					} else {
						close(lt.fire)
					}
					lt.srv.Close() // waits for the handler to finish

					st := lt.s.snapshot()
					want, outcome, effect := int64(0), "status=canceled", "effect=false"
					if detach {
						want, outcome, effect = 1, "status=abandoned", "effect=true"
					}
					if st.Total != want || st.ByEndpoint[cr.endpoint] != want || st.Requests.Total != 1 {
						t.Errorf("stats = %+v, want %d effect of %s and 1 request", st, want, cr.endpoint)
					}
					line := lt.log.String()
					for _, w := range []string{"endpoint=" + cr.endpoint, outcome, effect} {
						if !strings.Contains(line, w) {
							t.Errorf("log %q lacks %q", line, w)
						}
					}
				})
			}
		}
	}
}

// TestHold: a held request acts when the hold is released, and answers its client; a release
// before the request arrives lets it through (a latch); a reset ends a held request without
// effect; GET /_sandbox/holds shows who waits.
func TestHold(t *testing.T) {
	t.Parallel()
	cr := creates[4] // tickets.create_ticket
	t.Run("released", func(t *testing.T) {
		t.Parallel()
		s, srv := newTestSandbox(t)
		type answer struct {
			resp *http.Response
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			resp, _, err := trySend(newClient(), srv.URL, cr.req.with(map[string]string{headerHold: "a"}))
			done <- answer{resp, err}
		}()
		waitHeld(t, s, "a", 1)
		if st := s.snapshot(); st.Total != 0 || st.InFlight != 1 {
			t.Fatalf("stats while held: %+v, want no effect and 1 request in flight", st)
		}
		resp, body := send(t, newClient(), srv.URL, request{method: "GET", path: "/_sandbox/holds"})
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"a":{"waiting":1,"released":false}`) {
			t.Errorf("holds: %d %s", resp.StatusCode, body)
		}
		release(t, srv.URL, "a")
		a := recvWithin(t, done, "the held request's answer")
		if a.err != nil || a.resp.StatusCode != http.StatusCreated {
			t.Fatalf("held request: %v %v, want 201", a.resp, a.err)
		}
		srv.Close() // waits for the handler
		if st := s.snapshot(); st.Total != 1 || st.InFlight != 0 {
			t.Errorf("stats after the release: %+v, want 1 effect and none in flight", st)
		}
	})
	t.Run("released first", func(t *testing.T) {
		t.Parallel()
		s, srv := newTestSandbox(t)
		release(t, srv.URL, "b")
		if resp, body := send(t, newClient(), srv.URL, cr.req.with(map[string]string{headerHold: "b"})); resp.StatusCode != http.StatusCreated {
			t.Fatalf("request after the release: %d %s", resp.StatusCode, body)
		}
		if st := s.snapshot(); st.Total != 1 {
			t.Errorf("effects = %d, want 1", st.Total)
		}
	})
	t.Run("reset aborts", func(t *testing.T) {
		t.Parallel()
		s, srv := newTestSandbox(t)
		done := make(chan error, 1)
		go func() {
			_, _, err := trySend(newClient(), srv.URL, cr.req.with(map[string]string{headerHold: "c", headerDetach: "true"}))
			done <- err
		}()
		waitHeld(t, s, "c", 1)
		send(t, newClient(), srv.URL, request{path: "/_sandbox/reset"})
		if err := recvWithin(t, done, "the aborted request"); err == nil {
			t.Errorf("the held request was answered, want its connection broken")
		}
		srv.Close()
		if st := s.snapshot(); st.Total != 0 {
			t.Errorf("effects = %d after a reset ended the hold, want 0", st.Total)
		}
	})
	t.Run("bad release", func(t *testing.T) {
		t.Parallel()
		_, srv := newTestSandbox(t)
		resp, body := send(t, newClient(), srv.URL, request{path: "/_sandbox/release", body: `{}`})
		wantProblem(t, resp, body, http.StatusBadRequest, false)
	})
}

// TestScriptHoldDetach: hold and detach are scripted like the other faults.
func TestScriptHoldDetach(t *testing.T) {
	t.Parallel()
	_, srv := newTestSandbox(t)
	if resp, body := setScript(t, srv.URL, `{"fail_next":[{"delay":"1s","hold":"h","detach":true}]}`); resp.StatusCode != 200 {
		t.Fatalf("script: %d %s", resp.StatusCode, body)
	}
	got := getScript(t, srv.URL)
	if len(got) != 1 || got[0].Delay != "1s" || got[0].Hold != "h" || !got[0].Detach {
		t.Errorf("script = %+v, want the delay, the hold and detach back", got)
	}
	setScript(t, srv.URL, `{"fail_next":[]}`) // else the next request takes the scripted hold
	resp, body := send(t, newClient(), srv.URL, creates[0].req.with(map[string]string{headerDetach: "maybe"}))
	wantProblem(t, resp, body, http.StatusBadRequest, false)
}

// TestForwardedKey (docs/unknown-outcomes.md#forward_key): with X-Sandbox-Idempotency-Key, the
// sandbox is an upstream that de-duplicates: a second request with the key gets the first one's
// answer without a second effect, also when the requests come at once; keys are per endpoint; an
// answer without effect stores nothing; a reset forgets the keys; without the header nothing
// changes.
func TestForwardedKey(t *testing.T) {
	t.Parallel()
	for _, cr := range creates {
		t.Run(cr.endpoint, func(t *testing.T) {
			t.Parallel()
			s, srv := newTestSandbox(t)
			c := newClient()
			keyed := cr.req.with(map[string]string{headerIdempotencyKey: "default/tool/k1"})
			first, firstBody := send(t, c, srv.URL, keyed)
			again, againBody := send(t, c, srv.URL, keyed)
			if first.StatusCode >= 300 || again.StatusCode != first.StatusCode || !bytes.Equal(againBody, firstBody) {
				t.Fatalf("second request with the key: %d %s\nwant the first answer again: %d %s", again.StatusCode, againBody, first.StatusCode, firstBody)
			}
			if got, want := again.Header.Get("Location"), first.Header.Get("Location"); got != want {
				t.Errorf("replayed Location %q, want %q", got, want)
			}
			if st := s.snapshot(); st.ByEndpoint[cr.endpoint] != 1 || st.Requests.ByEndpoint[cr.endpoint] != 2 {
				t.Errorf("stats %+v: want 1 effect of 2 requests", st)
			}

			// At once: one effect, one answer.
			const n = 8
			bodies := make([][]byte, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					_, bodies[i], _ = trySend(newClient(), srv.URL, cr.req.with(map[string]string{headerIdempotencyKey: "k2"}))
				})
			}
			wg.Wait()
			for i := range bodies {
				if !bytes.Equal(bodies[i], bodies[0]) || len(bodies[i]) == 0 {
					t.Errorf("concurrent answer %d %s differs from %s", i, bodies[i], bodies[0])
				}
			}
			if st := s.snapshot(); st.ByEndpoint[cr.endpoint] != 2 {
				t.Errorf("effects %d after %d concurrent requests with one new key, want 2", st.ByEndpoint[cr.endpoint], n)
			}

			// Without the header, or after a reset, the sandbox acts again.
			send(t, c, srv.URL, cr.req)
			send(t, c, srv.URL, request{path: "/_sandbox/reset"})
			send(t, c, srv.URL, keyed)
			if st := s.snapshot(); st.ByEndpoint[cr.endpoint] != 1 {
				t.Errorf("effects since the reset %d, want 1: a reset forgets the keys", st.ByEndpoint[cr.endpoint])
			}
		})
	}
	t.Run("collation ci folds case", func(t *testing.T) {
		t.Parallel()
		s, srv := newTestSandbox(t)
		c := newClient()
		for _, key := range []string{"Refund-7", "refund-7", "REFUND-7"} {
			send(t, c, srv.URL, creates[4].req.with(map[string]string{headerIdempotencyKey: key, headerKeyCollation: "ci"}))
		}
		if st := s.snapshot(); st.Total != 1 {
			t.Errorf("effects %d under collation ci, want 1", st.Total)
		}
		for _, key := range []string{"Other-8", "other-8"} {
			send(t, c, srv.URL, creates[4].req.with(map[string]string{headerIdempotencyKey: key}))
		}
		if st := s.snapshot(); st.Total != 3 {
			t.Errorf("effects %d, want 3: without the collation header keys keep their case", st.Total)
		}
	})
	t.Run("no effect stores nothing", func(t *testing.T) {
		t.Parallel()
		s, srv := newTestSandbox(t)
		c := newClient()
		h := map[string]string{headerIdempotencyKey: "k"}
		if resp, body := send(t, c, srv.URL, request{path: "/v1/tickets", contentType: "application/json", body: `[]`, header: h}); resp.StatusCode != 400 {
			t.Fatalf("invalid request: %d %s", resp.StatusCode, body)
		}
		if resp, body := send(t, c, srv.URL, creates[4].req.with(map[string]string{headerIdempotencyKey: "k", headerStatus: "503"})); resp.StatusCode != 503 {
			t.Fatalf("injected 503: %d %s", resp.StatusCode, body)
		}
		if resp, body := send(t, c, srv.URL, creates[4].req.with(h)); resp.StatusCode != 201 {
			t.Fatalf("valid request: %d %s", resp.StatusCode, body)
		}
		// The key is per endpoint: the same key on another endpoint acts.
		if resp, body := send(t, c, srv.URL, creates[0].req.with(h)); resp.StatusCode != 201 {
			t.Fatalf("other endpoint: %d %s", resp.StatusCode, body)
		}
		if st := s.snapshot(); st.Total != 2 {
			t.Errorf("effects %d, want 2", st.Total)
		}
	})
}

// TestForwardedKeyLog: a replayed answer is logged without effect, with its id and key_replayed.
func TestForwardedKeyLog(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	srv := httptest.NewServer(newSandbox(slog.New(slog.NewTextHandler(&buf, nil))))
	rq := creates[4].req.with(map[string]string{headerIdempotencyKey: "k"})
	send(t, newClient(), srv.URL, rq)
	send(t, newClient(), srv.URL, rq)
	srv.Close()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"effect=false", "id=T-1842", "key_replayed=true"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("log line of the replay %q lacks %q", lines[1], want)
		}
	}
	if strings.Contains(lines[0], "key_replayed") || !strings.Contains(lines[0], "effect=true") {
		t.Errorf("log line of the first request %q: want effect=true, no key_replayed", lines[0])
	}
}

// TestFindTickets: GET /v1/tickets?external_id=X finds the tickets created with that external_id,
// oldest first, as created, without effect; a reset forgets them.
func TestFindTickets(t *testing.T) {
	t.Parallel()
	s, srv := newTestSandbox(t)
	c := newClient()
	create := func(body string) map[string]any {
		t.Helper()
		resp, b := send(t, c, srv.URL, request{path: "/v1/tickets", contentType: "application/json", body: body})
		if resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
		return decode(t, b)
	}
	a := create(`{"external_id":"default/create_ticket/k1","title":"a"}`)
	b := create(`{"external_id":"default/create_ticket/k1","title":"b"}`)
	create(`{"external_id":"other","title":"c"}`)
	create(`{"title":"d"}`)
	find := func(ext string) []any {
		t.Helper()
		resp, body := send(t, c, srv.URL, request{method: "GET", path: "/v1/tickets?external_id=" + ext})
		if resp.StatusCode != 200 {
			t.Fatalf("find %s: %d %s", ext, resp.StatusCode, body)
		}
		data, ok := decode(t, body)["data"].([]any)
		if !ok {
			t.Fatalf("find %s: no data array in %s", ext, body)
		}
		return data
	}
	data := find("default%2Fcreate_ticket%2Fk1")
	if len(data) != 2 || at(data[0], "id") != a["id"] || at(data[1], "id") != b["id"] || at(data[0], "title") != "a" || at(data[0], "url") != a["url"] {
		t.Errorf("found %v, want the tickets %v and %v as created", data, a["id"], b["id"])
	}
	if got := find("nobody"); len(got) != 0 {
		t.Errorf("found %v for an unknown external_id, want []", got)
	}
	if resp, body := send(t, c, srv.URL, request{method: "GET", path: "/v1/tickets"}); resp.StatusCode != 400 {
		t.Errorf("find without external_id: %d %s, want 400", resp.StatusCode, body)
	}
	st := s.snapshot()
	if st.Total != 4 || st.Requests.ByEndpoint[ticketsFindTickets] != 3 {
		t.Errorf("stats %+v: want 4 effects (the creates) and 3 lookups", st)
	}
	send(t, c, srv.URL, request{path: "/_sandbox/reset"})
	if got := find("other"); len(got) != 0 {
		t.Errorf("found %v after a reset, want []", got)
	}
}
