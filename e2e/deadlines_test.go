package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// The deadline and admin listener tests (docs/security.md#deadlines, #admin-listener) against the
// built binary, with raw sockets. The gateway's limits are set small (deadlineEnv); every bound a
// test waits for is connBound, far above them, so that a loaded machine does not make the tests
// fail: a bound catches a connection held for good, not a slow one.

// deadlineEnv: a body may keep the gateway waiting 2 s plus 1 s per MiB, an answer 1 s plus 1 s
// per MiB the client took; the admin listener also answers for gw-admin.test.
var deadlineEnv = []string{
	"IDEMGATEWAY_BODY_TIMEOUT=2s", "IDEMGATEWAY_WRITE_TIMEOUT=1s", "IDEMGATEWAY_MIN_TRANSFER_RATE=1048576",
	"IDEMGATEWAY_ADMIN_HOSTS=gw-admin.test",
}

// connBound bounds every wait of these tests for an answer or a closed connection.
const connBound = 30 * time.Second

// rawAnswer reads one answer and its body within connBound.
func rawAnswer(t *testing.T, conn net.Conn, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(connBound))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", connBound, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body (%d): %v", resp.StatusCode, err)
	}
	return resp, string(b)
}

// expectConnClosed fails unless the gateway closes the connection within connBound.
func expectConnClosed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(connBound))
	if _, err := io.Copy(io.Discard, br); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the connection is still open after %s: %v", connBound, err)
	}
}

// trickleBytes writes a byte every every until the connection breaks or stop is closed.
func trickleBytes(conn net.Conn, every time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}
}

// TestDeadlines runs the binary with small limits: a trickled body is answered 400 and its
// connection closed; the 504 of an upstream timeout reaches a client still sending a streamed body,
// and its connection is closed; a download its client never reads is given up.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore, envOptions{routes: "deadlines.yaml.tmpl", env: deadlineEnv})

	t.Run("trickled body", func(t *testing.T) {
		t.Parallel()
		conn, br := rawConn(t, e.gw.Proxy, 0)
		// A slow-body attack, one byte every 200 ms: 29 bytes would take 6 s; 600 take 2 minutes.
		fmt.Fprintf(conn, "POST /v1/tickets HTTP/1.1\r\nHost: a\r\nX-Tenant-ID: acme\r\nContent-Type: application/json\r\n"+
			"Idempotency-Key: slow-b\r\nContent-Length: 600\r\n\r\n{")
		stop := make(chan struct{})
		defer close(stop)
		go trickleBytes(conn, 200*time.Millisecond, stop)
		resp, body := rawAnswer(t, conn, br)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "too slowly") || !resp.Close {
			t.Fatalf("answer %d (close %v) %s, want 400 saying the body came too slowly, with Connection: close", resp.StatusCode, resp.Close, body)
		}
		expectConnClosed(t, conn, br)
	})

	for _, path := range []string{"/quick/v1/tickets", "/quick-read/v1/tickets"} {
		t.Run("upstream timeout while sending "+path, func(t *testing.T) {
			t.Parallel()
			conn, br := rawConn(t, e.gw.Proxy, 0)
			// 1000 bytes, one every 100 ms: the upstream's 300 ms timeout fires long before the end.
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", path)
			stop := make(chan struct{})
			defer close(stop)
			go trickleBytes(conn, 100*time.Millisecond, stop)
			resp, body := rawAnswer(t, conn, br)
			if resp.StatusCode != http.StatusGatewayTimeout || !resp.Close {
				t.Fatalf("answer %d (close %v) %s, want 504 with Connection: close", resp.StatusCode, resp.Close, body)
			}
			expectConnClosed(t, conn, br)
		})
	}

	t.Run("download never read", func(t *testing.T) {
		t.Parallel()
		resp, err := Client.Post(e.sb.URL+"/rest/api/3/issue", "application/json",
			strings.NewReader(`{"fields":{"project":{"key":"DL"},"summary":"Big","issuetype":{"name":"Task"}}}`))
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("creating a Jira issue on the sandbox: %v %v", resp, err)
		}
		resp.Body.Close()
		conn, _ := rawConn(t, e.gw.Proxy, 4096)
		// 16 MiB, more than the kernel's buffers hold, never read; the upstream's timeout is 60 s.
		io.WriteString(conn, "GET /rest/api/3/issue/DL-1 HTTP/1.1\r\nHost: a\r\nX-Sandbox-Body-Bytes: 16777216\r\n\r\n")
		// The handler returns, and writes its access line, only once a write is given up.
		eventually.True(t, "the access line of the download", func() bool {
			return strings.Contains(e.gw.Out.String(), `"path":"/rest/api/3/issue/DL-1"`)
		})
	})
}

// TestAdminListener against the binary: a Host that does not name the admin listener gets 421; its
// address, localhost and IDEMGATEWAY_ADMIN_HOSTS are served; a resolve sent as text/plain gets 415
// and leaves the record as it was.
func TestAdminListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore, envOptions{routes: "deadlines.yaml.tmpl", env: deadlineEnv})
	port := e.gw.Admin[strings.LastIndex(e.gw.Admin, ":")+1:]
	for _, c := range []struct {
		host string
		want int
	}{
		{"attacker.example:" + port, http.StatusMisdirectedRequest},
		{"127.0.0.1:" + port, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"gw-admin.test:" + port, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, e.gw.Admin+"/healthz", nil)
		req.Host = c.host
		resp, err := Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Host %s: %d, want %d", c.host, resp.StatusCode, c.want)
		}
	}

	// A record whose outcome is unknown: the upstream times out on the quick route, with a key.
	r := e.gw.do(t, Request{Path: "/quick/v1/tickets", Key: "res-1", Body: ticketBody, Header: map[string]string{"X-Sandbox-Delay": "2s"}})
	if r.Status != http.StatusGatewayTimeout {
		t.Fatalf("the timed-out call: %d %s, want 504", r.Status, r.Body)
	}
	path := recordPath("default", "create_ticket_quick", "res-1")
	resp, err := Client.Post(e.gw.Admin+path+"/resolve", "text/plain", strings.NewReader(`{"outcome":"not_committed"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("resolve as text/plain: %d, want 415", resp.StatusCode)
	}
	if rec := e.gw.mustRecord(t, "create_ticket_quick", "res-1"); rec.State != "outcome_unknown" {
		t.Errorf("after the text/plain resolve the record is %s, want outcome_unknown", rec.State)
	}
}
