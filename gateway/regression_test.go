package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// Regression tests for what a hostile first user found: each input below once got through, or got
// the wrong answer.

func TestRegressionRequests(t *testing.T) {
	t.Parallel()
	up, executions := countingUpstream(t)
	srv, _, _ := newGatewayYAML(t, openEmbedded, fmt.Sprintf(regressionRoutes, up.URL), gateway.Options{})
	json := http.Header{"Content-Type": {"application/json"}}
	withKey := func(key string, extra ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = append(h[extra[i]], extra[i+1])
		}
		return h
	}
	tests := []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
		problem            string // type suffix, or ""
		decision           string
		executed           bool
	}{
		// Path parameters are decoded exactly once: a%2Fb names "a/b", a%252Fb names "a%2Fb" (an
		// opaque parameter may hold a "/"; TestPathParamsThatReadAsAnotherPath refuses it elsewhere).
		{"path param escaped slash", "POST", "/t/a%2Fb/comment", withKey("p1"), `{}`, 201, "", "execute", true},
		{"path param escaped percent is another resource", "POST", "/t/a%252Fb/comment", withKey("p1"), `{}`, 422, "idempotency-key-reused", "conflict", false},
		{"path param A", "POST", "/t/A/comment", withKey("p2"), `{}`, 201, "", "execute", true},
		{"path param %41 is the same resource", "POST", "/t/%41/comment", withKey("p2"), `{}`, 201, "", "replay", false},
		// A query that does not parse could be read differently upstream.
		{"query with a semicolon", "POST", "/v1/tickets?dry_run=1;x=1", withKey("q1"), `{}`, 400, "invalid-request", "", false},
		{"query with a bad escape", "POST", "/v1/tickets?dry_run=%zz", withKey("q1"), `{}`, 400, "invalid-request", "", false},
		{"Content-Type twice", "POST", "/v1/tickets", withKey("q2", "Content-Type", "text/plain"), `{}`, 400, "invalid-request", "", false},
		{"tenant twice", "POST", "/v1/tickets", withKey("q3", "X-Tenant-Id", "a", "X-Tenant-Id", "b"), `{}`, 400, "invalid-request", "", false},
		{"key folded by a proxy", "POST", "/v1/tickets", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1, k1"}}, `{}`, 400, "invalid-idempotency-key", "", false},
		// Dot-segments are never routed.
		{"dot-dot in a read_only path", "GET", "/v1/tickets/..", nil, "", 400, "invalid-request", "", false},
		{"escaped dot-dot", "GET", "/v1/tickets/%2e%2e", nil, "", 400, "invalid-request", "", false},
		// max_body_bytes holds on calls that stream through.
		{"keyless body over the limit", "PUT", "/v1/tickets", json, strings.Repeat("x", 65), 413, "body-too-large", "", false},
		{"read_only body over the limit", "GET", "/v1/tickets/1", nil, strings.Repeat("x", 65), 413, "body-too-large", "", false},
		{"keyless body at the limit", "PUT", "/v1/tickets", json, strings.Repeat("x", 64), 201, "", "execute", true},
		// A read_only GET answers HEAD; a known path with another method gets 405 and Allow.
		{"HEAD on a read_only GET", "HEAD", "/v1/tickets/1", nil, "", 201, "", "", true},
		{"wrong method", "DELETE", "/v1/tickets", nil, "", 405, "method-not-allowed", "", false},
	}
	for _, tt := range tests {
		before := executions.Load()
		a := do(t, tt.method, srv.URL+tt.path, tt.header, tt.body)
		executed := executions.Load() > before
		if a.status != tt.status || a.header.Get("Idempotency-Decision") != tt.decision || executed != tt.executed ||
			(tt.problem != "" && !strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":"+tt.problem)) {
			t.Errorf("%s: %d %q executed=%v problem=%v; want %d %q executed=%v %s",
				tt.name, a.status, a.header.Get("Idempotency-Decision"), executed, a.problem, tt.status, tt.decision, tt.executed, tt.problem)
		}
		if tt.status == 405 && a.header.Get("Allow") != "POST, PUT" {
			t.Errorf("%s: Allow = %q, want \"POST, PUT\"", tt.name, a.header.Get("Allow"))
		}
	}

	// An upstream 502 on a release route frees the key: the retry executes.
	if a := do(t, "PUT", srv.URL+"/v1/tickets", withKey("r1", "X-Fail", "1"), `{}`); a.status != 502 {
		t.Fatalf("failing PUT: %d", a.status)
	}
	if a := do(t, "PUT", srv.URL+"/v1/tickets", withKey("r1"), `{}`); a.status != 201 || a.header.Get("Idempotency-Decision") != "execute" {
		t.Fatalf("retry of a released unknown outcome: %d %s", a.status, a.header.Get("Idempotency-Decision"))
	}
}

