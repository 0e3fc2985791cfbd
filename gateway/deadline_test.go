package gateway_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/server"
)

// Tests of the deadlines of docs/security.md#deadlines, on servers built by server.New, the
// constructor of both of the command's listeners. Their limits are set
// small; every bound a test waits for is hangTimeout, far above them, so that a loaded machine
// does not make them fail: a bound catches a connection held for good, not a slow one.

// limitedServer is a server.New server on a loopback port that notes the connections it
// has closed, and those that went idle (their answer written whole, kept alive).
type limitedServer struct {
	*httptest.Server
	mu     sync.Mutex
	states map[string]map[http.ConnState]bool // by remote address
}

func serveLimited(t *testing.T, h http.Handler, l server.Limits) *limitedServer {
	t.Helper()
	srv, err := server.New(h, l)
	if err != nil {
		t.Fatal(err)
	}
	ls := &limitedServer{states: map[string]map[http.ConnState]bool{}}
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		addr := c.RemoteAddr().String()
		if ls.states[addr] == nil {
			ls.states[addr] = map[http.ConnState]bool{}
		}
		ls.states[addr][s] = true
	}
	ls.Server = httptest.NewUnstartedServer(nil)
	ls.Config = srv
	ls.Start()
	t.Cleanup(ls.Close)
	return ls
}

// seen reports whether the server's end of the client connection conn has been in state s.
func (ls *limitedServer) seen(conn net.Conn, s http.ConnState) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.states[conn.LocalAddr().String()][s]
}

// dial opens a raw connection to ls; with readBuffer > 0, its receive buffer is that small, so that
// a client that does not read stops the server's writes soon.
func dial(t *testing.T, ls *limitedServer, readBuffer int) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", ls.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.TCPConn)
	if readBuffer > 0 {
		if err := conn.SetReadBuffer(readBuffer); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readAnswer reads one answer and its whole body from br, within hangTimeout.
func readAnswer(t *testing.T, conn net.Conn, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(hangTimeout))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", hangTimeout, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body (%d): %v", resp.StatusCode, err)
	}
	return resp, string(b)
}

// expectClosed reads br to its end and fails unless the server closes the connection within
// hangTimeout.
func expectClosed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(hangTimeout))
	_, err := io.Copy(io.Discard, br)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the connection is still open after %s: %v", hangTimeout, err)
	}
}

// trickle writes one byte every every until the connection breaks or stop is closed.
func trickle(conn net.Conn, every time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
		}
	}
}

// TestSlowBodyIsCut (docs/security.md#deadlines): a body trickled a byte at a time, or one that
// stops after its first byte, is answered 400 and its connection closed once it falls behind the
// minimum rate, and the upstream is never called. Left alone, the trickle would last a minute.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	up, calls := countingUpstream(t)
	_, _, gw := newGateway(t, openEmbedded, up.URL, gateway.Options{})
	ls := serveLimited(t, gw, server.Limits{BodyTimeout: 300 * time.Millisecond, MinRate: 1000})
	for _, c := range []struct {
		name    string
		length  int
		trickle bool
	}{
		{"a byte every 100ms", 600, true},
		{"a first byte, then nothing", 4000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, ls, 0)
			fmt.Fprintf(conn, "POST /v1/tickets HTTP/1.1\r\nHost: a\r\nX-Tenant-ID: acme\r\nContent-Type: application/json\r\n"+
				"Idempotency-Key: slow-%d\r\nContent-Length: %d\r\n\r\n{", c.length, c.length)
			stop := make(chan struct{})
			defer close(stop)
			if c.trickle {
				go trickle(conn, 100*time.Millisecond, stop)
			}
			br := bufio.NewReader(conn)
			resp, body := readAnswer(t, conn, br)
			var p map[string]any
			_ = json.Unmarshal([]byte(body), &p)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(fmt.Sprint(p["detail"]), "too slowly") {
				t.Fatalf("answer %d %s, want 400 saying the body came too slowly", resp.StatusCode, body)
			}
			if !resp.Close {
				t.Error("the answer does not say Connection: close")
			}
			expectClosed(t, conn, br)
		})
	}
	t.Cleanup(func() {
		if n := calls.Load(); n != 0 {
			t.Errorf("the upstream was called %d times, want 0", n)
		}
	})
}

