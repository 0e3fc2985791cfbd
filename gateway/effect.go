package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// serveEffect is the decision table of contract §4, top to bottom, for idempotent and
// non_idempotent routes.
func (g *Gateway) serveEffect(w http.ResponseWriter, r *http.Request, rt *routes.Route) {
	x := g.newExchange(w, r, rt)
	defer x.logAccess()

	// What operation is this? The key, scoped by tenant and tool: the header, else key.from,
	// else key.derive. The body is read only when the key or the fingerprint needs it.
	key, present, err := readKey(r, rt.Key.Header)
	if err != nil {
		x.reject(err)
		return
	}
	x.key = key // named in the problems from here on
	if n := len(r.Header.Values(rt.TenantHeader)); n > 1 {
		x.reject(fmt.Errorf("%w: %s sent %d times", ErrInvalidRequest, rt.TenantHeader, n))
		return
	}
	derivable := !rt.Key.From.IsZero() || rt.Key.Derive != nil
	if !present && !derivable {
		x.keyless()
		return
	}
	body, err := readBody(w, r, rt.MaxBodyBytes)
	if err != nil {
		x.reject(err)
		return
	}
	x.body = body
	source := keyFromHeader
	if !present {
		key, source, err = deriveKey(rt, r, x.tenant, body)
		switch {
		case err != nil && (rt.Key.Required || errors.Is(err, ErrInvalidKey)):
			x.reject(err)
			return
		case err != nil:
			x.keyless()
			return
		}
	}
	if err := x.setKey(key, source); err != nil {
		x.reject(err)
		return
	}

	// Is this the same request? The effect fingerprint.
	req, err := canonicalRequest(rt, r, body)
	if err == nil {
		var doc []byte
		doc, err = rt.Fingerprint.Document(req)
		x.doc = doc
	}
	if err != nil {
		x.reject(err)
		return
	}
	x.setFingerprint(canonical.Fingerprint(x.doc))
	if err := x.inject(); err != nil {
		x.reject(err)
		return
	}

	// Claim the key, or read what it holds. With concurrency: wait, an in-flight duplicate waits
	// for the record to settle (woken by this process's settle or the store's notice, else by a
	// slow poll), then claims again, until wait_timeout passes.
	waitUntil := time.Now().Add(rt.WaitTimeout)
	var settled <-chan struct{}
	stopWaiting := func() {}
	defer func() { stopWaiting() }()
	for {
		claimed, state, stored, err := x.claim()
		if err != nil {
			x.reject(err)
			return
		}
		if claimed {
			if x.g.churn.observe(x.tenant, rt.Name, x.fp, x.key, time.Now()) {
				x.g.metrics.keyChurn.WithLabelValues(rt.Name).Inc()
				x.logger().Warn("the same effect executed under another key within a minute: the client may mint a new key per retry")
			}
			x.execute()
			return
		}
		prev, err := decodeRecord(state, stored)
		if err != nil {
			x.reject(err)
			return
		}
		switch {
		case prev.EffectFingerprint != x.fp:
			// A different effect under a known key is a client error, whatever the state (C05, C12).
			x.conflict(prev)
		case state == record.StateCommitted:
			x.replay(prev)
		case state == record.StateInProgress && rt.Concurrency == routes.Wait && time.Now().Before(waitUntil) && r.Context().Err() == nil:
			if settled == nil {
				// Listen first, then read again: a settle between the claim and now is not missed.
				settled, stopWaiting = x.g.waiters.wait(x.skey)
				continue
			}
			poll := time.NewTimer(min(time.Until(waitUntil), x.g.waiters.poll))
			select {
			case <-settled: // woken: listen afresh next time, the record may be claimed again
				stopWaiting()
				settled, stopWaiting = nil, func() {}
			case <-poll.C: // still listening
				x.g.waiters.polled()
			case <-r.Context().Done():
			}
			poll.Stop()
			continue
		case state == record.StateInProgress:
			x.refuse(DecisionInProgress, fmt.Errorf("%w: started %s ago", ErrInProgress, time.Since(prev.StartedAt).Round(time.Millisecond)))
		case state == record.StateUnknown && rt.Reconcile != nil:
			x.reconcile(prev)
		case state == record.StateUnknown && rt.OnUnknownOutcome == routes.Release:
			// The executor died or lost its lease before settling: take the record over.
			if x.reclaim(prev, prev.Executions+1) {
				x.execute()
			} else {
				x.refuse(DecisionInProgress, fmt.Errorf("%w: another request took the key over", ErrInProgress))
			}
		case state == record.StateUnknown:
			why := prev.Detail
			if why == "" {
				why = "the execution's lease lapsed before it settled (its gateway died or lost the store)"
			}
			x.refuse(DecisionOutcomeUnknown, fmt.Errorf("%w: %s; an operator must resolve it, or it expires at %s",
				ErrOutcomeUnknown, why, prev.ExpiresAt.Format(time.RFC3339)))
		default:
			x.reject(fmt.Errorf("%w: unknown state %q", record.ErrCorrupt, state))
		}
		return
	}
}

