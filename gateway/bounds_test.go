package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// serveDirect serves one request built by httptest.NewRequest (parsed as the server parses a
// request line, header values unchecked) on gw, and reads the answer.
func serveDirect(gw http.Handler, method, target string, header http.Header) reply {
	req := httptest.NewRequest(method, target, strings.NewReader(`{}`))
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	gw.ServeHTTP(w, req)
	a := reply{status: w.Code, header: w.Header()}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json") {
		_ = json.Unmarshal(w.Body.Bytes(), &a.problem)
	}
	return a
}

// TestTenantAndActorBounds: a tenant or actor is 1 to 128 bytes of token characters; any other
// value, sent on a keyed or a read_only route, is a 400 invalid-request before any store call or
// upstream call, and neither the problem nor the log quotes it.
func TestTenantAndActorBounds(t *testing.T) {
	t.Parallel()
	up, executions := countingUpstream(t)
	cfg, err := routes.Parse("routes.yaml", []byte(fmt.Sprintf(regressionRoutes, up.URL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := &claimCounter{Store: openEmbedded(t)}
	logs := &testlog.Buffer{}
	gw, err := gateway.New(cfg, store, gateway.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("t", 33_000)
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"letters", "acme", true},
		{"every token character", "a!#$%&'*+-.^_`|~09AZ", true},
		{"128 bytes", strings.Repeat("t", 128), true},
		{"empty", "", false},
		{"129 bytes", strings.Repeat("t", 129), false},
		{"33 000 bytes", long, false},
		{"a control byte", "acme\x01", false},
		{"a tab", "ac\tme", false},
		{"DEL", "acme\x7f", false},
		{"non-ASCII", "acmé", false},
		{"a space", "acme corp", false},
		{"a slash", "acme/eu", false},
		{"a comma", "acme,globex", false},
	} {
		for _, h := range []string{"X-Tenant-Id", "X-Actor-Id"} {
			for _, route := range []struct{ method, path string }{{"POST", "/v1/tickets"}, {"GET", "/v1/tickets/1"}} {
				name := fmt.Sprintf("%s in %s on %s %s", tc.name, h, route.method, route.path)
				claims, calls := store.claims.Load(), executions.Load()
				a := serveDirect(gw, route.method, route.path, http.Header{
					"Content-Type": {"application/json"}, "Idempotency-Key": {"k-" + h + "-" + fmt.Sprint(len(tc.value))}, h: {tc.value},
				})
				if tc.ok {
					if a.status >= 300 {
						t.Errorf("%s: %d %v", name, a.status, a.problem)
					}
					continue
				}
				if a.status != 400 || problemType(a) != "invalid-request" || store.claims.Load() != claims || executions.Load() != calls {
					t.Errorf("%s: %d %s, %d claims, %d upstream calls; want 400 invalid-request and none", name, a.status, problemType(a),
						store.claims.Load()-claims, executions.Load()-calls)
				}
				if detail := fmt.Sprint(a.problem["detail"]); tc.value != "" && strings.Contains(detail, tc.value) {
					t.Errorf("%s: the problem quotes the value: %s", name, detail)
				}
			}
		}
	}
	if strings.Contains(logs.String(), long[:129]) {
		t.Error("the log holds the refused tenant")
	}
}

// pathUpstream answers 200 and keeps the request-target of each call it gets.
func pathUpstream(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		g := got
		got = nil
		return g
	}
}

// TestPathParamsThatReadAsAnotherPath: a path parameter whose decoded value an upstream could
// read as another path (an encoded separator, query or fragment mark, backslash, NUL or control
// byte, invalid UTF-8 such as the overlong "%c0%ae", a dot-segment behind ";" parameters) is a
// 400, on read_only and keyed routes alike, and the upstream is not called; each segment of a
// wildcard is checked. A parameter the route declares opaque may hold them. Whatever passes is
// forwarded re-encoded one way: the upstream never sees two spellings of one path.
func TestPathParamsThatReadAsAnotherPath(t *testing.T) {
	t.Parallel()
	up, calls := pathUpstream(t)
	_, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(`
upstreams:
  up: {url: %s}
routes:
  - {name: get_ticket, upstream: up, method: GET, path: "/v1/tickets/{id}", class: read_only}
  - {name: comment, upstream: up, method: POST, path: "/v1/tickets/{id}/comments", class: non_idempotent}
  - {name: get_file, upstream: up, method: GET, path: "/v1/files/{folder}/*", class: read_only}
  - {name: get_blob, upstream: up, method: GET, path: "/v1/blobs/{name}", class: read_only, opaque_path_params: [name]}
`, up.URL), gateway.Options{})
	key := http.Header{"Idempotency-Key": {"k"}, "Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name, method, target string
		forwarded            string // the request-target the upstream gets; "" for a 400
	}{
		{"an encoded slash", "GET", "/v1/tickets/a%2Fadmin", ""},
		{"an encoded slash, lower case", "GET", "/v1/tickets/a%2fadmin", ""},
		{"an encoded question mark", "POST", "/v1/tickets/1%2Fclose%3F/comments", ""},
		{"an encoded hash", "POST", "/v1/tickets/1%2Fadmin%2Fdelete%23/comments", ""},
		{"only a question mark", "GET", "/v1/tickets/%3F", ""},
		{"only a hash", "GET", "/v1/tickets/%23", ""},
		{"dot-dot with a parameter", "POST", "/v1/tickets/..;/comments", ""},
		{"dot with a parameter", "GET", "/v1/tickets/.;x", ""},
		{"encoded dot-dot with a parameter", "POST", "/v1/tickets/%2e%2e%3b/comments", ""},
		{"an encoded backslash", "GET", "/v1/tickets/..%5Cadmin", ""},
		{"a backslash", "GET", `/v1/tickets/..\admin`, ""},
		{"NUL", "GET", "/v1/tickets/%00", ""},
		{"a control byte", "GET", "/v1/tickets/a%09b", ""},
		{"DEL", "GET", "/v1/tickets/a%7Fb", ""},
		{"overlong UTF-8 dot-dot", "GET", "/v1/tickets/%c0%ae%c0%ae", ""},
		{"a wildcard segment with an encoded slash", "GET", "/v1/files/docs/a%2Fb", ""},
		{"a wildcard dot-dot with a parameter", "GET", "/v1/files/docs/a/..;/b", ""},
		{"a plain id", "GET", "/v1/tickets/T-1", "/v1/tickets/T-1"},
		{"an escaped letter is the letter", "GET", "/v1/tickets/%41", "/v1/tickets/A"},
		{"UTF-8 in upper-case hex", "GET", "/v1/tickets/caf%c3%a9", "/v1/tickets/caf%C3%A9"},
		{"a parameter that is no dot-segment", "GET", "/v1/tickets/..a;v=1", "/v1/tickets/..a;v=1"},
		{"an escaped percent stays one", "POST", "/v1/tickets/a%252F/comments", "/v1/tickets/a%252F/comments"},
		{"wildcard segments", "GET", "/v1/files/docs/a/b%20c.txt", "/v1/files/docs/a/b%20c.txt"},
		{"an opaque parameter", "GET", "/v1/blobs/a%2Fb%3Fc%23d%5C", "/v1/blobs/a%2Fb%3Fc%23d%5C"},
		{"an opaque parameter, lower-case hex", "GET", "/v1/blobs/a%2fb", "/v1/blobs/a%2Fb"},
		{"an opaque parameter with a dot-segment behind a parameter", "GET", "/v1/blobs/..;x", "/v1/blobs/..;x"},
	} {
		a := serveDirect(gw, tc.method, tc.target, key)
		got := calls()
		if tc.forwarded == "" {
			if a.status != 400 || problemType(a) != "invalid-request" || len(got) != 0 {
				t.Errorf("%s (%s): %d %s, upstream got %q; want 400 invalid-request and no call", tc.name, tc.target, a.status, problemType(a), got)
			}
			continue
		}
		if a.status >= 300 || len(got) != 1 || got[0] != tc.forwarded {
			t.Errorf("%s (%s): %d %v, upstream got %q; want %s", tc.name, tc.target, a.status, a.problem, got, tc.forwarded)
		}
	}
}

