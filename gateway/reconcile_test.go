package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
)

// dropAfter hijacks the connection and closes it without a response: the upstream acted (or not)
// and the gateway cannot know which.
func dropAfter(t *testing.T, w http.ResponseWriter) {
	t.Helper()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	conn.Close()
}

// TestForwardKey: an upstream that de-duplicates by Idempotency-Key gets the gateway's scoped key;
// an unknown outcome is then released by default, and the retry's re-execution is answered by the
// upstream's own de-duplication: one effect.
func TestForwardKey(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		var mu sync.Mutex
		seen := map[string]string{} // forwarded key -> response
		effects := 0
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Idempotency-Key")
			mu.Lock()
			resp, dup := seen[key]
			if !dup {
				effects++
				resp = fmt.Sprintf(`{"id":"re_%d","key":%q}`, effects, key)
				seen[key] = resp
			}
			mu.Unlock()
			if r.Header.Get("X-Drop") != "" {
				dropAfter(t, w)
				return
			}
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, resp)
		}))
		t.Cleanup(upstream.Close)
		srv, _, _ := newGatewayYAML(t, open, `
upstreams:
  stripe: {url: `+upstream.URL+`, forward_key: Idempotency-Key}
routes:
  - {name: refund, upstream: stripe, method: POST, path: /v1/refunds, class: non_idempotent, receipt: {remote_id: /id}}
`, gateway.Options{})
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k"}, "X-Tenant-Id": {"acme"}}
		dropped := http.Header{"X-Drop": {"1"}}
		for k, v := range h {
			dropped[k] = v
		}
		if a := do(t, "POST", srv.URL+"/v1/refunds", dropped, `{"amount":1000}`); a.status != http.StatusBadGateway || a.problem["retryable"] != true {
			t.Fatalf("dropped call: %d %v; want 502 retryable (released)", a.status, a.problem)
		}
		a := do(t, "POST", srv.URL+"/v1/refunds", h, `{"amount":1000}`)
		if a.status != 200 || a.header.Get("Idempotency-Decision") != "execute" {
			t.Fatalf("retry: %d %s", a.status, a.header.Get("Idempotency-Decision"))
		}
		if a = do(t, "POST", srv.URL+"/v1/refunds", h, `{"amount":1000}`); a.header.Get("Idempotency-Decision") != "replay" {
			t.Fatalf("second retry: %s", a.header.Get("Idempotency-Decision"))
		}
		if effects != 1 || len(seen) != 1 || seen["acme/refund/k"] == "" {
			t.Fatalf("effects %d, forwarded keys %v; want 1 effect under acme/refund/k", effects, seen)
		}
	})
}

// TestReconcile: an unknown outcome is settled by the route's lookup on the next request: a
// found effect is committed and replayed, a missing one (no match, a found pointer holding JSON
// null, a lookup answering 404) executed again, a failed lookup leaves the record outcome_unknown.
func TestReconcile(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		f := newReconcileFixture(t, open)
		reconcileFound(t, f)
		reconcileMissing(t, f)
		reconcileNullOrGone(t, f)
		reconcileLookupFails(t, f)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.effects != 6 {
			t.Fatalf("effects = %d, want 6 (one per operation)", f.effects)
		}
	})
}

// reconcileFixture is TestReconcile's gateway on one store, in front of a tickets upstream whose
// lookup finds a ticket by external_id, and the clock that reconcile.after is measured on.
type reconcileFixture struct {
	t     *testing.T
	srv   *httptest.Server
	admin http.Handler
	ahead atomic.Int64 // how far the gateway's clock is ahead of time.Now

	mu          sync.Mutex
	tickets     map[string]map[string]any // external_id -> ticket
	effects     int
	lookupFails string // "500": the lookup answers 500; "drop": its connection breaks
}

// newReconcileFixture starts the upstream and a gateway on a store of open.
func newReconcileFixture(t *testing.T, open storeFactory) *reconcileFixture {
	t.Helper()
	f := &reconcileFixture{t: t, tickets: map[string]map[string]any{}}
	upstream := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(upstream.Close)
	srv, _, gw := newGatewayYAML(t, open, reconcileYAML(upstream.URL, "10s"), gateway.Options{})
	// reconcile.after is measured on a clock the test moves: the retries before it are answered
	// in_progress however slow the machine, those after it reconcile.
	gw.SetClock(func() time.Time { return time.Now().Add(time.Duration(f.ahead.Load())) })
	f.srv, f.admin = srv, gw.AdminHandler("")
	return f
}