// waitPoll bounds a waiting duplicate's sleep between two reads of the record: the safety net for a
// settle notice that was lost (another process's settle on a store without notices, a Redis
// reconnection, a lease that lapsed).
const waitPoll = 500 * time.Millisecond

// keyless passes a request without a key through: nothing is stored, and each keyless request is
// its own operation; there is no shared bucket for "no key" (C08). A route that requires a key
// refuses it.
func (x *exchange) keyless() {
	if x.rt.Key.Required {
		x.reject(fmt.Errorf("%w: header %s is required on route %s", ErrMissingKey, x.rt.Key.Header, x.rt.Name))
		return
	}
	if x.body == nil && !x.limitBody() {
		return
	}
	x.decide(DecisionExecute)
	x.proxy()
}

// limitBody holds a body that streams through to the route's max_body_bytes: a declared length
// over it is refused at once (false), a longer stream breaks off with 413 (proxyError).
func (x *exchange) limitBody() bool {
	if err := declaredTooLarge(x.r, x.rt.MaxBodyBytes); err != nil {
		x.reject(err)
		return false
	}
	x.r.Body = http.MaxBytesReader(x.w, x.r.Body, x.rt.MaxBodyBytes)
	return true
}

// canonicalRequest is what the fingerprint reads of r. A query string that does not parse (a bad
// escape, a ';') or a Content-Type sent twice is refused: the gateway and the upstream could read
// such a request differently. Errors wrap ErrInvalidRequest.
func canonicalRequest(rt *routes.Route, r *http.Request, body []byte) (*canonical.Request, error) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %v", ErrInvalidRequest, err)
	}
	if n := len(r.Header.Values("Content-Type")); n > 1 {
		return nil, fmt.Errorf("%w: Content-Type sent %d times", ErrInvalidRequest, n)
	}
	return &canonical.Request{
		Tool:       rt.Name,
		Method:     r.Method,
		PathParams: pathParams(r),
		Query:      query,
		Header:     r.Header,
		Body:       body,
	}, nil
}

// readBody reads the whole request body, up to limit bytes. Errors wrap ErrBodyTooLarge, or
// ErrInvalidBody when the body breaks off.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if err := declaredTooLarge(r, limit); err != nil {
		return nil, err
	}
	// Sized from a declared length up to preallocMax, the buffer is allocated once (io.ReadAll grows
	// it by doubling from 512 bytes); bytes.MinRead spare bytes let ReadFrom see the end without
	// growing it. Past preallocMax it grows as bytes arrive: a declared length alone, with no body
	// behind it, must not hold memory.
	buf := bytes.NewBuffer(make([]byte, 0, min(max(r.ContentLength, 0), preallocMax)+bytes.MinRead))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	body := buf.Bytes()
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	case err != nil:
		return nil, fmt.Errorf("%w: reading it failed: %v", ErrInvalidBody, err)
	}
	return body, nil
}

// preallocMax bounds the buffer readBody allocates from a request's Content-Length before the
// body arrives (64 KiB).
const preallocMax = 64 << 10

