package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/record"
)

// TestHostCheck: the admin listener answers a Host that names it (an IP
// address, localhost, the listen address's name, a configured name) and refuses any other with
// 421, so that a page whose name an attacker rebinds to 127.0.0.1 cannot use it.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	store := openEmbedded(t)
	names := []string{"gw-admin.ops.svc"}
	for _, c := range []struct {
		listen, host string
		want         int
	}{
		{"127.0.0.1:9090", "127.0.0.1:9090", http.StatusOK},
		{"127.0.0.1:9090", "127.0.0.1", http.StatusOK},
		{"127.0.0.1:9090", "[::1]:9090", http.StatusOK},
		{"127.0.0.1:9090", "[::1]", http.StatusOK},
		{":9090", "10.1.2.3:9090", http.StatusOK}, // the kubelet's probe, a Prometheus scrape
		{"127.0.0.1:9090", "localhost:9090", http.StatusOK},
		{"127.0.0.1:9090", "LocalHost.", http.StatusOK},
		{"127.0.0.1:9090", "gw-admin.ops.svc:9090", http.StatusOK},
		{"127.0.0.1:9090", "GW-Admin.ops.svc.", http.StatusOK},
		{"admin.internal:9090", "admin.internal:9090", http.StatusOK},
		{"127.0.0.1:9090", "attacker.example:9090", http.StatusMisdirectedRequest}, // a rebound name
		{"127.0.0.1:9090", "admin.internal:9090", http.StatusMisdirectedRequest},
		{"127.0.0.1:9090", "localhost.attacker.example", http.StatusMisdirectedRequest},
		{"127.0.0.1:9090", "evil.localhost", http.StatusMisdirectedRequest},
		{"127.0.0.1:9090", "127.0.0.1.nip.io:9090", http.StatusMisdirectedRequest},
		{"127.0.0.1:9090", "gw-admin", http.StatusMisdirectedRequest},
		{"127.0.0.1:9090", "", http.StatusMisdirectedRequest},
	} {
		h, err := admin.CheckHost(admin.Handler(admin.Options{Store: store}), c.listen, names)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/healthz", "/v1/records/acme/plain_note/run-17-step-3"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = c.host
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			want := c.want
			if want == http.StatusOK && path != "/healthz" {
				want = http.StatusNotFound // no such record
			}
			if w.Code != want {
				t.Errorf("listen %s, Host %q: GET %s: %d, want %d", c.listen, c.host, path, w.Code, want)
			}
		}
	}
	for _, bad := range []string{"", "gw:9090", "http://gw", "gw/admin", "[::1]"} {
		if _, err := admin.CheckHost(admin.Handler(admin.Options{Store: store}), ":9090", []string{bad}); err == nil {
			t.Errorf("admin host %q: no error", bad)
		}
	}
}

// TestResolveNeedsJSON: a resolve sent as text/plain, or without a Content-Type (what a page can
// send to another origin without asking it), is refused with 415 and leaves the record as it was;
// application/json with parameters is taken.
func TestResolveNeedsJSON(t *testing.T) {
	t.Parallel()
	store := openEmbedded(t)
	markUnknown(t, store, "default", "create_ticket", "k")
	h := admin.Handler(admin.Options{Store: store})
	const path = "/v1/records/default/create_ticket/k"
	resolve := func(contentType string) int {
		req := httptest.NewRequest(http.MethodPost, path+"/resolve", strings.NewReader(`{"outcome":"not_committed"}`))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	for _, ct := range []string{"text/plain", "", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"} {
		if code := resolve(ct); code != http.StatusUnsupportedMediaType {
			t.Errorf("resolve as %q: %d, want 415", ct, code)
		}
		if code, rec := adminDo(t, h, "GET", path, "", ""); code != 200 || rec["state"] != record.StateUnknown {
			t.Fatalf("after a resolve as %q: %d %v, want the record still outcome_unknown", ct, code, rec)
		}
	}
	if code := resolve("application/json; charset=utf-8"); code != http.StatusNoContent {
		t.Fatalf("resolve as application/json: %d, want 204", code)
	}
}

// markUnknown stores an outcome_unknown record at the scope key of tenant, tool and key, as an
// execution whose upstream answered 502 leaves it.
func markUnknown(t *testing.T, s record.Store, tenant, tool, key string) {
	t.Helper()
	skey := record.ScopeKey{Tenant: tenant, Tool: tool, Key: key}.String()
	rec := &record.Record{Receipt: record.Receipt{IdempotencyKey: key, Tenant: tenant, Tool: tool,
		EffectFingerprint: "sha256:" + strings.Repeat("0", 64), Executions: 1}, Owner: record.NewOwner(), StartedAt: time.Now()}
	ctx := context.Background()
	if claimed, _, _, err := s.Claim(ctx, skey, rec.Owner, rec.Encode(), time.Minute, time.Hour); err != nil || !claimed {
		t.Fatalf("Claim: %v %v", claimed, err)
	}
	rec.Detail = "upstream answered 502"
	if ok, err := s.MarkUnknown(ctx, skey, rec.Owner, rec.EncodeSettle(), time.Hour); err != nil || !ok {
		t.Fatalf("MarkUnknown: %v %v", ok, err)
	}
}

// adminDo sends method path (with body as application/json when not "") to admin, with the
// bearer token when not "", and returns the status and the decoded JSON answer.
func adminDo(t *testing.T, admin http.Handler, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	admin.ServeHTTP(w, req)
	var v map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &v)
	return w.Code, v
}

// TestBearerTokenSpace: space around the configured token (a secret file's final newline) is not
// part of it; a token of spaces alone admits nobody.
func TestBearerTokenSpace(t *testing.T) {
	t.Parallel()
	store := openEmbedded(t)
	for _, c := range []struct {
		configured, sent string
		want             int
	}{
		{"s3cret\n", "s3cret", http.StatusNotFound}, // admitted: no such record
		{" s3cret ", "s3cret", http.StatusNotFound},
		{"s3cret", "wrong", http.StatusUnauthorized},
		{"  ", "", http.StatusUnauthorized},
		{"\n", " ", http.StatusUnauthorized},
	} {
		h := admin.Handler(admin.Options{Store: store, Token: c.configured})
		req := httptest.NewRequest(http.MethodGet, "/v1/records/t/x/k", nil)
		req.Header.Set("Authorization", "Bearer "+c.sent)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("token %q, sent %q: %d, want %d", c.configured, c.sent, w.Code, c.want)
		}
	}
}
