package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
)

// msgSettleRefused is the error line of a settle write the store refused (errRefused): the
// record's owner is no longer this execution. An operator's delete, or the record's expiry,
// looks the same to the store as a lease taken over.
const msgSettleRefused = "record not settled: the store refused it: the record is gone (deleted, or expired) or another execution owns it (lease lost)"

// Settling a record (docs/guarantees.md, "Pending receipts" and "Orphaned claims"). The final write
// of an execution (commit, release or mark unknown) is tried again with backoff while the client
// waits, up to the route's upstream timeout; if the store still fails, the client gets the
// upstream's answer with Idempotency-Receipt: pending, and the write goes on in the background
// until the store takes it, refuses it (fencing) or the record expires, the lease renewed
// meanwhile. A claim whose reply was lost may have landed: its owner releases it the same way,
// in the background, while the client gets 503.

// receiptHeader is the response header that says a response's record is not written yet: the
// gateway keeps writing it in the background (docs/operations.md).
const (
	receiptHeader  = "Idempotency-Receipt"
	receiptPending = "pending"
)

// Defaults of the settle retries: the first pause, and the longest.
const (
	settleRetryMin = 25 * time.Millisecond
	settleRetryMax = 5 * time.Second
	// maxOrphans bounds the orphaned claims released in the background at once: a store that
	// fails every claim for a long time must not gather a retry per request.
	maxOrphans = 10_000
)

// pendingSettle is a settle write that the store has not taken yet.
type pendingSettle struct {
	g                *Gateway
	op               settleOp
	key, owner, tool string
	payload          []byte // the record to write (commit, mark unknown); nil for a release
	ttl              time.Duration
	keepTTL          bool      // the next commit keeps the claim's expiry (exchange.commitKeepsTTL)
	until            time.Time // the record expires then: retrying later is pointless
	lease            *lease    // renewed until the write ends; nil for an orphaned claim
	orphan           bool      // the release of a claim whose reply was lost
	since            time.Time // when it was left to the background (retryInBackground)
	log              logFields // of its request's log lines: logger builds the logger when it logs
	backoff          backoff

	mu    sync.Mutex // held by an attempt
	timer *time.Timer
	ended bool
}

// logger is p's logger, with its request's attributes.
func (p *pendingSettle) logger() *slog.Logger { return p.log.logger(p.g.log) }

// backoff is the pause between two attempts of a settle: it doubles from the gateway's minimum up
// to a quarter of the lease while the lease may still hold (so the write lands soon after the
// store is back), and up to the gateway's maximum after that.
type backoff struct {
	cur, max  time.Duration
	leaseMax  time.Duration
	leaseEnds time.Time
}

func (g *Gateway) newBackoff(lease time.Duration, leaseEnds time.Time) backoff {
	return backoff{cur: g.retryMin, max: g.retryMax, leaseMax: min(max(lease/4, g.retryMin), g.retryMax), leaseEnds: leaseEnds}
}

// wait returns the next pause.
func (b *backoff) wait() time.Duration {
	limit := b.max
	if time.Now().Before(b.leaseEnds) {
		limit = b.leaseMax
	}
	d := min(b.cur, limit)
	b.cur = min(2*b.cur, b.max)
	return d
}

// write sends the settle once.
func (p *pendingSettle) write(ctx context.Context) error {
	switch p.op {
	case opCommit:
		ttl := p.ttl
		if p.keepTTL {
			ttl = 0
		}
		return refused(p.g.store.Commit(ctx, p.key, p.owner, p.payload, ttl))
	case opMarkUnknown:
		return refused(p.g.store.MarkUnknown(ctx, p.key, p.owner, p.payload, p.ttl))
	default:
		return refused(p.g.store.Release(ctx, p.key, p.owner))
	}
}