// TestStoreKeyAtEveryBound: every part of a record's store key is bounded, so no request makes
// a key a store refuses (bbolt refuses keys over 32 KiB, which once turned a long tenant into a
// retryable 503): a tenant of 128 bytes and a key of 255 that each escape to three times their
// length, the longest tool name, and a credential scope, execute and replay on both stores.
func TestStoreKeyAtEveryBound(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up, executions := countingUpstream(t)
		tool := strings.Repeat("t", routes.MaxNameBytes)
		srv, _, _ := newGatewayYAML(t, open, fmt.Sprintf(`
upstreams:
  up: {url: %s}
routes:
  - {name: %s, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent, scope: {credential: true}}
`, up.URL, tool), gateway.Options{})
		h := http.Header{
			"Content-Type":    {"application/json"},
			"X-Tenant-Id":     {strings.Repeat("%", routes.MaxTenantBytes)},
			"X-Actor-Id":      {strings.Repeat("|", routes.MaxTenantBytes)},
			"Idempotency-Key": {strings.Repeat("%", record.MaxKeyBytes)},
			"Authorization":   {"Bearer " + strings.Repeat("c", 4096)},
		}
		for _, want := range []string{"execute", "replay"} {
			if a := do(t, "POST", srv.URL+"/v1/tickets", h, `{}`); a.status != 201 || a.header.Get("Idempotency-Decision") != want {
				t.Fatalf("%s: %d %s %v", want, a.status, a.header.Get("Idempotency-Decision"), a.problem)
			}
		}
		if n := executions.Load(); n != 1 {
			t.Errorf("%d executions, want 1", n)
		}
	})
}
