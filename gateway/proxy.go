package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
	"github.com/idemgateway/idemgateway/server"
)

// serveReadOnly admits a request on a read_only route (Accept, admit) and proxies it without
// touching the store.
func (g *Gateway) serveReadOnly(w http.ResponseWriter, r *http.Request, rt *routes.Route, auth *auth.Authenticator) {
	x := g.newExchange(w, r, rt, auth)
	defer x.Done()
	if x.Accept() && x.admit() && x.limitBody() {
		httpRoute{}.Call(x)
	}
}

// call is the upstream call of an HTTP route (Responder): the reverse proxy for x, which then ends
// the upstream exchange's context.
// The deferred cancel also runs when the reverse proxy aborts the handler with
// http.ErrAbortHandler (the client went away while the body was copied).
func (httpRoute) Call(x *Exchange) {
	inFlight := x.g.metrics.inFlight.WithLabelValues(x.label)
	inFlight.Inc()
	defer func() {
		inFlight.Dec()
		if x.deadline != nil {
			x.deadline.stop()
		}
		if x.cancelUpstream != nil {
			x.cancelUpstream()
		}
	}()
	x.g.proxy.ServeHTTP(newFinalOnly(x.w), x.request())
}

// rewrite builds the upstream request: the upstream's URL with the incoming path (less
// strip_prefix) appended, the client's headers less what cleanOutbound removes, the upstream's
// configured headers, and the upstream timeout. A side-effecting request is detached from the
// client's context, so that a client that goes away does not cancel it, and gets a body the
// transport cannot rewind, so that it is never resent once bytes may have reached the upstream
// (docs/cases.md C11). A body the gateway holds goes with its Content-Length, never chunked (RFC 9112 §6.3).
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	x := exchangeFrom(pr.In.Context())
	up := x.rt.Upstream
	out := pr.Out
	canonicalPath(out.URL)
	if p := up.StripPrefix; p != "" {
		out.URL.Path = ensureSlash(strings.TrimPrefix(out.URL.Path, p))
		if out.URL.RawPath != "" {
			out.URL.RawPath = ensureSlash(strings.TrimPrefix(out.URL.RawPath, p))
		}
	}
	pr.SetURL(up.URL)
	cleanOutbound(out, x.rt)
	for name, values := range up.Headers.Header() {
		out.Header[name] = values
	}
	if up.ForwardKey != "" && x.owner != "" { // an execution under a key: the upstream de-duplicates by it
		out.Header.Set(up.ForwardKey, x.forwardedKey())
	}

	ctx := pr.In.Context()
	if x.rt.Class != routes.ReadOnly || x.body != nil {
		if !x.stream {
			ctx = context.WithoutCancel(ctx)
		}
		switch {
		case x.body != nil:
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(x.body)), int64(len(x.body))
			out.TransferEncoding = nil
		case out.Body == nil:
			out.Body = io.NopCloser(strings.NewReader(""))
		}
		out.GetBody = nil
		// Let the transport negotiate and undo compression, so that the receipt's remote id can
		// be read from the body and replays carry a plain body.
		out.Header.Del("Accept-Encoding")
	}
	if x.stream { // bounded by the front end's idle timeout once the answer starts (streamAnswer)
		ctx, x.cancelUpstream = context.WithCancel(ctx)
		x.idle = time.AfterFunc(up.Timeout, x.cancelUpstream)
	} else {
		ctx, x.cancelUpstream = context.WithCancel(ctx)
		x.deadline = startDeadline(up.Timeout, x.cancelUpstream)
	}
	if x.exec != nil {
		x.exec.started(x.cancelUpstream)
	}
	ctx = httptrace.WithClientTrace(ctx, x.clientTrace())
	x.upStart = time.Now()
	pr.Out = out.WithContext(ctx)
}

func ensureSlash(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "/" + p
	}
	return p
}