// commitReceipt stores x's receipt and settles the record as committed: committed now, expiring
// after the route's ttl, with resp the response replays send (its body kept or not), and the
// remote id and url read by the pointers id and url from lookIn, one pass that stops once both are
// read (a body cut off at the receipt limit still names an id that comes early). Every committed
// call, whoever reads its answer (the reverse proxy, a front end's capture, a reconciliation),
// commits through it.
func (x *Exchange) commitReceipt(resp *record.Response, kept bool, lookIn []byte, id, url canonical.Pointer) {
	rec := x.rec
	now := time.Now().UTC()
	rec.ResponseStatus, rec.CommittedAt, rec.ExpiresAt = resp.Status, &now, now.Add(x.rt.TTL)
	rec.Response, rec.ResponseBodyKept = resp, kept
	ids := canonical.LookupPrefixes(lookIn, id, url)
	rec.RemoteID, rec.RemoteURL = ids[0], ids[1]
	x.settle(opCommit)
	x.setRemoteID(rec.RemoteID)
}

// settle writes the execution's final state by op: commit (x.rec holds the receipt), release, or
// mark unknown (x.rec.Detail says why), and wakes the duplicates waiting for the record. The lease
// is renewed until the write ends. A write the store fails is tried again with backoff for up to
// the route's upstream timeout; then the client's answer (which does not change otherwise) says
// Idempotency-Receipt: pending, and the write goes on in the background. Meanwhile the record
// stays in_progress: retries get 409 in_progress, never a free key. A write refused to a stale
// owner (lease lost) is logged, and ends there.
func (x *Exchange) settle(op settleOp) {
	x.settled = true
	ttl := x.rt.TTL
	if op == opMarkUnknown {
		ttl = x.rt.UnknownTTL
		x.rec.ExpiresAt = time.Now().UTC().Add(ttl)
	}
	p := &pendingSettle{
		g: x.g, op: op, key: x.skey, owner: x.owner, tool: x.label, ttl: ttl,
		keepTTL: op == opCommit && x.commitKeepsTTL(),
		until:   x.claimSent.Add(x.claimTTL()), lease: x.lease, log: x.logFields(),
	}
	x.lease = nil // the settle stops it
	if op != opRelease {
		p.payload = x.rec.EncodeSettle() // the claim part holds the document and the rules: not sent again
	}
	p.backoff = x.g.newBackoff(x.rt.LockLease, p.until)
	if p.lease != nil {
		p.lease.settling.Store(true)
	}
	deadline := time.Now().Add(x.rt.Upstream.Timeout)
	var err error
	for {
		err = x.storeCall(op.String(), p.write)
		p.keepTTL = false // sent again, it may land past commitKeepsTTL's bound: it sets ttl from now
		if err == nil || errors.Is(err, errRefused) {
			break
		}
		pause := p.backoff.wait()
		if time.Until(deadline) < pause {
			break
		}
		time.Sleep(pause)
	}
	switch {
	case err == nil:
		if op == opRelease { // the key is free: nothing holds it
			x.w.Header().Del(expiresHeader)
		} else {
			x.sayExpires(x.rec.ExpiresAt)
		}
		p.landed()
		p.end()
	case errors.Is(err, errRefused):
		x.logger().Error(msgSettleRefused, "op", op.String())
		x.span.AddEvent("store.write_refused", trace.WithAttributes(attribute.String("op", op.String())))
		p.end()
	default:
		x.w.Header().Set(receiptHeader, receiptPending)
		x.logger().Error("record not settled: store failed", "op", op.String(), "err", err, "pending", true)
		x.span.AddEvent("store.write_failed", trace.WithAttributes(attribute.String("op", op.String())))
		x.g.retryInBackground(p, p.backoff.wait())
	}
}

// landed is what follows a settle the store took: waiting duplicates are woken, and a record
// marked unknown is counted.
func (p *pendingSettle) landed() {
	p.g.waiters.settled(p.key)
	if p.op == opMarkUnknown {
		p.g.metrics.unknown.WithLabelValues(p.tool).Inc()
	}
}

// releaseOrphan releases x's claim, whose reply was lost (err), in the background: it may have
// landed, and would then block the key until its lease lapsed and it read outcome_unknown. A claim
// that never reached the store (no connection) needs nothing; nor does one of a store that fails
// every claim while maxOrphans are pending already (its claims lapse as before).
func (x *Exchange) releaseOrphan(err error) {
	if opErr := (*net.OpError)(nil); errors.As(err, &opErr) && opErr.Op == "dial" {
		return
	}
	p := &pendingSettle{
		g: x.g, op: opRelease, key: x.skey, owner: x.owner, tool: x.label,
		until: x.claimSent.Add(x.claimTTL()), orphan: true, log: x.logFields(),
		backoff: x.g.newBackoff(x.rt.LockLease, x.claimSent.Add(x.rt.LockLease)),
	}
	if !x.g.retryInBackground(p, 0) {
		x.logger().Warn("a claim whose reply was lost is not released: too many are pending", "pending", maxOrphans)
	}
}