// declaredTooLarge refuses a body whose Content-Length is over limit before a byte is read.
func declaredTooLarge(r *http.Request, limit int64) error {
	if r.ContentLength > limit {
		return fmt.Errorf("%w: %d bytes, the route accepts at most %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	return nil
}

// pathParams returns the path parameters chi matched, each decoded exactly once. chi matches the
// escaped path (r.URL.RawPath) when the URL has one, and the decoded path otherwise (Go keeps no
// RawPath when escaping the decoded path gives the original back): so /t/a%2Fb gives "a/b",
// /t/a%252Fb gives "a%2Fb", and /t/%41 and /t/A both give "A".
func pathParams(r *http.Request) map[string]string {
	rc := chi.RouteContext(r.Context())
	if rc == nil || len(rc.URLParams.Keys) == 0 {
		return nil
	}
	params := make(map[string]string, len(rc.URLParams.Keys))
	for i, k := range rc.URLParams.Keys {
		v := rc.URLParams.Values[i]
		if r.URL.RawPath != "" {
			if u, err := url.PathUnescape(v); err == nil { // RawPath is valid escaping: no error
				v = u
			}
		}
		params[k] = v
	}
	return params
}

// claim asks the store for the key with a fresh owner token and an in_progress record.
func (x *exchange) claim() (claimed bool, state string, stored []byte, err error) {
	x.owner = newToken()
	now := x.g.now().UTC() // the clock reconcile.after is measured on
	x.rec = &storedRecord{
		Receipt: record.Receipt{
			IdempotencyKey:    x.key,
			Tenant:            x.tenant,
			Tool:              x.rt.Name,
			CredentialScope:   x.credential,
			EffectFingerprint: x.fp,
			Actor:             x.actor,
			RemoteSystem:      x.rt.Upstream.Name,
			ExpiresAt:         now.Add(x.rt.TTL),
			Executions:        1,
		},
		Owner:     x.owner,
		StartedAt: now,
	}
	if len(x.doc) <= MaxRecordDocumentBytes {
		x.rec.Document = x.doc
	}
	err = x.storeCall("claim", func(ctx context.Context) (err error) {
		claimed, state, stored, err = x.g.store.Claim(ctx, x.skey, x.owner, x.rec.encode(), x.rt.LockLease, x.rt.TTL)
		return err
	})
	switch {
	case errors.Is(err, record.ErrCorrupt): // the record exists but cannot be read: never execute
		return false, "", nil, err
	case err != nil:
		// The store's error may name its address: log it, tell the client only what failed.
		x.logger().Error("claim failed", "err", err)
		return false, "", nil, fmt.Errorf("%w: the claim of the key failed", ErrStoreUnavailable)
	}
	return claimed, state, stored, nil
}

// reclaim takes over prev, a record whose outcome is unknown, for a new execution or a
// reconciliation;
// executions is what the record counts once taken over.
func (x *exchange) reclaim(prev *storedRecord, executions int) bool {
	x.rec.Executions = executions
	err := x.storeCall("reclaim", func(ctx context.Context) error {
		return refused(x.g.store.Reclaim(ctx, x.skey, prev.Owner, x.owner, x.rec.encode(), x.rt.LockLease, x.rt.TTL))
	})
	if err != nil && !errors.Is(err, errRefused) {
		x.logger().Warn("reclaim failed", "err", err)
	}
	return err == nil
}

// execute calls the upstream once, holding the lease, and settles the record from the outcome
// (proxy.go). The call is detached from the client: a client that goes away does not cancel it.
func (x *exchange) execute() {
	x.decide(DecisionExecute)
	e := &execution{key: x.skey, owner: x.owner, rec: *x.rec, ttl: x.rt.TTL} // a copy: x.rec changes as the call settles
	x.g.inFlight.Store(e, struct{}{})
	defer x.g.inFlight.Delete(e)
	x.stopLease = x.keepLease()
	defer x.stopLease()
	x.proxy()
}

// keepLease renews the lease every third of its length until the returned function is called
// (the record is settled, or the execution ends); stop waits for a renewal under way, so none
// races the final write, and calling it again does nothing. A renewal the store refuses means
// another owner holds the key: renewals end, the final write will be refused too, and the span and
// log say so. Renewals run from a timer, not a goroutine of their own: most calls settle before
// the first one is due.
func (x *exchange) keepLease() (stop func()) {
	every := max(x.rt.LockLease/3, time.Millisecond)
	var (
		mu      sync.Mutex // held by a renewal under way, and by stop
		stopped bool
		timer   *time.Timer
	)
	renew := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		ctx, cancel := x.g.storeContext(x.r.Context())
		ok, err := x.g.store.Renew(ctx, x.skey, x.owner, x.rt.LockLease)
		cancel()
		switch {
		case err != nil:
			x.g.metrics.leaseRenewals.WithLabelValues(x.rt.Name, "error").Inc()
			x.logger().Warn("lease renewal failed", "err", err)
		case !ok:
			x.g.metrics.leaseRenewals.WithLabelValues(x.rt.Name, "lost").Inc()
			x.logger().Error("lease lost: another owner holds the key")
			x.span.AddEvent("lease.lost")
			return
		default:
			x.g.metrics.leaseRenewals.WithLabelValues(x.rt.Name, "ok").Inc()
		}
		timer.Reset(every)
	}
	mu.Lock() // a renewal due at once waits until timer is set
	timer = time.AfterFunc(every, renew)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// replay answers with the stored response, without calling the upstream.
func (x *exchange) replay(prev *storedRecord) {
	x.decide(DecisionReplay)
	x.setRemoteID(prev.RemoteID)
	h := x.w.Header()
	status := prev.ResponseStatus
	var body []byte
	if resp := prev.Response; resp != nil {
		for name, values := range resp.Header {
			h[name] = values
		}
		status, body = resp.Status, resp.Body
	}
	h.Set("Idempotent-Replayed", "true")
	if !prev.ResponseBodyKept {
		h.Del("Content-Type")
		h.Set("Idempotency-Replay-Body", "omitted")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	x.w.WriteHeader(status)
	_, _ = x.w.Write(body)
}

// conflict answers 422: the key is known with a different effect fingerprint.
func (x *exchange) conflict(prev *storedRecord) {
	x.decide(DecisionConflict)
	p := newProblem(fmt.Errorf("%w: key %q was first used for a request with fingerprint %s", ErrConflict, x.key, prev.EffectFingerprint),
		DecisionConflict, x.key)
	p.Reason = "idempotency_key_reused_with_different_effect"
	p.ExistingFingerprint = prev.EffectFingerprint
	p.ReceivedFingerprint = x.fp
	p.ExistingRemoteID = prev.RemoteID
	if prev.Document != nil && x.doc != nil {
		p.DifferingFields = canonical.DifferingFields(prev.Document, x.doc, maxDifferingFields)
	}
	p.write(x.w, 0)
}

// refuse answers a 409 with the decision in the header (in_progress, outcome_unknown).
func (x *exchange) refuse(decision string, err error) {
	x.refuseFor(decision, err, time.Second)
}

// refuseFor is refuse with a Retry-After of wait, rounded up to whole seconds (on retryable
// problems only).
func (x *exchange) refuseFor(decision string, err error, wait time.Duration) {
	x.decide(decision)
	newProblem(err, decision, x.key).write(x.w, int((wait+time.Second-1)/time.Second))
}

// reject answers a request that cannot be decided on (bad key, bad body, store down): no
// Idempotency-Decision header, decision "rejected" in the problem and the span.
func (x *exchange) reject(err error) {
	x.decision = DecisionRejected
	if x.traced {
		x.span.SetAttributes(attrDecision.String(DecisionRejected))
	}
	x.g.metrics.decisions.WithLabelValues(x.rt.Name, DecisionRejected).Inc()
	x.w.Header().Del("Idempotency-Decision")
	retryAfter := 0
	switch {
	case errors.Is(err, ErrStoreUnavailable):
		retryAfter = 1
	case errors.Is(err, record.ErrCorrupt):
		x.logger().Error("the key's record is unreadable: its retries are refused until it expires or an operator deletes it", "err", err)
	}
	newProblem(err, DecisionRejected, x.key).write(x.w, retryAfter)
}

// storeContext bounds one store call. It is detached from the client, so a record is settled even
// when the client has gone.
func (g *Gateway) storeContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), g.opts.StoreTimeout)
}