// TestSteadyBodyIsNotCut: a body sent steadily faster than the minimum rate is read whole,
// however long it takes: its allowance grows with every byte (here 12 KB in 120 pieces, about
// 2.4 s, more than twice the allowance a body gets before its first byte). The minimum rate, 50
// bytes a second, is a hundredth of the upload's pace: a piece may take two seconds, not 20 ms,
// before the upload falls behind it, so that no stall of a loaded machine cuts it.
func TestSteadyBodyIsNotCut(t *testing.T) {
	t.Parallel()
	up, calls := countingUpstream(t)
	_, _, gw := newGateway(t, openEmbedded, up.URL, gateway.Options{})
	ls := serveLimited(t, gw, server.Limits{BodyTimeout: time.Second, MinRate: 50})
	body := `{"pad":"` + strings.Repeat("x", 12000) + `"}`
	conn := dial(t, ls, 0)
	fmt.Fprintf(conn, "POST /v1/tickets HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nIdempotency-Key: steady\r\nContent-Length: %d\r\n\r\n", len(body))
	for rest := body; rest != ""; {
		piece := rest[:min(100, len(rest))]
		rest = rest[len(piece):]
		time.Sleep(20 * time.Millisecond) // the pace of the upload (5 KB/s, a hundred times the minimum): a read deadline runs on wall time
		if _, err := io.WriteString(conn, piece); err != nil {
			t.Fatalf("the gateway stopped the upload with %d bytes to go: %v", len(rest)+len(piece), err)
		}
	}
	resp, answer := readAnswer(t, conn, bufio.NewReader(conn))
	if resp.StatusCode != http.StatusCreated || calls.Load() != 1 {
		t.Fatalf("answer %d %s after %d upstream calls, want 201 after 1", resp.StatusCode, answer, calls.Load())
	}
}