// clientTrace counts the connections obtained for the upstream request and records each as a span
// event: once one is obtained, bytes of the request may reach the upstream.
func (x *Exchange) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			n := x.attempts.Add(1)
			x.mayHaveSent.Store(true)
			if !x.traced {
				return
			}
			x.span.AddEvent("upstream.attempt", trace.WithAttributes(
				attribute.Int("attempt", int(n)),
				attribute.Bool("connection.reused", info.Reused),
			))
		},
	}
}

// modifyResponse settles the record of an execution from the upstream's status (outcomeOf),
// before a byte of the response reaches the client: a committed response's receipt is stored first.
func (g *Gateway) modifyResponse(resp *http.Response) error {
	x := exchangeFrom(resp.Request.Context())
	x.upDur = time.Since(x.upStart)
	x.upStatus = resp.StatusCode
	if resp.StatusCode < 200 { // a 101: the proxy would make the connection a tunnel
		if x.rt.Upgrade != "" && asksUpgrade(resp.Request.Header) {
			x.observeUpstream(outcomePassThrough)
			return nil
		}
		return faultSwitched // proxyError settles it: outcomeOf counts a 1xx unknown
	}
	if x.owner == "" { // read_only, or no key: nothing to settle
		if x.stream {
			x.streamAnswer(resp)
		}
		x.observeUpstream(outcomePassThrough)
		return nil
	}
	if c, ok := x.front.(Capturer); ok && resp.StatusCode/100 == 2 {
		c.Capture(x, resp)
		return nil
	}
	// The body is read first (up to MaxReceiptBodyBytes, what a receipt keeps) when it may class
	// the answer (bodyoutcome.go) or is to be stored; the client gets the whole body either way.
	var kept []byte
	var readErr error
	limit := g.opts.MaxReceiptBodyBytes
	readBody := func() {
		kept, readErr = readSized(io.LimitReader(resp.Body, limit+1), min(resp.ContentLength, limit+1))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(kept), resp.Body), resp.Body}
	}
	if readsBody(resp.StatusCode, x.rt) {
		readBody()
	}
	whole := readErr == nil && int64(len(kept)) <= limit
	class, rule := answerClass(resp.StatusCode, kept, whole, x.rt)
	oc := settled(class, x.rt)
	x.observeUpstream(oc.class.String())
	if rule != "" {
		x.rec.Detail = fmt.Sprintf("upstream answered %d; its body classed it %s by %s", resp.StatusCode, oc.class, rule)
	}
	if oc.op != opCommit {
		if rule == "" {
			x.rec.Detail = fmt.Sprintf("upstream answered %d", resp.StatusCode)
		}
		x.settle(oc.op)
		if readErr != nil {
			return fmt.Errorf("%w: %w", faultBodyBroke, readErr)
		}
		return nil
	}

	// Committed: keep up to MaxReceiptBodyBytes of the body in the receipt.
	if kept == nil && readErr == nil {
		readBody()
		whole = readErr == nil && int64(len(kept)) <= limit
	}
	stored := &record.Response{Status: resp.StatusCode, Header: storedHeader(resp.Header, x.rt.Receipt.ReplayHeaders)}
	if whole {
		stored.Body = kept
		if x.rt.Fingerprint.Format() == canonical.FormatJSONRPC {
			// Read once here, so that no replay reads it again (httpRoute.replay).
			if start, end, err := mcpwire.IDSpan(kept); err == nil {
				stored.IDSpan = [2]int{start, end}
			}
		}
	}
	x.commitReceipt(stored, whole, kept, x.rt.Receipt.RemoteID, x.rt.Receipt.RemoteURL)
	if readErr != nil {
		return fmt.Errorf("%w: %w", faultBodyBroke, readErr)
	}
	return nil
}

func (x *Exchange) observeUpstream(outcome string) {
	x.g.metrics.upstream.WithLabelValues(x.label, outcome).Observe(x.upDur.Seconds())
}

