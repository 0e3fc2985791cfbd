package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// deadlines is the handler of New: it holds each request's body and answer to the read and
// write deadlines of Limits (docs/security.md#deadlines), set per read and per write through
// http.ResponseController, so that a transfer that keeps its pace is never cut.
type deadlines struct {
	next   http.Handler
	limits Limits
}

func (d *deadlines) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	dw := &deadlineWriter{ResponseWriter: w, rc: rc, allowance: d.limits.WriteTimeout, rate: d.limits.MinRate}
	if r.Body != nil && r.Body != http.NoBody {
		dw.body = &Body{ReadCloser: r.Body, rc: rc, allowance: d.limits.BodyTimeout, rate: d.limits.MinRate}
		// A copy of the request carries the wrapped body: net/http looks at its own request's
		// body after the handler, and must still find its own. Answered without reading a body
		// it was asked to wait for (Expect: 100-continue), it then closes the connection after
		// the answer; given another body, it would read this one first to drain it, sending
		// "100 Continue" and holding the answer until the client sent the body or the deadline
		// cut it (docs/cases.md C26).
		r = r.WithContext(r.Context())
		r.Body = dw.body
	}
	d.next.ServeHTTP(dw, r)
	// net/http writes what is still buffered, and the end of a chunked answer, after the handler.
	dw.arm()
}

// budget is how long a transfer of n bytes so far may have kept the gateway waiting: the
// allowance, plus the time n bytes take at rate bytes per second (capped far beyond any timeout).
func budget(allowance time.Duration, n, rate int64) time.Duration {
	s := n / rate
	if s >= math.MaxInt32 {
		return math.MaxInt32 * time.Second
	}
	return allowance + time.Duration(s)*time.Second + time.Duration(n%rate)*time.Second/time.Duration(rate)
}

// writePiece is the most the gateway writes under one write deadline: the size of the reverse
// proxy's copy buffer. A replay or a problem larger than it is written in pieces, so that its
// budget grows as the client takes it.
const writePiece = 32 << 10

// deadlineWriter sets the connection's write deadline before each write: the answer may keep the
// gateway waiting its allowance (the write timeout), plus one second per rate bytes the
// connection has taken so far. Only the time spent in writes counts. A client that reads at the
// rate or faster is never cut, however large the answer and however the kernel buffers it; one
// that stops reading is cut once the bytes already taken are paid for.
type deadlineWriter struct {
	http.ResponseWriter
	rc        *http.ResponseController
	allowance time.Duration
	rate      int64
	body      *Body // the request body; nil when the request has none

	// Written by one goroutine at a time: the handler's, or the reverse proxy's flusher, which
	// holds a lock around its writes and flushes.
	written int64         // bytes the connection has taken
	waited  time.Duration // time spent in writes
}

// arm sets the write deadline for the next write.
func (w *deadlineWriter) arm() time.Time {
	now := time.Now()
	_ = w.rc.SetWriteDeadline(now.Add(budget(w.allowance, w.written, w.rate) - w.waited))
	return now
}

func (w *deadlineWriter) WriteHeader(code int) {
	start := w.arm() // a 1xx answer is written at once
	w.ResponseWriter.WriteHeader(code)
	w.waited += time.Since(start)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	n := 0
	for {
		piece := p[n:min(len(p), n+writePiece)]
		start := w.arm()
		m, err := w.ResponseWriter.Write(piece)
		w.waited += time.Since(start)
		w.written += int64(m)
		n += m
		if err != nil || n == len(p) {
			return n, err
		}
	}
}

// FlushError flushes the buffered answer under the deadline (http.ResponseController.Flush).
func (w *deadlineWriter) FlushError() error {
	start := w.arm()
	err := w.rc.Flush()
	w.waited += time.Since(start)
	return err
}

// Flush is FlushError for http.Flusher, which the reverse proxy uses on streamed answers.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// Hijack hands the connection over (the reverse proxy does on a protocol upgrade); the deadlines
// then no longer apply.
func (w *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.rc.Hijack() }

// Unwrap is for http.ResponseController.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Body is the request body of a request New's server serves: it sets the connection's read
// deadline before each read. The body may keep the gateway waiting the allowance, plus one second
// per rate bytes received so far. Only the time spent in Read counts, so that an upstream slow to
// take a streamed body is not held against the client.
type Body struct {
	io.ReadCloser
	rc        *http.ResponseController
	allowance time.Duration
	rate      int64

	n      int64         // bytes read; Read's alone (one reader at a time)
	waited time.Duration // time spent in Read; Read's alone

	mu    sync.Mutex     // held while the read deadline changes, and for ended and slow
	ended bool           // stop was called: no more reads
	slow  *SlowBodyError // set once the body fell behind
}

// errBodyStopped is a read of a body that Stop ended: its exchange has failed.
var errBodyStopped = errors.New("request body: no longer read: the exchange failed")

// SlowBodyError is a request body that fell behind the minimum rate: the error of its Read, and of
// an exchange that streamed it (Body.FellBehind).
type SlowBodyError struct {
	n                 int64
	waited, allowance time.Duration
	rate              int64
}

func (e *SlowBodyError) Error() string {
	return fmt.Sprintf("the request body came too slowly: %d bytes in %s of waiting, where the gateway waits %s plus 1s per %d bytes",
		e.n, e.waited.Round(time.Millisecond), e.allowance, e.rate)
}

func (b *Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.ended {
		b.mu.Unlock()
		return 0, errBodyStopped
	}
	start := time.Now()
	_ = b.rc.SetReadDeadline(start.Add(budget(b.allowance, b.n, b.rate) - b.waited))
	b.mu.Unlock()

	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(start)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		// net/http now reads the connection in the background, to see the client go away: that
		// read must not meet this body's deadline.
		b.mu.Lock()
		if !b.ended {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.mu.Unlock()
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.ended {
			return n, errBodyStopped
		}
		b.slow = &SlowBodyError{n: b.n, waited: b.waited, allowance: b.allowance, rate: b.rate}
		return n, b.slow
	}
	return n, err
}

// FellBehind returns the error of a body that fell behind the minimum rate (a *SlowBodyError), or
// nil.
func (b *Body) FellBehind() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.slow == nil {
		return nil
	}
	return b.slow
}

// Stop ends the reading of the body: reads under way end within linger, later ones fail at once.
func (b *Body) Stop(linger time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = true
	_ = b.rc.SetReadDeadline(time.Now().Add(linger))
}

// BodyOf is the request body New's handler wrapped, found through w's Unwrap chain; nil when w was
// not served by it, or the request has no body.
func BodyOf(w http.ResponseWriter) *Body {
	for {
		if dw, ok := w.(*deadlineWriter); ok {
			return dw.body
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}