// errRefused marks a write the store refused to a stale owner (fencing), in storeCall.
var errRefused = errors.New("refused: the record is gone or owned by another execution")

// refused turns a store write's (ok, err) into one error: err, errRefused, or nil.
func refused(ok bool, err error) error {
	if err == nil && !ok {
		return errRefused
	}
	return err
}

// storeCall runs one store call on the request path: bounded by StoreTimeout, detached from the
// client, timed into the access log and idemgateway_store_duration_seconds{op,result}.
func (x *exchange) storeCall(op string, call func(ctx context.Context) error) error {
	ctx, cancel := x.g.storeContext(x.r.Context())
	defer cancel()
	var span trace.Span
	if x.g.tracer != nil {
		ctx, span = x.g.tracer.Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient))
		defer span.End()
	}
	start := time.Now()
	err := call(ctx)
	d := time.Since(start)
	x.storeDur += d
	result := "ok"
	switch {
	case errors.Is(err, errRefused):
		result = "refused"
	case err != nil:
		result = "error"
	}
	if span != nil {
		if result == "error" {
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attribute.String("idemgateway.store.result", result))
	}
	x.g.metrics.store.WithLabelValues(op, result).Observe(d.Seconds())
	return err
}

// newToken returns a random 128-bit owner token, hex encoded.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
