package gateway_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/testlog"
)

// TestTenantAndCredentialScope: tenant_required refuses a request without a tenant; with
// scope.credential two callers of one tenant never share a key, and the credential itself is
// kept nowhere: not in the log, the receipt, the span or the upstream's key.
func TestTenantAndCredentialScope(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up, executions := countingUpstream(t)
		logs := &testlog.Buffer{}
		spans := tracetest.NewInMemoryExporter()
		reg := gateway.NewRegistry()
		srv, _, gw := newGatewayYAML(t, open, fmt.Sprintf(`
upstreams:
  up: {url: %s, headers: {X-Upstream-Token: "upstream-s3cret"}}
routes:
  - {name: create, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent,
     tenant_required: true, scope: {credential: true}, receipt: {remote_id: /id}}
`, up.URL), gateway.Options{
			Logger:         slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)),
			Metrics:        reg,
		})
		send := func(tenant, credential, key, body string) reply {
			h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
			if tenant != "" {
				h.Set("X-Tenant-ID", tenant)
			}
			if credential != "" {
				h.Set("Authorization", "Bearer "+credential)
			}
			return do(t, "POST", srv.URL+"/v1/tickets", h, body)
		}
		if a := send("", "alice-s3cret", "k", `{}`); a.status != 400 || !strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":missing-tenant") {
			t.Fatalf("no tenant: %d %v", a.status, a.problem)
		}
		if a := send("acme", "", "k", `{}`); a.status != 400 || !strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":invalid-request") {
			t.Fatalf("no credential: %d %v", a.status, a.problem)
		}
		if a := send("acme", "alice-s3cret", "k", `{}`); a.header.Get("Idempotency-Decision") != "execute" {
			t.Fatalf("alice: %d %s", a.status, a.header.Get("Idempotency-Decision"))
		}
		if a := send("acme", "bob-s3cret", "k", `{}`); a.header.Get("Idempotency-Decision") != "execute" {
			t.Fatalf("bob, same tenant and key: %s; want execute (his own scope)", a.header.Get("Idempotency-Decision"))
		}
		if a := send("acme", "alice-s3cret", "k", `{}`); a.header.Get("Idempotency-Decision") != "replay" {
			t.Fatalf("alice again: %s", a.header.Get("Idempotency-Decision"))
		}
		// Another spelling of alice's credential is alice's scope (docs/keys.md#scope-credential);
		// two credentials are refused, since the upstream might check the one the scope did not
		// hash.
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k"}, "X-Tenant-Id": {"acme"}}
		h.Set("Authorization", "bearer   alice-s3cret")
		if a := do(t, "POST", srv.URL+"/v1/tickets", h, `{}`); a.header.Get("Idempotency-Decision") != "replay" {
			t.Fatalf("alice, scheme in lower case and three spaces: %d %s; want her replay", a.status, a.header.Get("Idempotency-Decision"))
		}
		h["Authorization"] = []string{"Bearer bob-s3cret", "Bearer alice-s3cret"}
		if a := do(t, "POST", srv.URL+"/v1/tickets", h, `{}`); a.status != 400 || !strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":invalid-request") {
			t.Fatalf("two credentials: %d %v; want 400 invalid-request", a.status, a.problem)
		}
		if n := executions.Load(); n != 2 {
			t.Fatalf("executions = %d, want 2", n)
		}

		// A new key per retry of one effect is counted.
		send("acme", "alice-s3cret", "k-again", `{}`)
		want := `
# HELP idemgateway_key_churn_total Executions of an effect (tenant, tool, fingerprint) that executed under another key within a minute: a client minting a new key per retry (counted per gateway process).
# TYPE idemgateway_key_churn_total counter
idemgateway_key_churn_total{tool="create"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idemgateway_key_churn_total"); err != nil {
			t.Error(err)
		}

		// The credential and the upstream secret are nowhere.
		sum := sha256.Sum256([]byte("Bearer alice-s3cret"))
		scope := "sha256:" + hex.EncodeToString(sum[:16])
		code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/acme/create/k?credential="+url.QueryEscape(scope), "", "")
		var everything strings.Builder
		fmt.Fprint(&everything, logs.String(), rec, code)
		for _, s := range spans.GetSpans() {
			fmt.Fprint(&everything, s.Name, s.Attributes, s.Events)
		}
		for _, secret := range []string{"alice-s3cret", "bob-s3cret", "upstream-s3cret"} {
			if strings.Contains(everything.String(), secret) {
				t.Errorf("%q leaked into the logs, a receipt or a span", secret)
			}
		}
		if code != 200 || rec["credential_scope"] != scope || rec["remote_id"] != "T-1" {
			t.Errorf("credential-scoped receipt: %d %v", code, rec)
		}
	})
}

// Defences of the upstream request, upgrades, framing and error details (docs/security.md:
// "Upstream requests", "Upgrades and tunnels", "Framing", "Error details"): each is tested on every
// route class, with the requests an attacker sends, raw where framing matters.

// seenRequest is what a loggingUpstream received of one request.
type seenRequest struct {
	method, uri      string
	header, trailer  http.Header
	transferEncoding []string
	contentLength    int64
	body             string
}

// loggingUpstream records every request it receives, its trailers read after the body, and answers
// 201 {"id":"T-<n>"}; an interim 103 with a Link header first when the request has X-Early-Hints.
type loggingUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func newLoggingUpstream(t *testing.T) *loggingUpstream {
	t.Helper()
	u := &loggingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{method: r.Method, uri: r.RequestURI, header: r.Header.Clone(), trailer: r.Trailer.Clone(),
			transferEncoding: r.TransferEncoding, contentLength: r.ContentLength, body: string(body)})
		n := len(u.seen)
		u.mu.Unlock()
		if r.Header.Get("X-Early-Hints") != "" {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-%d"}`, n)
	}))
	t.Cleanup(u.Close)
	return u
}