// bigUpstream answers 201 (POST) or 200 (GET) with a JSON body of size bytes and its
// Content-Length, so that the reverse proxy copies it without flushing after each write.
func bigUpstream(t *testing.T, size int) *httptest.Server {
	t.Helper()
	body := []byte(`{"id":"T-1","pad":"` + strings.Repeat("x", size-len(`{"id":"T-1","pad":""}`)) + `"}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	return up
}

const bigRoutes = `
upstreams:
  up: {url: %q, timeout: 10s}
routes:
  - {name: create, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent, receipt: {remote_id: /id}}
  - {name: file, upstream: up, method: GET, path: "/v1/files/{id}", class: read_only}
`

// TestNonReadingClientIsCut (docs/security.md#deadlines: a client that never reads would hold a
// connection and its memory for good): an answer whose client does not read is given up, and its
// connection closed, once the writes have waited the write timeout plus the transfer, at the
// minimum rate, of what the connection took: a replay of a stored 8 MiB body, and an 8 MiB download
// streamed from the upstream. The answer never completes (its connection never goes idle for the
// next request).
func TestNonReadingClientIsCut(t *testing.T) {
	t.Parallel()
	const size = 8 << 20
	up := bigUpstream(t, size)
	_, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(bigRoutes, up.URL), gateway.Options{MaxReceiptBodyBytes: 2 * size})
	ls := serveLimited(t, gw, server.Limits{WriteTimeout: 300 * time.Millisecond, MinRate: 1 << 20})
	if r, err := send(ls.URL, "big", "{}"); err != nil || r.status != http.StatusCreated || len(r.body) != size {
		t.Fatalf("the execution: %v %v (%d bytes), want 201 with %d bytes", r, err, len(r.body), size)
	}
	for _, c := range []struct{ name, request string }{
		{"replay", bigReplay},
		{"download", bigDownload},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, ls, 4096)
			if _, err := io.WriteString(conn, c.request); err != nil {
				t.Fatal(err)
			}
			eventually.True(t, "the connection to be closed", func() bool { return ls.seen(conn, http.StateClosed) })
			if ls.seen(conn, http.StateIdle) {
				t.Fatal("the answer was written whole: the test needs one the kernel cannot hold")
			}
		})
	}
}

// The requests of the 8 MiB answers of bigUpstream: a replay of the receipt of key "big", and a
// download.
const (
	bigReplay   = "POST /v1/tickets HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nIdempotency-Key: big\r\nContent-Length: 2\r\n\r\n{}"
	bigDownload = "GET /v1/files/1 HTTP/1.1\r\nHost: a\r\n\r\n"
)

// TestSteadyReaderIsNotCut: a long answer read steadily, faster than the minimum rate, is never
// cut, although it takes longer than the write timeout: its budget grows with every byte the
// client takes. A replay is one write of 8 MiB, which the gateway makes in pieces; a download is
// streamed from the upstream. The write timeout is a second, so that no stall of a loaded machine
// eats the budget of the first bytes.
func TestSteadyReaderIsNotCut(t *testing.T) {
	t.Parallel()
	const size = 8 << 20
	up := bigUpstream(t, size)
	_, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(bigRoutes, up.URL), gateway.Options{MaxReceiptBodyBytes: 2 * size})
	ls := serveLimited(t, gw, server.Limits{WriteTimeout: time.Second, MinRate: 200_000})
	if r, err := send(ls.URL, "big", "{}"); err != nil || r.status != http.StatusCreated || len(r.body) != size {
		t.Fatalf("the execution: %v %v (%d bytes), want 201 with %d bytes", r, err, len(r.body), size)
	}
	for _, c := range []struct {
		name, request string
		status        int
	}{
		{"replay", bigReplay, http.StatusCreated},
		{"download", bigDownload, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, ls, 32<<10)
			if _, err := io.WriteString(conn, c.request); err != nil {
				t.Fatal(err)
			}
			// Read 32 KiB at a time, 10 ms apart: at most 3.2 MB/s, sixteen times the minimum.
			br := bufio.NewReaderSize(pacedReader{conn, 10 * time.Millisecond}, 32<<10)
			_ = conn.SetReadDeadline(time.Now().Add(hangTimeout))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != c.status || err != nil || n != size {
				t.Fatalf("%d, %d bytes, %v; want %d with %d bytes", resp.StatusCode, n, err, c.status, size)
			}
		})
	}
}

// pacedReader waits every before each read: a slow client, whose pace only wall time can set (the
// server's write deadlines run on it).
type pacedReader struct {
	r     io.Reader
	every time.Duration
}

func (p pacedReader) Read(b []byte) (int, error) {
	time.Sleep(p.every) // the client's pace, not a wait for an event
	return p.r.Read(b)
}

// TestStreamedFailureClosesConnection (docs/security.md#deadlines): when the upstream exchange of a
// streamed body fails, the client gets the answer at once, with Connection: close, and the
// connection is closed, instead of the gateway reading the rest of the body first (here it would
// take 50 s).
func TestStreamedFailureClosesConnection(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // reads until the gateway gives up: never answers in time
	}))
	t.Cleanup(up.Close)
	_, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(`
upstreams:
  up: {url: %q, timeout: 300ms}
routes:
  - {name: keyless, upstream: up, method: POST, path: /v1/notes, class: idempotent}
  - {name: search, upstream: up, method: POST, path: /v1/search, class: read_only}
`, up.URL), gateway.Options{})
	ls := serveLimited(t, gw, server.Limits{BodyTimeout: time.Minute})
	for _, path := range []string{"/v1/notes", "/v1/search"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, ls, 0)
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", path)
			stop := make(chan struct{})
			defer close(stop)
			go trickle(conn, 50*time.Millisecond, stop)
			br := bufio.NewReader(conn)
			resp, body := readAnswer(t, conn, br)
			if resp.StatusCode != http.StatusGatewayTimeout || !resp.Close {
				t.Fatalf("answer %d (close %v) %s, want 504 with Connection: close", resp.StatusCode, resp.Close, body)
			}
			expectClosed(t, conn, br)
		})
	}
}

// TestSlowStreamedBodyIsCut: a body that streams to the upstream (keyless, read_only) and
// falls behind the minimum rate fails the upstream exchange: 502, Connection: close, and the
// connection closed; the upstream's own timeout (a minute) is not what ends it.
func TestSlowStreamedBodyIsCut(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(up.Close)
	_, _, gw := newGatewayYAML(t, openEmbedded, fmt.Sprintf(`
upstreams:
  up: {url: %q, timeout: 1m}
routes:
  - {name: keyless, upstream: up, method: POST, path: /v1/notes, class: idempotent}
  - {name: search, upstream: up, method: POST, path: /v1/search, class: read_only}
`, up.URL), gateway.Options{})
	ls := serveLimited(t, gw, server.Limits{BodyTimeout: 300 * time.Millisecond, MinRate: 1000})
	for _, path := range []string{"/v1/notes", "/v1/search"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, ls, 0)
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 600\r\n\r\n{", path)
			stop := make(chan struct{})
			defer close(stop)
			go trickle(conn, 100*time.Millisecond, stop)
			br := bufio.NewReader(conn)
			resp, body := readAnswer(t, conn, br)
			if resp.StatusCode != http.StatusBadGateway || !resp.Close {
				t.Fatalf("answer %d (close %v) %s, want 502 with Connection: close", resp.StatusCode, resp.Close, body)
			}
			var p map[string]any
			_ = json.Unmarshal([]byte(body), &p)
			if d := fmt.Sprint(p["detail"]); !strings.HasPrefix(d, "upstream exchange failed: the request body came too slowly") {
				t.Errorf("detail %q, want it to say the body came too slowly (not what the transport saw of it)", d)
			}
			expectClosed(t, conn, br)
		})
	}
}

// TestServerLimits: server.New's connections are bounded by the limits net/http enforces: the
// size of the headers (64 KiB by default, not Go's 1 MiB), the time to send them, and the time a
// keep-alive connection may wait idle. Negative limits are refused.
func TestServerLimits(t *testing.T) {
	t.Parallel()
	srv, err := server.New(http.NotFoundHandler(), server.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if srv.MaxHeaderBytes != 64<<10 || srv.ReadHeaderTimeout != 10*time.Second || srv.IdleTimeout != 2*time.Minute ||
		srv.ReadTimeout != 0 || srv.WriteTimeout != 0 {
		t.Errorf("defaults: MaxHeaderBytes %d, ReadHeaderTimeout %s, IdleTimeout %s, ReadTimeout %s, WriteTimeout %s; want 64 KiB, 10s, 2m and no fixed read or write timeout",
			srv.MaxHeaderBytes, srv.ReadHeaderTimeout, srv.IdleTimeout, srv.ReadTimeout, srv.WriteTimeout)
	}
	for _, l := range []server.Limits{{BodyTimeout: -1}, {WriteTimeout: -1}, {ReadHeaderTimeout: -1}, {IdleTimeout: -1}, {MinRate: -1}, {MaxHeaderBytes: -1}} {
		if _, err := server.New(http.NotFoundHandler(), l); err == nil {
			t.Errorf("server.New(%+v): no error", l)
		}
	}

	ls := serveLimited(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		// Headers that are sent get two seconds, which no stall of a loaded machine eats; a connection
		// left idle is closed after 300 ms.
		server.Limits{ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 8 << 10})
	t.Run("headers over MaxHeaderBytes", func(t *testing.T) {
		t.Parallel()
		conn := dial(t, ls, 0)
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: %s\r\n\r\n", strings.Repeat("x", 16<<10))
		if resp, _ := readAnswer(t, conn, bufio.NewReader(conn)); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("answer %d, want 431", resp.StatusCode)
		}
	})
	t.Run("headers under MaxHeaderBytes", func(t *testing.T) {
		t.Parallel()
		conn := dial(t, ls, 0)
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: %s\r\n\r\n", strings.Repeat("x", 4<<10))
		if resp, _ := readAnswer(t, conn, bufio.NewReader(conn)); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("answer %d, want 204", resp.StatusCode)
		}
	})
	t.Run("headers that stop", func(t *testing.T) {
		t.Parallel()
		conn := dial(t, ls, 0)
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: a\r\n")
		expectClosed(t, conn, bufio.NewReader(conn))
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		t.Parallel()
		conn := dial(t, ls, 0)
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		br := bufio.NewReader(conn)
		if resp, _ := readAnswer(t, conn, br); resp.StatusCode != http.StatusNoContent || resp.Close {
			t.Fatalf("answer %d (close %v), want 204 on a kept-alive connection", resp.StatusCode, resp.Close)
		}
		expectClosed(t, conn, br)
	})
}
