package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// switchingUpstream answers every request with 101 Switching Protocols to websocket, as a WebSocket
// endpoint (or a lax h2c server) would, then logs every byte that arrives on that connection until
// the gateway closes it: through a tunnel, the client's next requests.
type switchingUpstream struct {
	url  string
	mu   sync.Mutex
	reqs []string // "METHOD URI" of each request read
	// after holds, per connection, what arrived after the 101; done gets one send per connection
	// closed.
	after []string
	done  chan struct{}
}

func startSwitchingUpstream(t *testing.T) *switchingUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	u := &switchingUpstream{url: "http://" + ln.Addr().String(), done: make(chan struct{}, 64)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(conn)
		}
	}()
	return u
}

func (u *switchingUpstream) serve(conn net.Conn) {
	defer func() { conn.Close(); u.done <- struct{}{} }()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, req.Method+" "+req.RequestURI)
	u.mu.Unlock()
	io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	rest, _ := io.ReadAll(br) // until the gateway closes the connection
	u.mu.Lock()
	u.after = append(u.after, string(rest))
	u.mu.Unlock()
}

// awaitClosed waits until one more connection to the upstream has closed.
func (u *switchingUpstream) awaitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-u.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway kept a connection to the upstream open for 30s after its 101")
	}
}

// exchangeRaw writes raw to the gateway's proxy listener on a connection of its own, reads the
// answer's status line and header, writes then (bytes that a tunnel would carry, which the
// gateway otherwise reads as requests of its own) and closes the connection.
func exchangeRaw(t *testing.T, g *Gateway, raw, then string) (status int) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.Proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	if then != "" {
		_, _ = io.WriteString(conn, then)
	}
	return resp.StatusCode
}

// TestTunnelNeverOpened (docs/security.md#upgrades-and-tunnels): the built gateway in front of an
// upstream that answers 101 to everything. Upgrade requests get 400 on a read_only, a keyless and a
// keyed route and reach no upstream; requests that asked for no upgrade get 502 when the upstream
// switches anyway, and the requests the client sends next on its connection never reach the
// upstream: no byte arrives after the 101. A keyed call's record is outcome_unknown, and its retry
// is refused, never a replayed 101. On the route with upgrade: websocket the tunnel does open: the
// control.
func TestTunnelNeverOpened(t *testing.T) {
	t.Parallel()
	up := startSwitchingUpstream(t)
	routes := filepath.Join(t.TempDir(), "routes.yaml")
	err := os.WriteFile(routes, []byte(fmt.Sprintf(`
upstreams:
  tickets: {url: %s, headers: {Authorization: "Bearer upstream-s3cret"}}
routes:
  - {name: get_ticket, upstream: tickets, method: GET, path: "/v1/tickets/{id}", class: read_only}
  - {name: put_thing, upstream: tickets, method: PUT, path: "/v1/things/{id}", class: idempotent}
  - {name: add_comment, upstream: tickets, method: POST, path: "/v1/tickets/{id}/comments", class: non_idempotent}
  - {name: events, upstream: tickets, method: GET, path: /v1/events, class: read_only, upgrade: websocket}
`, up.url)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	g := StartGateway(t, routes, []string{"IDEMGATEWAY_DATA_DIR=" + filepath.Join(t.TempDir(), "data")})

	const tunneled = "GET /admin/delete-everything HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /v1/tickets/1/close HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	calls := []struct{ name, head string }{
		{"read_only", "GET /v1/tickets/1 HTTP/1.1\r\nHost: a\r\n"},
		{"keyless", "PUT /v1/things/1 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n"},
		{"keyed", "POST /v1/tickets/1/comments HTTP/1.1\r\nHost: a\r\nIdempotency-Key: up1\r\nContent-Length: 0\r\n"},
	}
	for _, c := range calls {
		for _, upgrade := range []string{"Connection: Upgrade\r\nUpgrade: websocket\r\n", "Connection: Upgrade\r\nUpgrade: tunnel\r\n"} {
			if status := exchangeRaw(t, g, c.head+upgrade+"\r\n", tunneled); status != http.StatusBadRequest {
				t.Errorf("%s, %q: %d, want 400", c.name, upgrade, status)
			}
		}
	}
	up.mu.Lock()
	if len(up.reqs) != 0 {
		t.Errorf("upgrade requests reached the upstream: %q", up.reqs)
	}
	up.mu.Unlock()

	for _, c := range calls {
		if status := exchangeRaw(t, g, c.head+"\r\n", tunneled); status != http.StatusBadGateway {
			t.Errorf("%s, the upstream answered 101: %d, want 502", c.name, status)
		}
		up.awaitClosed(t)
	}
	up.mu.Lock()
	for i, b := range up.after {
		if b != "" {
			t.Errorf("connection %d (%s): %q arrived at the upstream after its 101", i, up.reqs[i], b)
		}
	}
	n := len(up.reqs)
	up.after = nil
	up.mu.Unlock()
	if rec := g.mustRecord(t, "add_comment", "up1"); rec.State != "outcome_unknown" {
		t.Errorf("keyed record after a 101: %s, want outcome_unknown", rec.State)
	}
	if status := exchangeRaw(t, g, calls[2].head+"\r\n", ""); status != http.StatusConflict {
		t.Errorf("retry of the keyed call: %d, want 409 outcome-unknown", status)
	}

	// The control: the route that allows websocket opens the tunnel the client asks for.
	status := exchangeRaw(t, g, "GET /v1/events HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "ping")
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("allowed upgrade: %d, want 101", status)
	}
	up.awaitClosed(t)
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.reqs) != n+1 || len(up.after) != 1 || up.after[0] != "ping" {
		t.Errorf("allowed upgrade: requests %q, after the 101 %q; want one more request, then ping", up.reqs, up.after)
	}
}