// requests returns how many requests the upstream received.
func (u *loggingUpstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// last returns the last request the upstream received.
func (u *loggingUpstream) last(t *testing.T) seenRequest {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream received no request")
	}
	return u.seen[len(u.seen)-1]
}

// securityRoutes: one route of each class on one upstream that injects a credential and takes the
// gateway's scoped key on X-Upstream-Idem, and a read_only route that allows WebSocket upgrades.
const securityRoutes = `
upstreams:
  up: {url: %s, forward_key: X-Upstream-Idem,
       headers: {Authorization: "Bearer upstream-s3cret", X-Api-Client: gateway}}
routes:
  - {name: read, upstream: up, method: GET, path: "/v1/things/{id}", class: read_only}
  - {name: keyless, upstream: up, method: PUT, path: "/v1/things/{id}", class: idempotent}
  - {name: keyed, upstream: up, method: POST, path: /v1/things, class: non_idempotent, receipt: {remote_id: /id},
     on_unknown_outcome: block}
  - {name: socket, upstream: up, method: GET, path: /v1/socket, class: read_only, upgrade: websocket}
`

// routeClass is a request on one class of route of securityRoutes. A keyless call is a PUT on an
// idempotent route without a key; a keyed one carries Idempotency-Key.
type routeClass struct {
	name, method, path string
	keyed              bool
}

var routeClasses = []routeClass{
	{"read_only", "GET", "/v1/things/1", false},
	{"keyless", "PUT", "/v1/things/1", false},
	{"keyed", "POST", "/v1/things", true},
}

// head is the request line and Host header of a raw request of c, with key as its Idempotency-Key
// on a keyed class; the caller adds the rest of the header section.
func (c routeClass) head(key string) string {
	h := c.method + " " + c.path + " HTTP/1.1\r\nHost: gw.test\r\n"
	if c.keyed {
		h += "Idempotency-Key: " + key + "\r\n"
	}
	return h
}

// rawConn is a client connection to a test server that writes raw bytes and reads answers.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, serverURL string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(serverURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(hangTimeout))
	return &rawConn{Conn: conn, br: bufio.NewReader(conn)}
}

func (c *rawConn) send(t *testing.T, raw string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
}

// answer reads one response and its body; a problem+json body is decoded into problem.
func (c *rawConn) answer(t *testing.T) (resp *http.Response, body string, problem map[string]any) {
	t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("reading an answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading an answer's body: %v", err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		_ = json.Unmarshal(b, &problem)
	}
	return resp, string(b), problem
}

// closed reports whether the server closed the connection after the answers read so far, rather
// than answer what followed them.
func (c *rawConn) closed(t *testing.T) bool {
	t.Helper()
	_, err := c.br.Peek(1)
	switch {
	case err == nil:
		return false
	case errors.Is(err, io.EOF):
		return true
	}
	t.Fatalf("after the answer, neither more bytes nor the connection's end: %v", err)
	return false
}

