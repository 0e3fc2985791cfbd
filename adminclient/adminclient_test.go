package adminclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/adminclient"
	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

const token = "s3cret-admin-token"

// testGateway is a real gateway on the embedded store in front of an upstream that answers 201
// {"id":"T-n"}, or 502 when the request carries X-Fail: its proxy server and its admin server.
type testGateway struct {
	proxy, admin *httptest.Server
	executions   *atomic.Int32
}

func newTestGateway(t *testing.T) *testGateway {
	t.Helper()
	var executions atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := executions.Add(1)
		if r.Header.Get("X-Fail") != "" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-%d"}`, n)
	}))
	t.Cleanup(upstream.Close)
	cfg, err := routes.Parse("routes.yaml", []byte(fmt.Sprintf(`
upstreams:
  tickets: {url: %q, timeout: 5s}
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/tickets
    class: non_idempotent
    receipt: {remote_id: /id}
`, upstream.URL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	gw, err := gateway.New(cfg, store, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tg := &testGateway{proxy: httptest.NewServer(gw), admin: httptest.NewServer(admin.Handler(admin.Options{Store: store, Pipeline: gw, Token: token})), executions: &executions}
	t.Cleanup(tg.proxy.Close)
	t.Cleanup(tg.admin.Close)
	return tg
}

// send posts one create_ticket call through the gateway and returns its status and decision.
func (tg *testGateway) send(t *testing.T, tenant, key string, fail bool) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, tg.proxy.URL+"/v1/tickets", strings.NewReader(`{"title":"disk full"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Tenant-ID", tenant)
	if fail {
		req.Header.Set("X-Fail", "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Idempotency-Decision")
}

func (tg *testGateway) client(t *testing.T, tok string) *adminclient.Client {
	t.Helper()
	c, err := adminclient.New(tg.admin.URL, adminclient.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantProblem(t *testing.T, err error, status int, typ string) {
	t.Helper()
	var p *adminclient.Problem
	if !errors.As(err, &p) || p.Status != status || p.Type != problem.TypePrefix+typ || p.Title == "" || p.Detail == "" {
		t.Fatalf("error %v (%#v); want a %d %s problem", err, p, status, typ)
	}
}

// TestGetResolveDelete drives the typed client against the real admin handler: segments with a
// slash, a space, a percent sign and a question mark are escaped once; an unknown outcome is
// resolved both ways; errors are problems.
func TestGetResolveDelete(t *testing.T) {
	t.Parallel()
	tg := newTestGateway(t)
	c := tg.client(t, token)
	ctx := context.Background()
	const tenant = "acme|eu%100" // a tenant is token characters (docs/security.md#input-bounds)
	const key = "run 7/step?3"

	if status, d := tg.send(t, tenant, key, false); status != http.StatusCreated || d != "execute" {
		t.Fatalf("call: %d %s", status, d)
	}
	rec, err := c.Get(ctx, tenant, "create_ticket", key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != record.StateCommitted || rec.Tenant != tenant || rec.IdempotencyKey != key || rec.RemoteID != "T-1" ||
		rec.ResponseStatus != http.StatusCreated || rec.Executions != 1 || !rec.ResponseBodyKept {
		t.Fatalf("receipt %+v", rec)
	}

	_, err = c.Get(ctx, tenant, "create_ticket", "no-such-key")
	wantProblem(t, err, http.StatusNotFound, "no-record")
	if !adminclient.IsNotFound(err) {
		t.Errorf("IsNotFound(%v) = false", err)
	}
	if !strings.HasPrefix(err.Error(), "404 No record: ") {
		t.Errorf("error text %q, want \"404 No record: <detail>\"", err)
	}
	_, err = c.Resolve(ctx, tenant, "create_ticket", key, adminclient.Resolution{Outcome: adminclient.OutcomeNotCommitted})
	wantProblem(t, err, http.StatusConflict, "cannot-resolve")

	// Unknown outcome, resolved as committed: the retry replays the operator's receipt.
	tg.send(t, tenant, "unknown-1", true)
	if rec, err := c.Get(ctx, tenant, "create_ticket", "unknown-1"); err != nil || rec.State != record.StateUnknown ||
		rec.StartedAt.IsZero() || rec.ResolveStatus != http.StatusOK {
		t.Fatalf("after a 502: %+v, %v; want outcome_unknown, started_at, resolve_status 200", rec, err)
	}
	_, err = c.Resolve(ctx, tenant, "create_ticket", "unknown-1", adminclient.Resolution{Outcome: "maybe"})
	wantProblem(t, err, http.StatusBadRequest, "invalid-body")
	rec, err = c.Resolve(ctx, tenant, "create_ticket", "unknown-1", adminclient.Resolution{
		Outcome: adminclient.OutcomeCommitted, RemoteID: "T-99", RemoteURL: "https://tickets.example/T-99", ResponseStatus: 201})
	if err != nil || rec == nil || rec.State != record.StateCommitted || rec.RemoteID != "T-99" || rec.RemoteURL != "https://tickets.example/T-99" || rec.ResponseStatus != 201 {
		t.Fatalf("resolve committed: %+v, %v", rec, err)
	}
	if status, d := tg.send(t, tenant, "unknown-1", false); status != http.StatusCreated || d != "replay" {
		t.Fatalf("retry after resolve: %d %s, want 201 replay", status, d)
	}

	// Resolved as not committed: no receipt, and the retry executes.
	tg.send(t, tenant, "unknown-2", true)
	rec, err = c.Resolve(ctx, tenant, "create_ticket", "unknown-2", adminclient.Resolution{Outcome: adminclient.OutcomeNotCommitted})
	if err != nil || rec != nil {
		t.Fatalf("resolve not_committed: %+v, %v; want nil, nil", rec, err)
	}
	if status, d := tg.send(t, tenant, "unknown-2", false); status != http.StatusCreated || d != "execute" {
		t.Fatalf("retry after not_committed: %d %s, want 201 execute", status, d)
	}

	if err := c.Delete(ctx, tenant, "create_ticket", key, false); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctx, tenant, "create_ticket", key)
	wantProblem(t, err, http.StatusNotFound, "no-record")
	wantProblem(t, c.Delete(ctx, tenant, "create_ticket", key, false), http.StatusNotFound, "no-record")
	if n := tg.executions.Load(); n != 4 {
		t.Fatalf("upstream executions = %d, want 4", n)
	}
}

// TestUnauthorized: a missing or wrong token is a 401 problem, and the token never shows in an
// error.
func TestUnauthorized(t *testing.T) {
	t.Parallel()
	tg := newTestGateway(t)
	for _, tok := range []string{"", "wrong-token"} {
		_, err := tg.client(t, tok).Get(context.Background(), "default", "create_ticket", "k")
		wantProblem(t, err, http.StatusUnauthorized, "unauthorized")
	}
	// A transport error names the URL, never the token.
	c, err := adminclient.New("http://127.0.0.1:1", adminclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(context.Background(), "default", "create_ticket", "k")
	if err == nil || strings.Contains(err.Error(), token) || strings.Contains(fmt.Sprintf("%+v %#v", c, c), token) {
		t.Fatalf("error %v, or the client's formatting, shows the token", err)
	}
}

// TestListAgainstGateway lists outcome_unknown records through the real admin handler, page by
// page. A gateway without the list endpoint (GET /v1/records answered 404 no-route) fails it, never
// skips it: the endpoint is part of the admin API (docs/operations.md#admin-listener).
func TestListAgainstGateway(t *testing.T) {
	t.Parallel()
	tg := newTestGateway(t)
	c := tg.client(t, token)
	ctx := context.Background()
	want := map[string]bool{}
	for i := range 5 {
		key := fmt.Sprintf("lost/%d", i)
		tg.send(t, "acme", key, true)
		want[key] = true
	}
	tg.send(t, "acme", "fine", false)
	tg.send(t, "globex", "lost-elsewhere", true)

	page, err := c.List(ctx, adminclient.ListQuery{Tenant: "acme", Tool: "create_ticket", Limit: 2})
	if p := (*adminclient.Problem)(nil); errors.As(err, &p) && p.Type == problem.TypePrefix+"no-route" {
		t.Fatalf("GET /v1/records answered no-route: the gateway lost its list endpoint: %v", err)
	}
	got := map[string]bool{}
	for pages := 1; ; pages++ {
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) > 2 {
			t.Fatalf("page %d has %d records, limit 2", pages, len(page.Records))
		}
		for _, rec := range page.Records {
			if rec.State != record.StateUnknown || rec.Tenant != "acme" || got[rec.IdempotencyKey] {
				t.Fatalf("page %d: unexpected or repeated %+v", pages, rec)
			}
			got[rec.IdempotencyKey] = true
		}
		if page.NextCursor == "" || pages > 10 {
			break
		}
		page, err = c.List(ctx, adminclient.ListQuery{Tenant: "acme", Tool: "create_ticket", Limit: 2, Cursor: page.NextCursor})
	}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

// TestListRequest: List sends the query of the list endpoint (state defaulting to
// outcome_unknown, empty fields left out) with the token, and decodes the page.
func TestListRequest(t *testing.T) {
	t.Parallel()
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"records":     []record.Receipt{{IdempotencyKey: "k1", Tenant: "acme", Tool: "create_ticket", State: record.StateUnknown}},
			"next_cursor": "c2",
		})
	}))
	t.Cleanup(srv.Close)
	c, err := adminclient.New(srv.URL+"/admin/", adminclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		q    adminclient.ListQuery
		want string
	}{
		{"defaults", adminclient.ListQuery{}, "state=outcome_unknown"},
		{"all", adminclient.ListQuery{State: "in_progress", Tenant: "acme/eu", Tool: "create_ticket", Limit: 50, Cursor: "a b&c"},
			"cursor=a+b%26c&limit=50&state=in_progress&tenant=acme%2Feu&tool=create_ticket"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			page, err := c.List(context.Background(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if got.URL.Path != "/admin/v1/records" || got.URL.RawQuery != tt.want || got.Header.Get("Authorization") != "Bearer "+token {
				t.Fatalf("request %s?%s, Authorization %q; want /admin/v1/records?%s", got.URL.Path, got.URL.RawQuery, got.Header.Get("Authorization"), tt.want)
			}
			if len(page.Records) != 1 || page.Records[0].IdempotencyKey != "k1" || page.NextCursor != "c2" {
				t.Fatalf("page %+v", page)
			}
		})
	}
}

// TestNotAProblem: an answer that is not a problem document (a proxy's HTML error page) still
// reads as "<status> <status text>: <start of the body>".
func TestNotAProblem(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>bad gateway</html>\n")
	}))
	t.Cleanup(srv.Close)
	c, _ := adminclient.New(srv.URL, adminclient.Options{})
	err := c.Delete(context.Background(), "t", "tool", "k", false)
	if err == nil || err.Error() != "502 Bad Gateway: <html>bad gateway</html>" {
		t.Fatalf("error %v", err)
	}
}

func TestNewRefusesBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:9090", "ftp://host", "http://", "http://host/?q=1", "http://user:pw@host/#f"} {
		if _, err := adminclient.New(u, adminclient.Options{}); err == nil {
			t.Errorf("New(%q) accepted", u)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("New(%q): %v shows the password", u, err)
		}
	}
}

// TestCredentialAndForce: WithCredential addresses a credential-scoped record, and a forced
// Delete says so, on every record path.
func TestCredentialAndForce(t *testing.T) {
	t.Parallel()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	c, err := adminclient.New(srv.URL, adminclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	scoped := c.WithCredential("sha256:ab")
	ctx := context.Background()
	_ = scoped.Delete(ctx, "a/b", "tool", "k 1", true)
	_ = c.Delete(ctx, "a", "tool", "k", false)
	_, _ = scoped.Resolve(ctx, "a", "tool", "k", adminclient.Resolution{Outcome: adminclient.OutcomeNotCommitted})
	want := []string{
		"DELETE /v1/records/a%2Fb/tool/k%201?credential=sha256%3Aab&force=true",
		"DELETE /v1/records/a/tool/k",
		"POST /v1/records/a/tool/k/resolve?credential=sha256%3Aab",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests\n%v\nwant\n%v", got, want)
	}
}
