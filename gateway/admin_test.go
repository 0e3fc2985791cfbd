package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgateway/idemgateway/gateway"
)

func adminDo(t *testing.T, admin http.Handler, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	admin.ServeHTTP(w, req)
	var m map[string]any
	if w.Body.Len() > 0 && strings.Contains(w.Header().Get("Content-Type"), "json") {
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, w.Body)
		}
	}
	return w.Code, m
}

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
			req.Header.Set("X-Tenant-ID", "acme/eu")
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
		const base = "/v1/records/acme%2Feu/create_ticket/"

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
		if code != 200 || rec["state"] != "committed" || rec["remote_id"] != "T-1" || rec["tenant"] != "acme/eu" ||
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
		waitFor(t, func() bool {
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