// TestUpstreamRequestsAreClean (docs/security.md#upstream-requests): whatever a client adds, on
// every route class the upstream gets no request trailer (declared or not), no Trailer header, the
// upstream's configured headers and not the client's, no client key header, a forward_key header
// only from an execution under a key, no header name holding "_", no X-Real-IP or method override,
// and, where the gateway holds the body, the body with its Content-Length, never chunked.
func TestUpstreamRequestsAreClean(t *testing.T) {
	t.Parallel()
	up := newLoggingUpstream(t)
	srv, _, _ := newGatewayYAML(t, openEmbedded, fmt.Sprintf(securityRoutes, up.URL), gateway.Options{})
	const body = `{"title":"clean","priority":1}`
	defences := []struct {
		name string
		// check returns what is wrong with the upstream request seen for a call of class c.
		check func(c routeClass, seen seenRequest) string
	}{
		{"no request trailers", func(_ routeClass, seen seenRequest) string {
			if len(seen.trailer) > 0 || seen.header["Trailer"] != nil {
				return fmt.Sprintf("trailers %v, Trailer %q", seen.trailer, seen.header["Trailer"])
			}
			return ""
		}},
		{"the upstream's headers, not the client's", func(_ routeClass, seen seenRequest) string {
			if a, c := seen.header["Authorization"], seen.header["X-Api-Client"]; !slices.Equal(a, []string{"Bearer upstream-s3cret"}) || !slices.Equal(c, []string{"gateway"}) {
				return fmt.Sprintf("Authorization %q, X-Api-Client %q", a, c)
			}
			return ""
		}},
		{"no client key header", func(_ routeClass, seen seenRequest) string {
			if v := seen.header["Idempotency-Key"]; v != nil {
				return fmt.Sprintf("Idempotency-Key %q", v)
			}
			return ""
		}},
		{"forward_key only from an execution under a key", func(c routeClass, seen seenRequest) string {
			got := seen.header["X-Upstream-Idem"]
			if c.keyed && !slices.Equal(got, []string{"default/keyed/k-clean"}) || !c.keyed && got != nil {
				return fmt.Sprintf("X-Upstream-Idem %q", got)
			}
			return ""
		}},
		{"no header name with _", func(_ routeClass, seen seenRequest) string {
			for name := range seen.header {
				if strings.Contains(name, "_") {
					return "header " + name
				}
			}
			return ""
		}},
		{"no X-Real-IP or method override", func(_ routeClass, seen seenRequest) string {
			for _, name := range []string{"X-Real-Ip", "X-Http-Method-Override", "X-Method-Override", "X-Http-Method"} {
				if v := seen.header[name]; v != nil {
					return fmt.Sprintf("%s %q", name, v)
				}
			}
			return ""
		}},
		{"the body whole; a held body with its Content-Length", func(c routeClass, seen seenRequest) string {
			switch {
			case seen.body != body:
				return fmt.Sprintf("body %q", seen.body)
			case c.keyed && (len(seen.transferEncoding) > 0 || seen.contentLength != int64(len(body))):
				return fmt.Sprintf("Transfer-Encoding %q, Content-Length %d", seen.transferEncoding, seen.contentLength)
			}
			return ""
		}},
	}
	for _, c := range routeClasses {
		// Every attack in one request: a chunked body with a declared trailer and an undeclared
		// one, a client credential and injected-header value, a forged forward_key header, the
		// tenant with underscores, a client address and method overrides.
		raw := c.head("k-clean") +
			"Content-Type: application/json\r\n" +
			"Authorization: Bearer client-token\r\n" +
			"X-Api-Client: client-says\r\n" +
			"X-Upstream-Idem: acme/keyed/k1\r\n" +
			"X_Tenant_ID: evil\r\n" +
			"X-Real-IP: 6.6.6.6\r\n" +
			"X-HTTP-Method-Override: DELETE\r\nX-Method-Override: DELETE\r\nX-HTTP-Method: DELETE\r\n" +
			"Transfer-Encoding: chunked\r\nTrailer: Authorization\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n", len(body), body) +
			"Authorization: Bearer trailer-evil\r\nX-Tenant-ID: victim\r\n\r\n"
		if c.name == "read_only" {
			raw = strings.Replace(raw, "Content-Type:", "Idempotency-Key: refund-2024-001\r\nContent-Type:", 1)
		}
		conn := dialRaw(t, srv.URL)
		conn.send(t, raw)
		if resp, _, problem := conn.answer(t); resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: %d %v, want 201", c.name, resp.StatusCode, problem)
		}
		seen := up.last(t)
		for _, d := range defences {
			if wrong := d.check(c, seen); wrong != "" {
				t.Errorf("%s: %s: the upstream got %s", c.name, d.name, wrong)
			}
		}
	}
}