// TestRegressionAdminPathDecodedOnce: the admin path's segments are URL-escaped once; a key with
// a '%' must not reach another key's record (a DELETE there once freed the wrong key and let a
// retry execute twice).
func TestRegressionAdminPathDecodedOnce(t *testing.T) {
	t.Parallel()
	up, executions := countingUpstream(t)
	srv, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(regressionRoutes, up.URL), gateway.Options{})
	admin := gw.AdminHandler("")
	for _, key := range []string{"pct%41", "pctA"} {
		if a := do(t, "POST", srv.URL+"/v1/tickets", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}, `{}`); a.status != 201 {
			t.Fatalf("create %s: %d", key, a.status)
		}
	}
	// A tenant is token characters (docs/security.md#input-bounds): "%" is one, "/" is not.
	do(t, "POST", srv.URL+"/v1/tickets", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k"}, "X-Tenant-Id": {"a%2Fb"}}, `{}`)

	code, rec := adminDo(t, admin, "GET", "/v1/records/default/create/pct%2541", "", "")
	if code != 200 || rec["idempotency_key"] != "pct%41" {
		t.Fatalf("GET pct%%2541: %d %v", code, rec)
	}
	if code, rec = adminDo(t, admin, "GET", "/v1/records/a%252Fb/create/k", "", ""); code != 200 || rec["tenant"] != "a%2Fb" {
		t.Fatalf("GET tenant a%%252Fb: %d %v", code, rec)
	}
	if code, _ = adminDo(t, admin, "GET", "/v1/records/a%2Fb/create/k", "", ""); code != 404 {
		t.Fatalf("GET tenant a%%2Fb (the tenant \"a/b\"): %d, want 404", code)
	}
	if code, _ = adminDo(t, admin, "DELETE", "/v1/records/default/create/pct%2541", "", ""); code != 204 {
		t.Fatalf("DELETE: %d", code)
	}
	a := do(t, "POST", srv.URL+"/v1/tickets", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"pctA"}}, `{}`)
	if a.status != 201 || a.header.Get("Idempotency-Decision") != "replay" || executions.Load() != 3 {
		t.Fatalf("pctA after deleting pct%%41: %d %s, %d executions; want a replay and 3", a.status, a.header.Get("Idempotency-Decision"), executions.Load())
	}
}

// TestRegressionSecondPass: what a second fresh-eyes pass found. A record that does not decrypt
// is a corrupt record (500, not retryable), not a store outage, and may be deleted; requests that
// reach no route are logged too; a problem names the key once it was read.
func TestRegressionSecondPass(t *testing.T) {
	t.Parallel()
	up, _ := countingUpstream(t)
	cfg, err := routes.Parse("routes.yaml", []byte(fmt.Sprintf(regressionRoutes, up.URL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	base, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	logs := &testlog.Buffer{}
	serve := func(key byte) (*httptest.Server, http.Handler) {
		store, err := record.Encrypted(base, bytes.Repeat([]byte{key}, 32))
		if err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(cfg, store, gateway.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		return srv, gw.AdminHandler("")
	}
	srv1, _ := serve(1)
	h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"enc"}}
	if a := do(t, "POST", srv1.URL+"/v1/tickets", h, `{}`); a.status != 201 {
		t.Fatalf("create: %d", a.status)
	}
	srv2, admin2 := serve(2) // restarted with another key
	if a := do(t, "POST", srv2.URL+"/v1/tickets", h, `{}`); a.status != 500 || a.problem["retryable"] != false ||
		!strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":corrupt-record") {
		t.Fatalf("retry under another key: %d %v", a.status, a.problem)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"the key's record is unreadable`) || !strings.Contains(logs.String(), `"key":"enc"`) {
		t.Errorf("no error line names the unreadable record:\n%s", logs.String())
	}
	code, p := adminDo(t, admin2, "GET", "/v1/records/default/create/enc", "", "")
	if code != 500 || p["retryable"] != false || !strings.HasSuffix(fmt.Sprint(p["type"]), ":corrupt-record") {
		t.Fatalf("admin GET of an undecryptable record: %d %v", code, p)
	}
	if code, _ := adminDo(t, admin2, "DELETE", "/v1/records/default/create/enc", "", ""); code != http.StatusNoContent {
		t.Fatalf("admin DELETE of an undecryptable record: %d, want 204", code)
	}

	a := do(t, "POST", srv2.URL+"/v1/tickets", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"big"}}, strings.Repeat("x", 65))
	if a.status != 413 || a.problem["idempotency_key"] != "big" {
		t.Fatalf("413: %d %v; want the key named", a.status, a.problem)
	}
	do(t, "GET", srv2.URL+"/nowhere", nil, "")
	if !strings.Contains(logs.String(), `"path":"/nowhere"`) {
		t.Fatalf("no access line for a request without a route:\n%s", logs.String())
	}
}