// streamAnswer bounds a pass-through answer of a front end (Exchange.Stream) by its idle
// timeout between reads, and lets the front end's watch see it, and wrap its body, first.
func (x *Exchange) streamAnswer(resp *http.Response) {
	x.idle.Reset(x.streamIdle)
	resp.Body = idleBody{resp.Body, x}
	if x.watch != nil {
		x.watch(resp)
	}
}

// idleBody is a pass-through answer's body: each read restarts the idle timeout (streamAnswer).
type idleBody struct {
	io.ReadCloser
	x *Exchange
}

func (b idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.x.idle.Reset(b.x.streamIdle)
	return n, err
}

// proxyError answers an upstream exchange that failed, settling the record by outcomeOf: if no
// connection to the upstream was obtained, nothing was sent, the key is freed and the client may
// retry; otherwise the upstream may have acted (also when it answered 101 unasked), and the
// outcome is unknown. The client and the receipt get the kind of failure (faultOf); the log line
// gets err.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	x := exchangeFrom(r.Context())
	if x.upDur == 0 {
		x.upDur = time.Since(x.upStart)
	}
	if _, ok := x.TimedOut(); ok { // the exchange was cancelled by its deadline
		err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	var named upstreamFault
	if cut := x.CutOff(); cut != nil && !errors.As(err, &named) { // or by a shutdown, unless a fault of its own says more
		err = fmt.Errorf("%w: %w", cut, err)
	}
	fault := faultOf(err, x.mayHaveSent.Load(), x.rt.Upstream.Timeout)
	retryable := false
	if x.owner == "" || x.settled { // nothing to settle, or settled before the body broke
		x.observeUpstream(outcomePassThrough)
	} else {
		oc := outcomeOf(upstreamResult{status: x.upStatus, sent: x.mayHaveSent.Load()}, x.rt)
		x.observeUpstream(oc.class.String())
		x.rec.Detail = fault.Error()
		x.settle(oc.op)
		retryable = oc.op == opRelease // the key was freed
		if c, ok := x.front.(Capturer); ok {
			x.logger().Warn("upstream exchange failed", "err", err, "may_have_sent", x.mayHaveSent.Load())
			c.Failed(x, w, fault, oc)
			return
		}
	}
	x.logger().Warn("upstream exchange failed", "err", err, "may_have_sent", x.mayHaveSent.Load())
	p := problem.New(fault, x.decision, x.key)
	p.Retryable = retryable
	p.Write(w, 0)
}

// Capturer is a Responder that reads an executed call's 2xx answer itself (MCP tool calls): it
// settles the record from what the answer says, not from its status (Exchange.Commit,
// Exchange.Settle), and answers an upstream exchange that failed in its own protocol.
type Capturer interface {
	// Capture settles x's record from resp, whose body it may replace with what the client gets.
	Capture(x *Exchange, resp *http.Response)
	// Failed answers the client through w after the upstream exchange failed with fault, and
	// the record settled by oc.
	Failed(x *Exchange, w http.ResponseWriter, fault error, oc Outcome)
}

type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *Exchange {
	x, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return x
}

// request is the inbound request carrying x, for the reverse proxy's hooks.
func (x *Exchange) request() *http.Request {
	return x.r.WithContext(context.WithValue(x.r.Context(), exchangeKey{}, x))
}

// storedHeader returns the headers of an upstream response that a replay repeats: those of
// routes.DefaultReplayHeaders and of the route's receipt.replay_headers (an allow-list), less any
// header that routes.NeverReplayed names or the response's Connection header lists.
func storedHeader(h http.Header, extra []string) http.Header {
	out := make(http.Header)
	connection := map[string]bool{}
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			connection[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
		}
	}
	for _, list := range [][]string{routes.DefaultReplayHeaders, extra} {
		for _, name := range list {
			if values, ok := h[name]; ok && !connection[name] && !routes.NeverReplayed(name) {
				out[name] = append([]string(nil), values...)
			}
		}
	}
	return out
}