// TestUpstreamFailuresAreQuiet (docs/security.md#error-details): a client's problem and a receipt's
// detail name the kind of an upstream failure, never the transport's error (an address, a resolver,
// the upstream's bytes); the log line keeps it. On every route class, for an upstream that cannot
// be reached, one that sends a malformed header line, and one that closes the connection without
// answering.
func TestUpstreamFailuresAreQuiet(t *testing.T) {
	t.Parallel()
	rawUpstream := func(answer string) string { // reads one request, writes answer, closes
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer conn.Close()
					if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
						_, _ = io.Copy(io.Discard, req.Body)
						io.WriteString(conn, answer)
					}
				}()
			}
		}()
		return ln.Addr().String()
	}
	failures := []struct {
		name, addr string
		kind       string // the problem's detail
		unknown    bool   // a keyed call's record stays outcome_unknown, with the kind as detail
		logged     string // in the log line
	}{
		{"unreachable", "127.0.0.1:0", "upstream unreachable", false, "dial tcp 127.0.0.1:0"}, // no process can take port 0
		{"malformed", rawUpstream("HTTP/1.1 200 OK\r\nContent-Type: application/json\x01\r\n\r\n"),
			"upstream sent a malformed response", true, "malformed MIME header line"},
		{"broken", rawUpstream(""), "upstream connection broke before its response was complete", true, "EOF"},
	}
	var yaml strings.Builder
	yaml.WriteString("upstreams:\n")
	for _, f := range failures {
		fmt.Fprintf(&yaml, "  %s: {url: http://%s}\n", f.name, f.addr)
	}
	yaml.WriteString("routes:\n")
	for _, f := range failures {
		fmt.Fprintf(&yaml, `  - {name: read_%[1]s, upstream: %[1]s, method: GET, path: "/%[1]s/v1/things/{id}", class: read_only}
  - {name: keyless_%[1]s, upstream: %[1]s, method: PUT, path: "/%[1]s/v1/things/{id}", class: idempotent}
  - {name: keyed_%[1]s, upstream: %[1]s, method: POST, path: "/%[1]s/v1/things", class: non_idempotent}
`, f.name)
	}
	logs := &testlog.Buffer{}
	srv, _, gw := newGatewayYAML(t, openEmbedded, yaml.String(), gateway.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	for _, f := range failures {
		for _, c := range routeClasses {
			h := http.Header{"Content-Type": {"application/json"}}
			if c.keyed {
				h.Set("Idempotency-Key", "k-quiet")
			}
			a := do(t, c.method, srv.URL+"/"+f.name+c.path, h, `{}`)
			if a.status != http.StatusBadGateway || a.problem["detail"] != f.kind {
				t.Errorf("%s, %s: %d %v; want 502 with detail %q", f.name, c.name, a.status, a.problem, f.kind)
			}
		}
		code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/default/keyed_"+f.name+"/k-quiet", "", "")
		switch {
		case f.unknown && (code != 200 || rec["state"] != "outcome_unknown" || rec["detail"] != f.kind):
			t.Errorf("%s: keyed record %d %v; want outcome_unknown with detail %q", f.name, code, rec, f.kind)
		case !f.unknown && code != 404:
			t.Errorf("%s: keyed record %d %v; want none (not committed)", f.name, code, rec)
		}
		if !strings.Contains(logs.String(), f.logged) {
			t.Errorf("%s: the log lacks the transport's error %q:\n%s", f.name, f.logged, logs.String())
		}
	}
}

