package gateway

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// lease keeps an execution's lease on its record (docs/guarantees.md, "Lease timing"). It renews
// the lease every third of lock_lease, counted from the start of the last renewal the store took
// (at first, from the claim), so a slow renewal does not push the next one past the lease.
//
// A renewal runs under a context of half the lease (at most the store timeout): it never holds a
// connection longer, and go-redis discards a connection whose call ran out of time. The lease does
// not wait that long: when a renewal has no answer after a sixth of the lease (hedgeAfter), or
// fails, another is sent after a short pause, while the first may still answer. The second goes
// out on another connection (the first is still busy, or discarded), so a connection that stalls
// costs a sixth of the lease, not the lease, and a store that is merely slow costs renewals sent
// twice: an answer that comes late still counts, since the store extended the lease all the same.
// The gateway stops waiting even on a store that does not honour its context (the embedded store
// in a slow fsync).
//
// A renewal the store refuses means another owner holds the key, or, once the record's final write
// is under way (settling), that the write landed: renewals end, and only the former is reported
// as a lost lease. The renewals run in a goroutine started by a timer when the first one is due:
// most calls settle before that.
type lease struct {
	g          *Gateway
	key, owner string
	tool       string
	length     time.Duration
	every      time.Duration // the cadence of renewals: a third of length
	timeout    time.Duration // the context of one renewal: renewTimeout
	hedgeAfter time.Duration // how long the lease waits for a renewal's answer before sending another
	ctx        context.Context
	logger     func() *slog.Logger
	span       trace.Span

	settling atomic.Bool // the record's final write has started
	done     chan struct{}
	stopOnce sync.Once
	first    *time.Timer
}

// renewTimeout is the context timeout of one renewal of a lease of length: half the lease, at
// most storeTimeout. hedgeAfter is how long the lease waits for its answer before it sends
// another: a sixth of the lease, so that a renewal sent a third of the lease after the last one
// and never answered leaves time for two more before the lease lapses.
func renewTimeout(length, storeTimeout time.Duration) (timeout, hedgeAfter time.Duration) {
	timeout = min(storeTimeout, max(length/2, time.Millisecond))
	return timeout, min(timeout, max(length/6, time.Millisecond))
}

// holdLease starts renewing x's lease, unless it is renewed already (a reconciliation that goes on
// to execute keeps its lease). Its schedule starts at the claim.
func (x *Exchange) holdLease() {
	if x.lease != nil {
		return
	}
	length := x.rt.LockLease
	l := &lease{
		g: x.g, key: x.skey, owner: x.owner, tool: x.label, length: length, every: max(length/3, time.Millisecond),
		ctx: context.WithoutCancel(x.r.Context()), logger: x.logger, span: x.span,
		done: make(chan struct{}),
	}
	l.timeout, l.hedgeAfter = renewTimeout(length, x.g.opts.StoreTimeout)
	l.first = time.AfterFunc(time.Until(x.claimSent.Add(l.every)), func() { l.run(x.claimSent) })
	x.lease = l
}

// dropLease stops x's renewals, unless a settle took them over (settle.go).
func (x *Exchange) dropLease() {
	if x.lease != nil {
		x.lease.stop()
		x.lease = nil
	}
}

// stop ends the renewals; it does not wait for one under way, whose answer is then ignored. It
// may be called more than once.
func (l *lease) stop() {
	l.stopOnce.Do(func() {
		l.first.Stop()
		close(l.done)
	})
}

// renewal is the store's answer to one renewal sent at start.
type renewal struct {
	start time.Time
	ok    bool
	err   error
}

// run renews the lease until stop, or until a renewal is refused. lastOK is the start of the last
// renewal the store took, or of the claim.
func (l *lease) run(lastOK time.Time) {
	answers := make(chan renewal, 1)
	failures := 0                  // renewals in a row that failed or went unanswered
	failing := false               // a failure was logged since the last renewal the store took
	take := func(r renewal) bool { // false: renewals end
		switch {
		case r.err != nil:
			l.g.metrics.leaseRenewals.WithLabelValues(l.tool, "error").Inc()
			level := slog.LevelDebug // a store that is down fails every renewal: log the first
			if !failing {
				level, failing = slog.LevelWarn, true
			}
			l.logger().Log(context.Background(), level, "lease renewal failed", "err", r.err)
		case !r.ok && l.settling.Load():
			return false // the final write landed (or was refused: settle reports it)
		case !r.ok:
			l.g.metrics.leaseRenewals.WithLabelValues(l.tool, "lost").Inc()
			l.logger().Error("lease lost: another owner holds the key")
			l.span.AddEvent("lease.lost")
			return false
		default:
			l.g.metrics.leaseRenewals.WithLabelValues(l.tool, "ok").Inc()
			failing = false
			if r.start.After(lastOK) {
				lastOK = r.start
			}
		}
		return true
	}
	for {
		start := time.Now()
		go l.send(start, answers)
		hedge := time.NewTimer(l.hedgeAfter)
		for waiting := true; waiting; {
			select {
			case <-l.done:
				hedge.Stop()
				return
			case r := <-answers:
				if !take(r) {
					hedge.Stop()
					return
				}
				waiting = !r.start.Equal(start)
			case <-hedge.C:
				waiting = false // no answer yet: the next renewal goes out while this one may answer
			}
		}
		hedge.Stop()
		if lastOK.Equal(start) {
			failures = 0
		} else {
			failures++
		}
		// The next renewal: a third of the lease after the last one the store took or, after a
		// failure, a short pause (doubling up to a third of the lease) while the lease may hold.
		for due := false; !due; {
			next := time.Until(lastOK.Add(l.every))
			if failures > 0 {
				next = l.every >> max(5-failures, 0)
			}
			pause := time.NewTimer(next)
			select {
			case <-l.done:
				pause.Stop()
				return
			case r := <-answers: // a late answer: a renewal taken late moves the schedule
				pause.Stop()
				if !take(r) {
					return
				}
				if !lastOK.Before(start) {
					failures = 0
				}
			case <-pause.C:
				due = true
			}
		}
	}
}

// send sends one renewal under a context of l.timeout and passes its answer on, unless the lease
// has stopped meanwhile.
func (l *lease) send(start time.Time, answers chan<- renewal) {
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	ok, err := l.g.store.Renew(ctx, l.key, l.owner, l.length)
	cancel()
	select {
	case answers <- renewal{start, ok, err}:
	case <-l.done:
	}
}
