package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testclock"
)

// TestAdminRecords: the records API needs the token, serves the receipt, resolves an unknown
// outcome as committed (retries then replay) or not committed (retries execute), and deletes.
func TestAdminRecords(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		var executions atomic.Int32
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			executions.Add(1)
			if r.Header.Get("X-Fail") != "" {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"T-1"}`)
		}))
		t.Cleanup(upstream.Close)
		srv, _, gw := newGateway(t, open, upstream.URL, gateway.Options{})
		admin := gw.AdminHandler("s3cret")

		send := func(key string, fail bool) *http.Response {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("X-Tenant-ID", "acme|eu")
			if fail {
				req.Header.Set("X-Fail", "1")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		const base = "/v1/records/acme%7Ceu/create_ticket/"

		send("ok key", false)
		if code, _ := adminDo(t, admin, "GET", base+"ok%20key", "", ""); code != http.StatusUnauthorized {
			t.Fatalf("no token: %d", code)
		}
		if code, _ := adminDo(t, admin, "GET", base+"ok%20key", "wrong", ""); code != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d", code)
		}
		lower := httptest.NewRequest("GET", base+"ok%20key", nil)
		lower.Header.Set("Authorization", "bearer s3cret") // the scheme is case-insensitive
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, lower)
		if w.Code != http.StatusOK {
			t.Fatalf("lower-case scheme: %d", w.Code)
		}
		code, rec := adminDo(t, admin, "GET", base+"ok%20key", "s3cret", "")
		if code != 200 || rec["state"] != "committed" || rec["remote_id"] != "T-1" || rec["tenant"] != "acme|eu" ||
			rec["idempotency_key"] != "ok key" || rec["executions"] != float64(1) || rec["response_status"] != float64(201) {
			t.Fatalf("receipt: %d %v", code, rec)
		}
		if _, leaked := rec["owner"]; leaked {
			t.Fatal("the receipt shows the owner token")
		}
		if code, _ := adminDo(t, admin, "POST", base+"ok%20key/resolve", "s3cret", `{"outcome":"not_committed"}`); code != http.StatusConflict {
			t.Fatalf("resolving a committed record: %d, want 409", code)
		}

		// An unknown outcome, resolved as committed: the retry replays the operator's receipt.
		if resp := send("unknown-1", true); resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("failing call: %d", resp.StatusCode)
		}
		if resp := send("unknown-1", false); resp.StatusCode != http.StatusConflict || resp.Header.Get("Idempotency-Decision") != "outcome_unknown" {
			t.Fatalf("retry of an unknown outcome: %d %s", resp.StatusCode, resp.Header.Get("Idempotency-Decision"))
		}
		for _, bad := range []string{`{"outcome":"maybe"}`, `{"outcome":"committed","response_status":500}`, `{"outcome":"committed","extra":1}`, `not json`} {
			if code, _ := adminDo(t, admin, "POST", base+"unknown-1/resolve", "s3cret", bad); code != http.StatusBadRequest {
				t.Errorf("resolve %s: %d, want 400", bad, code)
			}
		}
		code, rec = adminDo(t, admin, "POST", base+"unknown-1/resolve", "s3cret", `{"outcome":"committed","remote_id":"T-99","response_status":201}`)
		if code != 200 || rec["state"] != "committed" || rec["remote_id"] != "T-99" {
			t.Fatalf("resolve committed: %d %v", code, rec)
		}
		if resp := send("unknown-1", false); resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotency-Decision") != "replay" ||
			resp.Header.Get("Idempotency-Replay-Body") != "omitted" {
			t.Fatalf("retry after resolve: %d %s", resp.StatusCode, resp.Header.Get("Idempotency-Decision"))
		}

		// Resolved as not committed: the retry executes.
		send("unknown-2", true)
		if code, _ := adminDo(t, admin, "POST", base+"unknown-2/resolve", "s3cret", `{"outcome":"not_committed"}`); code != http.StatusNoContent {
			t.Fatalf("resolve not_committed: %d", code)
		}
		if resp := send("unknown-2", false); resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotency-Decision") != "execute" {
			t.Fatalf("retry after not_committed: %d %s", resp.StatusCode, resp.Header.Get("Idempotency-Decision"))
		}
		if n := executions.Load(); n != 4 {
			t.Fatalf("upstream executions = %d, want 4", n)
		}

		if code, _ := adminDo(t, admin, "DELETE", base+"ok%20key", "s3cret", ""); code != http.StatusNoContent {
			t.Fatalf("delete: %d", code)
		}
		if code, _ := adminDo(t, admin, "GET", base+"ok%20key", "s3cret", ""); code != http.StatusNotFound {
			t.Fatalf("get after delete: %d", code)
		}
		// A key holding "/" sent unescaped: the answer says how to send it.
		if code, p := adminDo(t, admin, "GET", base+"order/42", "s3cret", ""); code != http.StatusNotFound || !strings.Contains(fmt.Sprint(p["detail"]), "%2F") {
			t.Errorf("GET of an unescaped key with a /: %d %v; want 404 saying to escape it as %%2F", code, p)
		}
		if code, p := adminDo(t, admin, "GET", base+"order%2F42", "s3cret", ""); code != http.StatusNotFound || p["type"] == nil || strings.Contains(fmt.Sprint(p["detail"]), "%2F") {
			t.Errorf("GET of an escaped key with a / that has no record: %d %v; want the record's 404", code, p)
		}
		if code, _ := adminDo(t, admin, "GET", "/readyz", "", ""); code != 200 {
			t.Fatalf("readyz: %d", code)
		}
		if code, _ := adminDo(t, admin, "GET", "/metrics", "", ""); code != 200 {
			t.Fatalf("metrics: %d", code)
		}
	})
}

// TestAdminListAndDeleteGuard: the outcome_unknown records are listed page by page from the
// index, filtered by tenant and tool; a record whose call is under way is not deleted without
// force (deleting it would let a retry execute the call again).
func TestAdminListAndDeleteGuard(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		release := make(chan struct{})
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Hold") != "" {
				<-release
			}
			w.WriteHeader(http.StatusBadGateway) // unknown: the record blocks
		}))
		t.Cleanup(upstream.Close)
		defer close(release) // before the cleanups: closing the gateway waits for the held call
		srv, _, gw := newGateway(t, open, upstream.URL, gateway.Options{})
		admin := gw.AdminHandler("")
		send := func(tenant, key string, hold bool) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("X-Tenant-ID", tenant)
			if hold {
				req.Header.Set("X-Hold", "1")
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
		}
		for _, k := range []string{"k3", "k1", "k2"} {
			send("acme", k, false)
		}
		send("other", "k9", false)

		var got []any
		cursor := ""
		for {
			code, page := adminDo(t, admin, "GET", "/v1/records?state=outcome_unknown&tenant=acme&tool=create_ticket&limit=2&cursor="+cursor, "", "")
			if code != 200 {
				t.Fatalf("list: %d %v", code, page)
			}
			for _, r := range page["records"].([]any) {
				got = append(got, r.(map[string]any)["idempotency_key"])
			}
			next, _ := page["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		if fmt.Sprint(got) != "[k1 k2 k3]" {
			t.Fatalf("listed %v, want [k1 k2 k3]", got)
		}
		if code, page := adminDo(t, admin, "GET", "/v1/records", "", ""); code != 200 || len(page["records"].([]any)) != 4 {
			t.Fatalf("list all: %d %v", code, page)
		}
		for _, bad := range []string{"?state=committed", "?limit=0", "?limit=5000", "?cursor=!!"} {
			if code, _ := adminDo(t, admin, "GET", "/v1/records"+bad, "", ""); code != http.StatusBadRequest {
				t.Errorf("list%s: %d, want 400", bad, code)
			}
		}

		go send("acme", "live", true)
		eventually.True(t, "the live call to be in_progress", func() bool {
			code, rec := adminDo(t, admin, "GET", "/v1/records/acme/create_ticket/live", "", "")
			return code == 200 && rec["state"] == "in_progress"
		})
		if code, _ := adminDo(t, admin, "DELETE", "/v1/records/acme/create_ticket/live", "", ""); code != http.StatusConflict {
			t.Fatalf("DELETE of a live record: %d, want 409", code)
		}
		if code, _ := adminDo(t, admin, "DELETE", "/v1/records/acme/create_ticket/live?force=true", "", ""); code != http.StatusNoContent {
			t.Fatalf("forced DELETE: %d, want 204", code)
		}
	})
}

// unknownUpstream is an upstream that answers every call 502 (the gateway cannot tell whether
// it acted: the record becomes outcome_unknown), counting its calls.
func unknownUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(up.Close)
	return up, &calls
}

// TestAdminResolvedCommitLivesForTheTTL: a record an operator resolves as committed is kept for
// the route's ttl, not the lock lease: a retry long after the lease, within the ttl, replays the
// operator's receipt and never executes again. On the embedded store the test moves the store's
// clock; on Redis it reads the key's own expiry.
func TestAdminResolvedCommitLivesForTheTTL(t *testing.T) {
	t.Parallel()
	const key, skey, path = "k", "default/create_ticket/k", "/v1/records/default/create_ticket/k/resolve"
	// unknownThenResolved makes the record of key outcome_unknown and resolves it as committed.
	unknownThenResolved := func(t *testing.T, srvURL string, admin http.Handler) {
		t.Helper()
		if r, err := send(srvURL, key, `{}`); err != nil || r.String() != "502 execute" {
			t.Fatalf("the failing call: %v %v, want 502 execute", r, err)
		}
		if code, rec := adminDo(t, admin, "POST", path, "", `{"outcome":"committed","remote_id":"T-5","response_status":201}`); code != 200 || rec["state"] != "committed" {
			t.Fatalf("resolve committed: %d %v", code, rec)
		}
	}

	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		c := testclock.New(time.Now())
		up, calls := unknownUpstream(t)
		srv, _, gw := newGateway(t, openEmbeddedAt(c), up.URL, gateway.Options{}, "{lock_lease: 2s, ttl: 1h}")
		unknownThenResolved(t, srv.URL, gw.AdminHandler(""))
		c.Advance(10 * time.Minute) // far past the lease, well within the ttl
		if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "201 replay" {
			t.Fatalf("a retry 10 minutes after the resolve: %v %v, want 201 replay (the record must live for the ttl, not the lease)", r, err)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
		c.Advance(time.Hour) // past the ttl: the key is free again
		if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "502 execute" {
			t.Fatalf("a retry after the ttl: %v %v, want 502 execute", r, err)
		}
	})

	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		store, redisSrv := openRedisServer(t, redistest.Options{})
		up, calls := unknownUpstream(t)
		srv, _, gw := newGatewayOn(t, store, ticketsYAML(up.URL, "{lock_lease: 2s, ttl: 1h}"), gateway.Options{})
		unknownThenResolved(t, srv.URL, gw.AdminHandler(""))
		raw := rawRedis(t, redisSrv)
		ttl, err := raw.PTTL(context.Background(), redisRecordKey(skey)).Result()
		if err != nil || ttl < 30*time.Minute || ttl > time.Hour {
			t.Fatalf("the resolved record's PTTL = %s, %v; want about the route's ttl (1h), far above the lease (2s)", ttl, err)
		}
		if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "201 replay" {
			t.Fatalf("a retry after the resolve: %v %v, want 201 replay", r, err)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
	})
}

// TestAdminListByToolWithoutTenant: GET /v1/records?tool=X without a tenant lists the
// outcome_unknown records of tool X only, of every tenant.
func TestAdminListByToolWithoutTenant(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up, _ := unknownUpstream(t)
		srv, _, gw := newGatewayYAML(t, open, fmt.Sprintf(`
upstreams:
  u: {url: %q, timeout: 5s}
routes:
  - {name: create_ticket, upstream: u, method: POST, path: /v1/tickets, class: non_idempotent}
  - {name: send_email, upstream: u, method: POST, path: /v1/emails, class: non_idempotent}
`, up.URL), gateway.Options{})
		admin := gw.AdminHandler("")
		for _, c := range []struct{ tenant, path, key string }{
			{"acme", "/v1/tickets", "t1"}, {"other", "/v1/tickets", "t2"},
			{"acme", "/v1/emails", "e1"}, {"other", "/v1/emails", "e2"},
		} {
			a := do(t, http.MethodPost, srv.URL+c.path, http.Header{"Content-Type": {"application/json"},
				"Idempotency-Key": {c.key}, "X-Tenant-Id": {c.tenant}}, `{}`)
			if a.status != http.StatusBadGateway {
				t.Fatalf("%s %s: %d, want 502", c.path, c.key, a.status)
			}
		}
		for tool, want := range map[string]string{"create_ticket": "[create_ticket/t1 create_ticket/t2]", "send_email": "[send_email/e1 send_email/e2]"} {
			code, page := adminDo(t, admin, "GET", "/v1/records?state=outcome_unknown&tool="+tool, "", "")
			if code != 200 {
				t.Fatalf("list tool=%s: %d %v", tool, code, page)
			}
			var got []string
			for _, r := range page["records"].([]any) {
				rec := r.(map[string]any)
				got = append(got, fmt.Sprint(rec["tool"], "/", rec["idempotency_key"]))
			}
			slices.Sort(got)
			if fmt.Sprint(got) != want {
				t.Errorf("list tool=%s: %v, want %s", tool, got, want)
			}
		}
	})
}