// TestUpgradeRefused (docs/security.md#upgrades-and-tunnels): a request that asks for a protocol
// upgrade gets 400 invalid-request on every route that does not allow one, and on the route that
// allows websocket when it asks for another protocol; none reaches the upstream. Upgrade without
// Connection: upgrade is proxied without it.
func TestUpgradeRefused(t *testing.T) {
	t.Parallel()
	up := newLoggingUpstream(t)
	srv, _, _ := newGatewayYAML(t, openEmbedded, fmt.Sprintf(securityRoutes, up.URL), gateway.Options{})
	socket := routeClass{"read_only, upgrade: websocket", "GET", "/v1/socket", false}
	tests := []struct {
		class   routeClass
		upgrade string // the header lines that ask for it
	}{
		{routeClasses[0], "Connection: Upgrade\r\nUpgrade: websocket\r\n"},
		{routeClasses[1], "Connection: Upgrade\r\nUpgrade: websocket\r\n"},
		{routeClasses[2], "Connection: Upgrade\r\nUpgrade: websocket\r\n"},
		{routeClasses[0], "Connection: keep-alive, upgrade\r\nUpgrade: tunnel\r\n"},
		{routeClasses[1], "Connection: UPGRADE\r\nUpgrade: tunnel\r\n"},
		{routeClasses[2], "Connection: keep-alive\r\nConnection: upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n"},
		{socket, "Connection: Upgrade\r\nUpgrade: h2c\r\n"},
		{socket, "Connection: Upgrade\r\nUpgrade: websocket, h2c\r\n"},
		{socket, "Connection: Upgrade\r\nUpgrade: websocket\r\nUpgrade: websocket\r\n"},
	}
	for _, tt := range tests {
		before := up.requests()
		conn := dialRaw(t, srv.URL)
		conn.send(t, tt.class.head("k-up")+tt.upgrade+"Content-Length: 0\r\n\r\n")
		resp, _, problem := conn.answer(t)
		if resp.StatusCode != http.StatusBadRequest || !strings.HasSuffix(fmt.Sprint(problem["type"]), ":invalid-request") {
			t.Errorf("%s, %q: %d %v, want 400 invalid-request", tt.class.name, tt.upgrade, resp.StatusCode, problem)
		}
		if up.requests() != before {
			t.Errorf("%s, %q: the upstream was called", tt.class.name, tt.upgrade)
		}
	}
	for _, c := range routeClasses {
		conn := dialRaw(t, srv.URL)
		conn.send(t, c.head("k-upgrade-alone")+"Upgrade: websocket\r\nContent-Length: 0\r\n\r\n")
		if resp, _, problem := conn.answer(t); resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s, Upgrade without Connection: upgrade: %d %v, want 201", c.name, resp.StatusCode, problem)
		}
		if seen := up.last(t); seen.header["Upgrade"] != nil || seen.header["Connection"] != nil {
			t.Errorf("%s: the upstream got Upgrade %q, Connection %q", c.name, seen.header["Upgrade"], seen.header["Connection"])
		}
	}
}

// switchingUpstream answers every request with 101 Switching Protocols to websocket, then records
// what arrives on the connection after it until the gateway closes it: through an open tunnel, the
// client's next bytes.
type switchingUpstream struct {
	url       string
	mu        sync.Mutex
	requests  []*http.Request
	tunneled  []string      // per connection, the bytes read after the 101
	connsDone chan struct{} // one send per connection closed
}

func newSwitchingUpstream(t *testing.T) *switchingUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	u := &switchingUpstream{url: "http://" + ln.Addr().String(), connsDone: make(chan struct{}, 100)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { conn.Close(); u.connsDone <- struct{}{} }()
				_ = conn.SetDeadline(time.Now().Add(hangTimeout))
				br := bufio.NewReader(conn)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				u.mu.Lock()
				u.requests = append(u.requests, req)
				u.mu.Unlock()
				io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
				rest, _ := io.ReadAll(br) // until the gateway closes the connection (or the deadline)
				u.mu.Lock()
				u.tunneled = append(u.tunneled, string(rest))
				u.mu.Unlock()
			}()
		}
	}()
	return u
}

// awaitClosed waits until n more connections to the upstream have closed.
func (u *switchingUpstream) awaitClosed(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-u.connsDone:
		case <-time.After(hangTimeout):
			t.Fatalf("the gateway kept a connection to the upstream open for %s after a 101", hangTimeout)
		}
	}
}

