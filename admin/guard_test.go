package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