// closeLinger is how long a connection closed after a failed streamed exchange still reads (and
// drops) the client's body: time for the answer to reach the client before the close, as net/http
// gives it when it closes a connection with unread body (a TCP reset can lose the answer).
const closeLinger = 500 * time.Millisecond

// closeOnFailure wraps the reverse proxy's error handler. When the request's body streams to the
// upstream (keyless and read_only calls) and the exchange fails, the answer says Connection: close
// (RFC 9112 §9.6), and the rest of the body is not read: net/http would otherwise read a body of
// up to 256 KiB to its end before it writes the answer, so a client still sending would never see
// it. The connection is closed once the answer is written.
//
// When the exchange failed because the body fell behind the minimum rate, the error says so,
// rather than what the transport saw of it (often the request's context, cancelled).
func closeOnFailure(h func(http.ResponseWriter, *http.Request, error)) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		x := exchangeFrom(r.Context())
		if x == nil || x.body != nil || r.ContentLength == 0 { // the body was read whole, or there is none
			h(w, r, err)
			return
		}
		body := server.BodyOf(w)
		if body != nil {
			if slow := body.FellBehind(); slow != nil {
				err = slow
			}
		}
		w.Header().Set("Connection", "close")
		h(w, r, err)
		if body != nil { // so that no later read moves the deadline again
			body.Stop(closeLinger)
		} else {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(closeLinger))
		}
	}
}

// upstreamFault is the kind of an upstream exchange that failed: all that a client's problem and a
// receipt's detail say of it. The transport's own error names hosts, addresses and DNS resolvers,
// and quotes the upstream's bytes back; only the log line carries it
// (docs/security.md#error-details). It wraps problem.ErrUpstream: 502 upstream-failed.
type upstreamFault string

const (
	faultUnreachable upstreamFault = "upstream unreachable"
	faultBroken      upstreamFault = "upstream connection broke before its response was complete"
	faultMalformed   upstreamFault = "upstream sent a malformed response"
	faultSwitched    upstreamFault = "upstream switched protocols (101) on a request that asked for no upgrade"
	faultBodyBroke   upstreamFault = "upstream response body broke after the upstream committed (the receipt is stored without it)"
	faultShutdown    upstreamFault = "the gateway shut down before the upstream call finished"
)

func (f upstreamFault) Error() string { return string(f) }
func (f upstreamFault) Unwrap() error { return problem.ErrUpstream }

// faultOf is what a client is told of err, the failure of an upstream exchange whose connection
// was obtained or not (connected): a fault the gateway named itself (an upstreamFault in err's
// chain), a streamed body that fell behind the minimum rate, a streamed body over max_body_bytes
// (problem.ErrBodyTooLarge), a timeout (problem.ErrUpstreamTimeout,
// with the upstream's timeout), or the kind of a transport error.
func faultOf(err error, connected bool, timeout time.Duration) error {
	var (
		named    upstreamFault
		tooLarge *http.MaxBytesError
		slow     *server.SlowBodyError
	)
	switch {
	case errors.As(err, &named):
		return named
	case errors.As(err, &slow): // the client's own body, not the upstream (docs/security.md#deadlines)
		return fmt.Errorf("%w: %w", problem.ErrUpstream, slow)
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: more than %d bytes", problem.ErrBodyTooLarge, tooLarge.Limit)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w after %s", problem.ErrUpstreamTimeout, timeout)
	case !connected:
		return faultUnreachable
	case malformed(err):
		return faultMalformed
	default:
		return faultBroken
	}
}

// malformed reports whether err is net/http's refusal of a response it could not parse (RFC 9112
// §2, §6): a bad status line or header line, conflicting Content-Length, or an unknown transfer
// coding. Go gives these no type but textproto's, so the rest is told by message.
func malformed(err error) bool {
	var perr textproto.ProtocolError
	if errors.As(err, &perr) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"malformed ", "unsupported transfer encoding", "multiple Content-Length", "bad Content-Length"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