// TestUpstream101NeverRelayed (docs/security.md#upgrades-and-tunnels): an upstream that answers 101
// to a request that asked for no upgrade gets no tunnel on any route class: the client gets 502
// upstream-failed, the bytes it sends next reach no upstream, and on a keyed route the record is
// outcome_unknown (never a committed 101 that replays). On the route that allows websocket, an
// upgrade the client asked for does make a tunnel: the test's control.
func TestUpstream101NeverRelayed(t *testing.T) {
	t.Parallel()
	up := newSwitchingUpstream(t)
	srv, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(securityRoutes, up.url), gateway.Options{})
	const smuggled = "GET /admin/delete-everything HTTP/1.1\r\nHost: x\r\n\r\n"
	socket := routeClass{"read_only, upgrade: websocket, none asked", "GET", "/v1/socket", false}
	for _, c := range append(routeClasses[:3:3], socket) {
		conn := dialRaw(t, srv.URL)
		conn.send(t, c.head("k-101")+"Content-Length: 0\r\n\r\n"+smuggled)
		resp, _, problem := conn.answer(t)
		if resp.StatusCode != http.StatusBadGateway || problem["detail"] != "upstream switched protocols (101) on a request that asked for no upgrade" {
			t.Errorf("%s: %d %v, want 502 upstream-failed", c.name, resp.StatusCode, problem)
		}
		up.awaitClosed(t, 1)
		conn.Close()
	}
	up.mu.Lock()
	for i, b := range up.tunneled {
		if b != "" {
			t.Errorf("connection %d: %q reached the upstream after its 101", i, b)
		}
	}
	up.tunneled = nil
	up.mu.Unlock()

	code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/default/keyed/k-101", "", "")
	if code != 200 || rec["state"] != "outcome_unknown" || rec["detail"] != "upstream switched protocols (101) on a request that asked for no upgrade" {
		t.Errorf("keyed record after a 101: %d %v, want outcome_unknown", code, rec)
	}
	conn := dialRaw(t, srv.URL)
	conn.send(t, routeClasses[2].head("k-101")+"Content-Length: 0\r\n\r\n")
	if resp, _, problem := conn.answer(t); resp.StatusCode != http.StatusConflict || !strings.HasSuffix(fmt.Sprint(problem["type"]), ":outcome-unknown") {
		t.Errorf("retry after a 101: %d %v, want 409 outcome-unknown", resp.StatusCode, problem)
	}

	// The control: an upgrade the route allows and the client asked for is a tunnel.
	conn = dialRaw(t, srv.URL)
	conn.send(t, "GET /v1/socket HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	if resp, _, _ := conn.answer(t); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("allowed upgrade: %d, want 101", resp.StatusCode)
	}
	conn.send(t, "through the tunnel")
	conn.Close()
	up.awaitClosed(t, 1)
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.tunneled) != 1 || up.tunneled[0] != "through the tunnel" {
		t.Errorf("allowed upgrade: the upstream read %q after its 101, want the client's bytes", up.tunneled)
	}
	if last := up.requests[len(up.requests)-1]; last.Header.Get("Authorization") != "Bearer upstream-s3cret" || !strings.EqualFold(last.Header.Get("Upgrade"), "websocket") {
		t.Errorf("allowed upgrade: the upstream got Authorization %q, Upgrade %q", last.Header.Get("Authorization"), last.Header.Get("Upgrade"))
	}
}

// TestInterimResponsesNotRelayed: an upstream's interim 103 Early Hints reaches no client on any
// route class, and the final answer keeps the gateway's own headers (the reverse proxy clears the
// header map after relaying an interim response).
func TestInterimResponsesNotRelayed(t *testing.T) {
	t.Parallel()
	up := newLoggingUpstream(t)
	srv, _, _ := newGatewayYAML(t, openEmbedded, fmt.Sprintf(securityRoutes, up.URL), gateway.Options{})
	for _, c := range routeClasses {
		var interim []int
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			interim = append(interim, code)
			return nil
		}}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), c.method, srv.URL+c.path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Early-Hints", "1")
		req.Header.Set("Content-Type", "application/json")
		if c.keyed {
			req.Header.Set("Idempotency-Key", "k-hints")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || len(interim) > 0 || resp.Header.Get("Link") != "" {
			t.Errorf("%s: %d, interim responses %v, Link %q; want 201 and none", c.name, resp.StatusCode, interim, resp.Header.Get("Link"))
		}
		if c.keyed && resp.Header.Get("Idempotency-Decision") != "execute" {
			t.Errorf("%s: Idempotency-Decision %q after an interim response, want execute", c.name, resp.Header.Get("Idempotency-Decision"))
		}
	}
}