// serve is the upstream: a GET looks a ticket up by external_id, a POST creates one; X-Drop
// breaks the connection before the effect or after it.
func (f *reconcileFixture) serve(w http.ResponseWriter, r *http.Request) {
	t := f.t
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodGet {
		switch f.lookupFails {
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
			return
		case "drop":
			dropAfter(t, w)
			return
		}
		ext := r.URL.Query().Get("external_id")
		tk := f.tickets[ext]
		switch {
		case tk == nil && strings.HasSuffix(ext, "/null-member"): // found points at a JSON null
			io.WriteString(w, `{"data":[null]}`)
			return
		case tk == nil && strings.HasSuffix(ext, "/gone"): // no such ticket: 404
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"no ticket with this external_id"}`)
			return
		}
		var data []any
		if tk != nil {
			data = append(data, tk)
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	if r.Header.Get("X-Drop") == "before" { // the request arrived; nothing was done
		f.mu.Unlock()
		dropAfter(t, w)
		f.mu.Lock()
		return
	}
	f.effects++
	tk := map[string]any{"id": fmt.Sprintf("T-%d", f.effects), "external_id": body["external_id"], "title": body["title"]}
	f.tickets[fmt.Sprint(body["external_id"])] = tk
	if r.Header.Get("X-Drop") == "after" {
		f.mu.Unlock()
		dropAfter(t, w)
		f.mu.Lock()
		return
	}
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(tk)
}

// failLookups makes the upstream's lookups fail: "500", "drop", or "" for none.
func (f *reconcileFixture) failLookups(how string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookupFails = how
}

// send sends key's call, its connection broken upstream before or after the effect when drop is
// "before" or "after".
func (f *reconcileFixture) send(key, drop string) reply {
	f.t.Helper()
	h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
	if drop != "" {
		h.Set("X-Drop", drop)
	}
	return do(f.t, "POST", f.srv.URL+"/v1/tickets", h, `{"title":"disk full"}`)
}

// first sends key's first call with the clock back at time.Now: it is stamped with that start.
func (f *reconcileFixture) first(key, drop string) reply {
	f.t.Helper()
	f.ahead.Store(0)
	return f.send(key, drop)
}

// retry sends key again before reconcile.after has passed since its first call: the call may
// still be under way upstream, and the answer is 409 in_progress with Retry-After. It then moves
// the clock past reconcile.after and sends key once more: that retry reconciles. The clock stays
// ahead, so a later retry of the same key is past reconcile.after too.
func (f *reconcileFixture) retry(key string) reply {
	t := f.t
	t.Helper()
	a := f.send(key, "")
	if a.status != http.StatusConflict || a.header.Get("Idempotency-Decision") != "in_progress" || a.header.Get("Retry-After") == "" {
		t.Fatalf("%s, retry before reconcile.after: %d %q %q", key, a.status, a.header.Get("Idempotency-Decision"), a.header.Get("Retry-After"))
	}
	f.ahead.Store(int64(10*time.Minute + gateway.DefaultStoreTimeout + time.Second)) // past reconcile.after from the latest start of the call
	return f.send(key, "")
}

// record is the admin API's view of key's record.
func (f *reconcileFixture) record(key string) (int, map[string]any) {
	f.t.Helper()
	return adminDo(f.t, f.admin, "GET", "/v1/records/default/create_ticket/"+key, "", "")
}

// reconcileFound: the upstream acted, then the connection broke; the lookup finds the effect,
// which is committed and replayed.
func reconcileFound(t *testing.T, f *reconcileFixture) {
	if a := f.first("found", "after"); a.status != http.StatusBadGateway {
		t.Fatalf("found, first: %d", a.status)
	}
	a := f.retry("found")
	if a.status != 201 || a.header.Get("Idempotency-Decision") != "replay" || a.header.Get("Idempotency-Reconciled") != "found" {
		t.Fatalf("found, retry: %d %q %q", a.status, a.header.Get("Idempotency-Decision"), a.header.Get("Idempotency-Reconciled"))
	}
	if code, rec := f.record("found"); code != 200 || rec["state"] != "committed" || rec["remote_id"] != "T-1" {
		t.Fatalf("found, record: %d %v", code, rec)
	}
	if a = f.send("found", ""); a.header.Get("Idempotency-Decision") != "replay" || a.header.Get("Idempotency-Reconciled") != "" {
		t.Fatalf("found, second retry: %q", a.header.Get("Idempotency-Decision"))
	}
}

// reconcileMissing: the request reached the upstream, which did nothing; the lookup finds no
// match, and the call executes again.
func reconcileMissing(t *testing.T, f *reconcileFixture) {
	if a := f.first("missing", "before"); a.status != http.StatusBadGateway {
		t.Fatalf("missing, first: %d", a.status)
	}
	a := f.retry("missing")
	if a.status != 201 || a.header.Get("Idempotency-Decision") != "execute" || a.header.Get("Idempotency-Reconciled") != "not-found" {
		t.Fatalf("missing, retry: %d %q %q", a.status, a.header.Get("Idempotency-Decision"), a.header.Get("Idempotency-Reconciled"))
	}
	if code, rec := f.record("missing"); code != 200 || rec["executions"] != float64(2) {
		t.Fatalf("missing, record: %d %v", code, rec)
	}
}

// reconcileNullOrGone: not found, told two more ways: the lookup's found pointer holds JSON null
// ({"data":[null]}), or the lookup answers 404. Neither is an effect: the call executes again,
// and no receipt of null is committed.
func reconcileNullOrGone(t *testing.T, f *reconcileFixture) {
	for _, key := range []string{"null-member", "gone"} {
		if a := f.first(key, "before"); a.status != http.StatusBadGateway {
			t.Fatalf("%s, first: %d", key, a.status)
		}
		a := f.retry(key)
		if a.status != 201 || a.header.Get("Idempotency-Decision") != "execute" || a.header.Get("Idempotency-Reconciled") != "not-found" {
			t.Fatalf("%s, retry: %d %q %q %v; want 201 execute after not-found", key, a.status, a.header.Get("Idempotency-Decision"), a.header.Get("Idempotency-Reconciled"), a.problem)
		}
		if code, rec := f.record(key); code != 200 || rec["state"] != "committed" ||
			rec["executions"] != float64(2) || rec["remote_id"] == nil || rec["remote_id"] == "" {
			t.Fatalf("%s, record: %d %v; want committed by the re-execution (executions 2, a remote_id)", key, code, rec)
		}
	}
}

// reconcileLookupFails: a lookup that answers 500, or whose connection breaks, leaves the record
// outcome_unknown.
func reconcileLookupFails(t *testing.T, f *reconcileFixture) {
	f.first("broken", "after")
	f.failLookups("500")
	a := f.retry("broken")
	if a.status != http.StatusConflict || a.header.Get("Idempotency-Decision") != "outcome_unknown" ||
		!strings.Contains(fmt.Sprint(a.problem["detail"]), "reconciliation failed: lookup answered 500") {
		t.Fatalf("broken lookup: %d %q %v", a.status, a.header.Get("Idempotency-Decision"), a.problem)
	}
	// A failed lookup does not restart the wait: the next retry asks again at once.
	if a = f.send("broken", ""); a.header.Get("Idempotency-Decision") != "outcome_unknown" {
		t.Fatalf("retry after a failed lookup: %d %q, want another lookup (outcome_unknown)", a.status, a.header.Get("Idempotency-Decision"))
	}
	// The lookup's connection breaks: the answer and the receipt name the kind of failure,
	// not the transport's error (docs/security.md#error-details).
	f.failLookups("")
	f.first("broken-conn", "after")
	f.failLookups("drop")
	const detail = "reconciliation failed: lookup: upstream connection broke before its response was complete"
	if a = f.retry("broken-conn"); a.status != http.StatusConflict || a.problem["detail"] != problem.ErrOutcomeUnknown.Error()+": "+detail {
		t.Fatalf("lookup whose connection broke: %d %v", a.status, a.problem)
	}
	if code, rec := f.record("broken-conn"); code != 200 || rec["detail"] != detail {
		t.Fatalf("lookup whose connection broke, record: %d %v; want detail %q", code, rec, detail)
	}
}

// TestReconcileReExecutionRestartsTheWait: a re-execution after a lookup that found nothing is a
// new call upstream, so reconcile.after counts from its start, not the first call's. Its record
// (what a kill -9 during it leaves behind) carries its start, and when it ends unknown too (the
// upstream answers 500), the retry right after it is refused 409 in_progress with a Retry-After of
// reconcile.after from the re-execution's latest start (its reclaim and lookup after its
// started_at) and sends no lookup: a lookup then could miss the effect of the re-execution,
// still running upstream, and execute the call a third time. The clock is the test's: it stands
// still unless the test moves it.
func TestReconcileReExecutionRestartsTheWait(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		var lookups, posts atomic.Int32
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		var releaseOnce sync.Once
		unhold := func() { releaseOnce.Do(func() { close(release) }) }
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				lookups.Add(1)
				io.WriteString(w, `{"data":[]}`) // nothing found
				return
			}
			io.Copy(io.Discard, r.Body)
			switch posts.Add(1) {
			case 1: // the request arrived, nothing was done, the connection broke: unknown
				dropAfter(t, w)
			case 2: // the re-execution: held, then it ends unknown too
				arrived <- struct{}{}
				<-release
				w.WriteHeader(http.StatusInternalServerError)
			default:
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, `{"id":"T-1"}`)
			}
		}))
		t.Cleanup(upstream.Close)
		t.Cleanup(unhold) // before upstream.Close, which waits for the held call
		srv, _, gw := newGatewayYAML(t, open, reconcileYAML(upstream.URL, "1m"), gateway.Options{})
		c := testclock.New(time.Now()) // the gateway's clock: it moves only when the test moves it
		gw.SetClock(c.Now)
		advance := c.Advance
		post := func() (*http.Response, error) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(`{"title":"disk full"}`))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "k")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return resp, err
		}
		send := func() reply {
			t.Helper()
			h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k"}}
			return do(t, "POST", srv.URL+"/v1/tickets", h, `{"title":"disk full"}`)
		}
		startedAt := func(want string) time.Time {
			t.Helper()
			state, at, err := gw.RecordStartedAt(context.Background(), "default", "create_ticket", "k")
			if err != nil || state != want {
				t.Fatalf("record: state %q, err %v; want %s", state, err, want)
			}
			return at
		}

		if a := send(); a.status != http.StatusBadGateway {
			t.Fatalf("first call: %d %v", a.status, a.problem)
		}
		firstStart := startedAt(record.StateUnknown)

		// reconcile.after later, but within a store timeout of it: the claim that stamped
		// started_at may have been answered that late, and the call started then (case C14). No
		// lookup yet.
		advance(10*time.Minute + time.Second)
		if a := send(); a.status != http.StatusConflict || a.header.Get("Idempotency-Decision") != "in_progress" || lookups.Load() != 0 {
			t.Fatalf("retry reconcile.after after started_at, within a store timeout: %d %q, %d lookups; want 409 in_progress and none",
				a.status, a.header.Get("Idempotency-Decision"), lookups.Load())
		}
		// Past it, a retry looks up, finds nothing and executes again (held).
		advance(gateway.DefaultStoreTimeout)
		reexecStart := c.Now()
		type result struct {
			resp *http.Response
			err  error
		}
		retried := make(chan result, 1)
		go func() { // do would t.Fatal off the test's goroutine
			resp, err := post()
			retried <- result{resp, err}
		}()
		select {
		case <-arrived:
		case r := <-retried:
			t.Fatalf("the retry did not execute again: %v %v", r.resp, r.err)
		}
		// What a kill -9 now leaves behind: the record of the re-execution, with its start.
		if got := startedAt(record.StateInProgress); !got.Equal(reexecStart) {
			t.Errorf("record during the re-execution: started_at %s, want the re-execution's start %s (the first call's is %s)",
				got, reexecStart, firstStart)
		}
		unhold()
		r := <-retried
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.resp.StatusCode != http.StatusInternalServerError || r.resp.Header.Get("Idempotency-Reconciled") != "not-found" {
			t.Fatalf("re-execution: %d %q, want the upstream's 500 after not-found", r.resp.StatusCode, r.resp.Header.Get("Idempotency-Reconciled"))
		}
		if got := startedAt(record.StateUnknown); !got.Equal(reexecStart) {
			t.Errorf("record after the re-execution ended unknown: started_at %s, want its start %s (the first call's is %s)",
				got, reexecStart, firstStart)
		}

		// At once: the re-execution may still be running upstream. No lookup, no third call. The
		// wait is reconcile.after from the latest start of the re-execution: after its reclaim
		// (a store call) and its lookup (the upstream's timeout, 1m here).
		reexecWait := 10*time.Minute + 2*gateway.DefaultStoreTimeout + time.Minute
		a := send()
		if want := strconv.Itoa(int(reexecWait.Seconds())); a.status != http.StatusConflict || a.header.Get("Idempotency-Decision") != "in_progress" || a.header.Get("Retry-After") != want {
			t.Fatalf("retry right after the re-execution: %d %q Retry-After %q; want 409 in_progress, Retry-After %s",
				a.status, a.header.Get("Idempotency-Decision"), a.header.Get("Retry-After"), want)
		}
		if n, p := lookups.Load(), posts.Load(); n != 1 || p != 2 {
			t.Fatalf("lookups %d, calls %d; want 1 lookup and 2 calls (none before reconcile.after from the re-execution's latest start)", n, p)
		}

		// reconcile.after from the re-execution's start: the next retry looks up again.
		advance(reexecWait)
		if a = send(); a.status != http.StatusCreated || a.header.Get("Idempotency-Reconciled") != "not-found" {
			t.Fatalf("retry reconcile.after after the re-execution: %d %q", a.status, a.header.Get("Idempotency-Reconciled"))
		}
		if n, p := lookups.Load(), posts.Load(); n != 2 || p != 3 {
			t.Fatalf("lookups %d, calls %d; want 2 and 3", n, p)
		}
	})
}

// reconcileYAML is a routes file with one reconcile route on the upstream at url, with the
// upstream timeout given and reconcile.after 10m (the tests move the gateway's clock past it).
func reconcileYAML(url, timeout string) string {
	return `
upstreams:
  tickets: {url: ` + url + `, timeout: ` + timeout + `}
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/tickets
    class: non_idempotent
    receipt: {remote_id: /id}
    reconcile:
      inject: {body_pointer: /external_id, value: "{key}"}
      path: "/v1/tickets?external_id={key}"
      found: /data/0
      remote_id: /data/0/id
      status: 201
      after: 10m
`
}

// TestForwardedKeyIsCaseSafe (docs/cases.md C25): every pair of distinct scope keys, over tenants
// and keys of up to three characters drawn from letters of both cases, digits and characters
// that URL-escaping changes, is forwarded as two values that differ under ASCII case folding;
// a key without upper-case letters is forwarded unchanged, and escaping is undone by unescaping.
func TestForwardedKeyIsCaseSafe(t *testing.T) {
	t.Parallel()
	var words []string
	var grow func(prefix string)
	grow = func(prefix string) {
		words = append(words, prefix)
		if len(prefix) < 3 {
			for _, c := range []string{"a", "A", "f", "F", "4", "%", "/", " "} {
				grow(prefix + c)
			}
		}
	}
	grow("")
	scope := record.NewToolScope("Refund/v2")
	folded := map[string]string{} // lower-cased forwarded value -> scope key
	for _, tenant := range []string{"acme", "Acme", "ACME", "a%41"} {
		for _, key := range words[1:] {
			skey := scope.Key(tenant, key, "")
			fwd := gateway.CaseSafe(skey)
			if prev, dup := folded[strings.ToLower(fwd)]; dup {
				t.Fatalf("scope keys %q and %q are forwarded as %q and a value equal to it under case folding", prev, skey, fwd)
			}
			folded[strings.ToLower(fwd)] = skey
			if back, err := url.PathUnescape(fwd); err != nil || back != mustUnescape(t, skey) {
				t.Fatalf("%q forwarded as %q, which unescapes to %q (%v), not to what the scope key does", skey, fwd, back, err)
			}
			if strings.ToLower(skey) == skey && fwd != skey {
				t.Fatalf("%q, without upper-case letters, forwarded as %q", skey, fwd)
			}
		}
	}
}

// mustUnescape is url.PathUnescape of a value that must unescape.
func mustUnescape(t *testing.T, s string) string {
	t.Helper()
	u, err := url.PathUnescape(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
