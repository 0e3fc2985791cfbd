package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
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
// found effect is committed and replayed, a missing one executed again, a failed lookup leaves
// the record outcome_unknown.
func TestReconcile(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		var mu sync.Mutex
		tickets := map[string]map[string]any{} // external_id -> ticket
		effects := 0
		lookupFails := false
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.Method == http.MethodGet {
				if lookupFails {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				var data []any
				if tk := tickets[r.URL.Query().Get("external_id")]; tk != nil {
					data = append(data, tk)
				}
				json.NewEncoder(w).Encode(map[string]any{"data": data})
				return
			}
			var body map[string]any
			json.NewDecoder(r.Body).Decode(&body)
			if r.Header.Get("X-Drop") == "before" { // the request arrived; nothing was done
				mu.Unlock()
				dropAfter(t, w)
				mu.Lock()
				return
			}
			effects++
			tk := map[string]any{"id": fmt.Sprintf("T-%d", effects), "external_id": body["external_id"], "title": body["title"]}
			tickets[fmt.Sprint(body["external_id"])] = tk
			if r.Header.Get("X-Drop") == "after" {
				mu.Unlock()
				dropAfter(t, w)
				mu.Lock()
				return
			}
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(tk)
		}))
		t.Cleanup(upstream.Close)
		srv, _, gw := newGatewayYAML(t, open, `
upstreams:
  tickets: {url: `+upstream.URL+`, timeout: 10s}
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
`, gateway.Options{})
		// reconcile.after is measured on a clock the test moves (audit T3): the retries before it
		// are answered in_progress however slow the machine, those after it reconcile.
		var ahead atomic.Int64 // how far the gateway's clock is ahead of time.Now
		gw.SetClock(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
		admin := gw.AdminHandler("")
		send := func(key, drop string) answer {
			h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
			if drop != "" {
				h.Set("X-Drop", drop)
			}
			return do(t, "POST", srv.URL+"/v1/tickets", h, `{"title":"disk full"}`)
		}
		// first sends key's first call with the clock back at time.Now: it is stamped with that
		// start.
		first := func(key, drop string) answer {
			ahead.Store(0)
			return send(key, drop)
		}
		// retry sends key again before reconcile.after has passed since its first call: the call
		// may still be under way upstream, and the answer is 409 in_progress with Retry-After. It
		// then moves the clock past reconcile.after and sends key once more: that retry reconciles.
		// The clock stays ahead, so a later retry of the same key is past reconcile.after too.
		retry := func(key string) answer {
			t.Helper()
			a := send(key, "")
			if a.status != http.StatusConflict || a.header.Get("Idempotency-Decision") != "in_progress" || a.header.Get("Retry-After") == "" {
				t.Fatalf("%s, retry before reconcile.after: %d %q %q", key, a.status, a.header.Get("Idempotency-Decision"), a.header.Get("Retry-After"))
			}
			ahead.Store(int64(10*time.Minute + time.Second))
			return send(key, "")
		}

		// Found: the upstream acted, then the connection broke.
		if a := first("found", "after"); a.status != http.StatusBadGateway {
			t.Fatalf("found, first: %d", a.status)
		}
		a := retry("found")
		if a.status != 201 || a.header.Get("Idempotency-Decision") != "replay" || a.header.Get("Idempotency-Reconciled") != "found" {
			t.Fatalf("found, retry: %d %q %q", a.status, a.header.Get("Idempotency-Decision"), a.header.Get("Idempotency-Reconciled"))
		}
		if code, rec := adminDo(t, admin, "GET", "/v1/records/default/create_ticket/found", "", ""); code != 200 || rec["state"] != "committed" || rec["remote_id"] != "T-1" {
			t.Fatalf("found, record: %d %v", code, rec)
		}
		if a = send("found", ""); a.header.Get("Idempotency-Decision") != "replay" || a.header.Get("Idempotency-Reconciled") != "" {
			t.Fatalf("found, second retry: %q", a.header.Get("Idempotency-Decision"))
		}

		// Not found: the request reached the upstream, which did nothing.
		if a = first("missing", "before"); a.status != http.StatusBadGateway {
			t.Fatalf("missing, first: %d", a.status)
		}
		a = retry("missing")
		if a.status != 201 || a.header.Get("Idempotency-Decision") != "execute" || a.header.Get("Idempotency-Reconciled") != "not-found" {
			t.Fatalf("missing, retry: %d %q %q", a.status, a.header.Get("Idempotency-Decision"), a.header.Get("Idempotency-Reconciled"))
		}
		if code, rec := adminDo(t, admin, "GET", "/v1/records/default/create_ticket/missing", "", ""); code != 200 || rec["executions"] != float64(2) {
			t.Fatalf("missing, record: %d %v", code, rec)
		}

		// The lookup fails: the record stays outcome_unknown.
		first("broken", "after")
		mu.Lock()
		lookupFails = true
		mu.Unlock()
		a = retry("broken")
		if a.status != http.StatusConflict || a.header.Get("Idempotency-Decision") != "outcome_unknown" ||
			!strings.Contains(fmt.Sprint(a.problem["detail"]), "reconciliation failed: lookup answered 500") {
			t.Fatalf("broken lookup: %d %q %v", a.status, a.header.Get("Idempotency-Decision"), a.problem)
		}
		// A failed lookup does not restart the wait: the next retry asks again at once.
		if a = send("broken", ""); a.header.Get("Idempotency-Decision") != "outcome_unknown" {
			t.Fatalf("retry after a failed lookup: %d %q, want another lookup (outcome_unknown)", a.status, a.header.Get("Idempotency-Decision"))
		}
		mu.Lock()
		defer mu.Unlock()
		if effects != 3 {
			t.Fatalf("effects = %d, want 3 (one per operation)", effects)
		}
	})
}
