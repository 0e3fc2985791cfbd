package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/routes"
)

// TestRecordsCommand runs `idemgateway records` against the admin handler of a real gateway on
// the embedded store: get, resolve both ways, delete, problems, usage errors, flags anywhere.
func TestRecordsCommand(t *testing.T) {
	const token = "records-cli-token"
	t.Setenv("IDEMGATEWAY_ADMIN_TOKEN", token)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Fail") != "" {
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	cfg, err := routes.Parse("routes.yaml", []byte(fmt.Sprintf(`
upstreams: {tickets: {url: %q}}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent, receipt: {remote_id: /id}}
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
	adminSrv := httptest.NewServer(admin.Handler(admin.Options{Store: store, Pipeline: gw, Token: token}))
	t.Cleanup(adminSrv.Close)
	t.Setenv("IDEMGATEWAY_ADMIN_URL", adminSrv.URL)
	call := func(key string, fail bool) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/tickets", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("X-Tenant-ID", "acme|eu")
		if fail {
			req.Header.Set("X-Fail", "1")
		}
		gw.ServeHTTP(rec, req)
	}
	call("ok 1", false)
	call("lost-1", true)
	call("lost-2", true)

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := records(args, &out)
		return out.String(), err
	}
	receipt := func(out string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil || !strings.Contains(out, "\n  \"") {
			t.Fatalf("output is not an indented JSON receipt: %v\n%s", err, out)
		}
		return m
	}

	out, err := run("get", "acme|eu", "create_ticket", "ok 1")
	if err != nil {
		t.Fatal(err)
	}
	if m := receipt(out); m["state"] != "committed" || m["remote_id"] != "T-1" || m["tenant"] != "acme|eu" || m["idempotency_key"] != "ok 1" {
		t.Fatalf("get: %v", m)
	}

	// Flags after the arguments, both - and -- forms.
	out, err = run("resolve", "acme|eu", "create_ticket", "lost-1", "--outcome", "committed", "-remote-id=T-77", "--remote-url", "https://t/77", "--status", "201")
	if err != nil {
		t.Fatal(err)
	}
	if m := receipt(out); m["state"] != "committed" || m["remote_id"] != "T-77" || m["remote_url"] != "https://t/77" || m["response_status"] != float64(201) {
		t.Fatalf("resolve committed: %v", m)
	}
	if out, err = run("resolve", "--outcome=not_committed", "acme|eu", "create_ticket", "lost-2"); err != nil || out != "" {
		t.Fatalf("resolve not_committed: %q, %v; want no output", out, err)
	}
	// --admin before the command, as after it.
	if out, err = run("--admin", adminSrv.URL, "get", "acme|eu", "create_ticket", "lost-1"); err != nil || receipt(out)["remote_id"] != "T-77" {
		t.Fatalf("--admin before get: %q, %v", out, err)
	}
	if out, err = run("--admin=http://127.0.0.1:1", "--admin", adminSrv.URL, "get", "acme|eu", "create_ticket", "lost-1"); err != nil || receipt(out)["remote_id"] != "T-77" {
		t.Fatalf("--admin twice before get (the last counts): %q, %v", out, err)
	}
	if out, err = run("delete", "acme|eu", "create_ticket", "ok 1"); err != nil || out != "" {
		t.Fatalf("delete: %q, %v; want no output", out, err)
	}

	for _, tt := range []struct {
		name string
		args []string
		want string // the error's start
	}{
		{"deleted", []string{"get", "acme|eu", "create_ticket", "ok 1"}, "records: 404 No record: no record"},
		{"committed already", []string{"resolve", "acme|eu", "create_ticket", "lost-1", "--outcome", "not_committed"}, "records: 409 Cannot resolve: "},
		{"bad status", []string{"resolve", "acme|eu", "create_ticket", "lost-1", "--outcome", "committed", "--status", "500"}, "records: 400 Invalid request body: "},
		{"no outcome", []string{"resolve", "acme|eu", "create_ticket", "lost-1"}, "records resolve: --outcome must be"},
		{"too few", []string{"get", "acme|eu", "create_ticket"}, "records get: 2 arguments, want 3"},
		{"unknown flag", []string{"get", "--outcome", "x", "a", "b", "c"}, "records get: flag provided but not defined: -outcome"},
		{"unknown command", []string{"purge"}, `records: unknown command "purge"`},
		{"no command", nil, "records: a command is required"},
		{"bad admin URL", []string{"get", "--admin", "localhost:9090", "a", "b", "c"}, "records: adminclient: admin URL"},
		{"bad admin URL before the command", []string{"-admin=localhost:9090", "get", "a", "b", "c"}, "records: adminclient: admin URL"},
		{"--admin without its URL", []string{"--admin"}, `records: unknown command "--admin"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(tt.args...)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || out != "" {
				t.Fatalf("%q, %v; want an error starting %q and no output", out, err, tt.want)
			}
		})
	}

	// A wrong token is refused, and never printed.
	t.Setenv("IDEMGATEWAY_ADMIN_TOKEN", "wrong-"+token)
	if _, err := run("get", "acme|eu", "create_ticket", "lost-1"); err == nil || !strings.HasPrefix(err.Error(), "records: 401 Unauthorized: ") || strings.Contains(err.Error(), token) {
		t.Fatalf("wrong token: %v", err)
	}
}

// TestRecordsList: `records list` sends its flags as the list endpoint's query and prints the page.
// TestRecordsHelp: asked for help, records prints its usage and succeeds.
func TestRecordsHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"help", "-h", "--help"} {
		var out bytes.Buffer
		if err := records([]string{arg}, &out); err != nil || !strings.Contains(out.String(), "idemgateway records get TENANT TOOL KEY") {
			t.Errorf("records %s: %v, printed %q; want the usage", arg, err, out.String())
		}
	}
}

func TestRecordsList(t *testing.T) {
	t.Setenv("IDEMGATEWAY_ADMIN_TOKEN", "")
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Path + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"records":[{"idempotency_key":"k1","tenant":"acme","tool":"create_ticket","state":"outcome_unknown","expires_at":"2026-01-01T00:00:00Z"}],"next_cursor":"c2"}`)
	}))
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	if err := records([]string{"list", "--admin", srv.URL, "--tenant", "acme", "--tool", "create_ticket", "--limit", "10", "--cursor", "c1"}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "/v1/records?cursor=c1&limit=10&state=outcome_unknown&tenant=acme&tool=create_ticket"; query != want {
		t.Fatalf("request %s, want %s", query, want)
	}
	var page struct {
		Records []struct {
			Key string `json:"idempotency_key"`
		} `json:"records"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(out.Bytes(), &page); err != nil || len(page.Records) != 1 || page.Records[0].Key != "k1" || page.NextCursor != "c2" {
		t.Fatalf("output %s: %v", out.String(), err)
	}
}