// TestChunkedRequestClosesConnection: a request with both Content-Length and Transfer-Encoding, or
// Transfer-Encoding alone, is read by its chunks and answered with Connection: close, and what
// follows it on the connection is never read as a request, on every route class and on no route at
// all; a request framed by Content-Length alone keeps the connection. net/http removes
// Content-Length from such a request before the gateway sees it, so the two cannot be told apart
// (docs/security.md#framing).
func TestChunkedRequestClosesConnection(t *testing.T) {
	t.Parallel()
	up := newLoggingUpstream(t)
	srv, _, _ := newGatewayYAML(t, openEmbedded, fmt.Sprintf(securityRoutes, up.URL), gateway.Options{})
	const body = `{"title":"cl-te","priority":1}`
	const smuggled = "GET /v1/admin HTTP/1.1\r\nHost: x\r\n\r\n"
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	framings := []struct {
		name, header, body string
		closes             bool
	}{
		{"Content-Length and Transfer-Encoding", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", chunked, true},
		{"Transfer-Encoding and Content-Length", "Transfer-Encoding: chunked\r\nContent-Length: 1000\r\n", chunked, true},
		{"Transfer-Encoding alone", "Transfer-Encoding: chunked\r\n", chunked, true},
		{"Content-Length alone", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body, false},
	}
	unrouted := routeClass{"no route", "POST", "/v1/elsewhere", false}
	for _, c := range append(routeClasses[:3:3], unrouted) {
		for i, f := range framings {
			conn := dialRaw(t, srv.URL)
			conn.send(t, c.head(fmt.Sprintf("k-frame-%d", i))+"Content-Type: application/json\r\n"+f.header+"\r\n"+f.body+smuggled)
			resp, _, problem := conn.answer(t)
			if want := http.StatusCreated; c != unrouted && resp.StatusCode != want {
				t.Errorf("%s, %s: %d %v, want %d", c.name, f.name, resp.StatusCode, problem, want)
			}
			if resp.Close != f.closes { // http.ReadResponse takes Connection: close out of the header
				t.Errorf("%s, %s: Connection: close %v, want %v", c.name, f.name, resp.Close, f.closes)
			}
			if closed := conn.closed(t); closed != f.closes {
				t.Errorf("%s, %s: connection closed after the answer: %v, want %v", c.name, f.name, closed, f.closes)
			}
		}
	}
}

// TestClientSpanQueryRedacted (docs/security.md#error-details): the upstream client span's url.full
// keeps the query's names and no value; no span holds a query value; the upstream gets the query as
// sent.
func TestClientSpanQueryRedacted(t *testing.T) {
	t.Parallel()
	up := newLoggingUpstream(t)
	spans := tracetest.NewInMemoryExporter()
	srv, _, _ := newGatewayYAML(t, openEmbedded, fmt.Sprintf(securityRoutes, up.URL),
		gateway.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))})
	const query = "?api_key=client-query-secret&flag&token=t0k3n&api_key=second-s3cret"
	for _, c := range routeClasses {
		h := http.Header{"Content-Type": {"application/json"}}
		if c.keyed {
			h.Set("Idempotency-Key", "k-span")
		}
		if a := do(t, c.method, srv.URL+c.path+query, h, `{}`); a.status != http.StatusCreated {
			t.Fatalf("%s: %d %v", c.name, a.status, a.problem)
		}
		if seen := up.last(t); !strings.HasSuffix(seen.uri, query) {
			t.Errorf("%s: the upstream got %q, want the query as sent", c.name, seen.uri)
		}
	}
	var clients int
	for _, s := range spans.GetSpans() {
		for _, a := range s.Attributes {
			v := a.Value.String()
			for _, secret := range []string{"client-query-secret", "t0k3n", "second-s3cret"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q: %s = %q holds a query value", s.Name, a.Key, v)
				}
			}
			if a.Key == "url.full" {
				clients++
				if !strings.HasSuffix(v, "?api_key=REDACTED&flag&token=REDACTED&api_key=REDACTED") {
					t.Errorf("span %q: url.full = %q, want the query's names with REDACTED values", s.Name, v)
				}
			}
		}
	}
	if clients != len(routeClasses) {
		t.Errorf("%d client spans with url.full, want %d", clients, len(routeClasses))
	}
}