// settles are the settle writes retried in the background.
type settles struct {
	mu      sync.Mutex
	set     map[*pendingSettle]struct{}
	orphans int
}

// retryInBackground keeps trying p after a pause of after, then with p's backoff. It returns
// false, and does nothing, for an orphan when maxOrphans are pending.
func (g *Gateway) retryInBackground(p *pendingSettle, after time.Duration) bool {
	g.settles.mu.Lock()
	if p.orphan && g.settles.orphans >= maxOrphans {
		g.settles.mu.Unlock()
		return false
	}
	if g.settles.set == nil {
		g.settles.set = map[*pendingSettle]struct{}{}
	}
	p.since = time.Now()
	g.settles.set[p] = struct{}{}
	if p.orphan {
		g.settles.orphans++
	}
	g.settles.mu.Unlock()
	g.metrics.pending.WithLabelValues(p.op.String()).Inc()
	p.mu.Lock()
	p.timer = time.AfterFunc(after, p.retry)
	p.mu.Unlock()
	return true
}

// retry is one background attempt.
func (p *pendingSettle) retry() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	err := p.g.storeWrite(context.Background(), p.op.String(), p.write)
	if err != nil && !errors.Is(err, errRefused) && time.Now().Before(p.until) {
		p.logger().Debug("pending settle failed again", "op", p.op.String(), "err", err)
		p.timer.Reset(p.backoff.wait())
		return
	}
	p.finish(err, "the record has expired")
}

// finish logs how a background settle ended (err nil: the store took it; errRefused: a stale
// owner; else the store failed and the gateway gives up, for why) and ends it. p.mu is held.
func (p *pendingSettle) finish(err error, why string) {
	op := p.op.String()
	switch {
	case err == nil && p.orphan:
		p.logger().Info("orphaned claim released: its reply was lost, and retries may execute")
		p.landed()
	case err == nil:
		p.logger().Info("pending settle stored", "op", op)
		p.landed()
	case errors.Is(err, errRefused) && p.orphan:
		p.logger().Debug("orphaned claim: nothing to release (it did not land, or the key has moved on)")
	case errors.Is(err, errRefused):
		p.logger().Error(msgSettleRefused, "op", op)
	case p.orphan:
		p.logger().Error("orphaned claim not released: "+why+"; it reads outcome_unknown once its lease lapsed", "err", err)
	default:
		p.logger().Error("record not settled: "+why+"; it reads outcome_unknown once its lease lapsed", "op", op, "err", err)
	}
	p.end()
}

// end stops p's retries and lease, and forgets it.
func (p *pendingSettle) end() {
	p.ended = true
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.lease != nil {
		p.lease.stop()
	}
	g := p.g
	g.settles.mu.Lock()
	_, pending := g.settles.set[p]
	delete(g.settles.set, p)
	if pending && p.orphan {
		g.settles.orphans--
	}
	g.settles.mu.Unlock()
	if pending {
		g.metrics.pending.WithLabelValues(p.op.String()).Dec()
	}
}

// storeWrite runs one store call off the request path (a background settle), bounded by
// StoreTimeout and counted in idemgateway_store_duration_seconds{op,result}.
func (g *Gateway) storeWrite(parent context.Context, op string, call func(ctx context.Context) error) error {
	ctx, cancel := g.storeContext(parent)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	g.observeStore(op, time.Since(start), err)
	return err
}

// observeStore counts a store call of op that took d and returned err in
// idemgateway_store_duration_seconds{op,result}, and returns the result label: ok, refused (a
// stale owner) or error.
func (g *Gateway) observeStore(op string, d time.Duration, err error) string {
	result := "ok"
	switch {
	case errors.Is(err, errRefused):
		result = "refused"
	case err != nil:
		result = "error"
	}
	g.metrics.store.WithLabelValues(op, result).Observe(d.Seconds())
	return result
}