// TestStreamedBodyOverLimit: max_body_bytes holds on a body that streams through without a declared
// length (chunked): a keyless call and a read_only call over the limit get 413, and the upstream
// never reads the whole body. TestRegressionRequests sends a declared Content-Length, which is
// refused before any byte streams.
func TestStreamedBodyOverLimit(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 4096) // regressionRoutes: max_body_bytes 64
	var whole atomic.Int32            // upstream requests that read the whole body
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, err := io.ReadAll(r.Body); err == nil && len(b) >= len(body) {
			whole.Add(1)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(up.Close)
	srv, _, _ := newGatewayYAML(t, openEmbedded, fmt.Sprintf(regressionRoutes, up.URL), gateway.Options{})
	for _, c := range []struct{ name, method, path string }{
		{"keyless", "PUT", "/v1/tickets"},
		{"read_only", "GET", "/v1/tickets/1"},
	} {
		// An io.Reader the client cannot measure, with ContentLength -1: sent chunked.
		req, err := http.NewRequest(c.method, srv.URL+c.path, io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: chunked body of %d bytes over max_body_bytes 64: %d, want 413", c.name, len(body), resp.StatusCode)
		}
	}
	if n := whole.Load(); n != 0 {
		t.Errorf("the upstream read the whole over-limit body %d times, want 0", n)
	}
}

// TestDifferingFieldsAsTheRouteWritesThem: a conflict names a body field by the pointer
// the route includes (it once read /body/~1fields~1summary, the canonical document's spelling),
// and a part outside the body by its name without a leading slash.
func TestDifferingFieldsAsTheRouteWritesThem(t *testing.T) {
	t.Parallel()
	up, executions := countingUpstream(t)
	srv, _, _ := newGatewayYAML(t, openEmbedded, fmt.Sprintf(`
upstreams:
  up: {url: %s}
routes:
  - {name: create_issue, upstream: up, method: POST, path: /rest/api/3/issue, class: non_idempotent,
     fingerprint: {body: {include: [/fields/summary]}, query: [notify], headers: [X-Account]}}
`, up.URL), gateway.Options{})
	send := func(summary, notify, account string) reply {
		return do(t, http.MethodPost, srv.URL+"/rest/api/3/issue?notify="+notify,
			http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1"}, "X-Account": {account}},
			`{"fields":{"summary":"`+summary+`"}}`)
	}
	if a := send("Disk full", "true", "a"); a.status != http.StatusCreated {
		t.Fatalf("first call: %d %v", a.status, a.problem)
	}
	a := send("Disk empty", "false", "b")
	got := fmt.Sprint(a.problem["differing_fields"])
	if want := "[/fields/summary headers/x-account query/notify]"; a.status != http.StatusUnprocessableEntity || got != want {
		t.Fatalf("changed call: %d, differing_fields %s; want 422, %s", a.status, got, want)
	}
	if n := executions.Load(); n != 1 {
		t.Fatalf("%d upstream executions, want 1", n)
	}
}
