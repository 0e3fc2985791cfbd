package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgateway/idemgateway/record"
)

// waitPoll bounds a waiting duplicate's sleep between two reads of the record: the safety net for a
// settle notice that was lost (another process's settle on a store without notices, a Redis
// reconnection, a lease that lapsed).
const waitPoll = 500 * time.Millisecond

// watchTimeout bounds how long the first duplicate that waits for a key waits for the store to
// listen to its settles (a dial and a round trip when the store's notice connection is new, a round
// trip otherwise); past it, the waiter reads the record again anyway, and relies on the poll if
// the notice is lost. Well under waitPoll, which a lost notice costs.
const watchTimeout = 200 * time.Millisecond

// watchWarnEvery is how often at most the waiters of a Gateway warn that the notifier's
// WatchSettled failed.
const watchWarnEvery = time.Minute

// waiters are the duplicates of this process waiting for a record to settle, by store key, and
// the store's watches of those keys.
type waiters struct {
	notifier record.SettleNotifier // nil: woken only by this process's settles (and the poll)
	log      *slog.Logger          // for the warning of a failed watch; set with notifier

	mu     sync.Mutex
	keys   map[string]*keyWaiters
	warned time.Time // when the last warning of a failed watch was logged

	// poll is waitPoll and watchTimeout is watchTimeout; tests lengthen them (export_test.go), so
	// that only a wake-up can end a wait.
	poll, watchTimeout time.Duration

	// idemgateway_wait_wakeups_total{cause}: waiters woken by a settle of this process, by the
	// store's notice of a settle (whichever came first), and waits that ended on the safety poll
	// (duplicateWait.over). Polls where notices should wake say that the notices are not working
	// (metrics.go).
	bySettle, byNotice, byPoll prometheus.Counter
}

// keyWaiters are the waiters of one key, and the store's watch of it.
type keyWaiters struct {
	chans     map[chan struct{}]struct{}
	listening chan struct{} // closed once the notifier's WatchSettled has returned (or at once without a notifier)
	stop      func()        // the watch's stop, nil until WatchSettled returns
	ended     bool          // the key settled, or its last waiter left: the watch is stopped, or stops as WatchSettled returns
}

// wait returns a channel that is closed once key settles, and a function that stops the wait.
// With a notifier, the first waiter of a key starts the store's watch of it, and wait returns once
// the store listens (within watchTimeout), so that a settle after the caller's next read of the
// record wakes it; the watch stops when the key settles or its last waiter leaves.
func (w *waiters) wait(key string) (<-chan struct{}, func()) {
	w.mu.Lock()
	if w.keys == nil {
		w.keys = make(map[string]*keyWaiters)
	}
	k := w.keys[key]
	first := k == nil
	if first {
		k = &keyWaiters{chans: make(map[chan struct{}]struct{}), listening: make(chan struct{})}
		w.keys[key] = k
	}
	ch := make(chan struct{})
	k.chans[ch] = struct{}{}
	w.mu.Unlock()

	if first {
		w.listen(key, k)
	} else {
		<-k.listening // bounded by watchTimeout
	}
	return ch, func() {
		w.mu.Lock()
		var stop func()
		if _, waiting := k.chans[ch]; waiting {
			delete(k.chans, ch)
			if len(k.chans) == 0 {
				stop = w.end(key, k)
			}
		}
		w.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
}

// listen starts the notifier's watch of key for k, and closes k.listening once it has returned.
func (w *waiters) listen(key string, k *keyWaiters) {
	defer close(k.listening)
	if w.notifier == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.watchTimeout)
	defer cancel()
	// An error leaves the waiters to the poll: the watch may still start, and is stopped as usual.
	stop, err := w.notifier.WatchSettled(ctx, key, func() { w.wake(key, k, w.byNotice) })
	if err != nil {
		w.warnWatch(key, err)
	}
	w.mu.Lock()
	ended := k.ended
	if !ended {
		k.stop = stop
	}
	w.mu.Unlock()
	if ended {
		stop()
	}
}

// warnWatch logs that the notifier's watch of key failed with err, unless it did so less than
// watchWarnEvery ago: the waiters then rely on the poll, and the first waiter of each key has
// waited watchTimeout for nothing. Without the warning, the fallback would go unnoticed.
func (w *waiters) warnWatch(key string, err error) {
	now := time.Now()
	w.mu.Lock()
	due := w.warned.IsZero() || now.Sub(w.warned) >= watchWarnEvery
	if due {
		w.warned = now
	}
	w.mu.Unlock()
	if !due {
		return
	}
	w.log.Warn("settle notices not working: waiting duplicates poll the store instead of being woken",
		"poll_every", w.poll.String(), "likely_cause", "the Redis user lacks +subscribe (ACL), or Redis is slow",
		"key", key, "err", err, "warned_at_most_every", watchWarnEvery.String())
}

// end removes k, the waiters of key, and returns the stop of its watch to be called once w.mu is
// released (nil when WatchSettled has not returned yet: listen stops it). w.mu is held.
func (w *waiters) end(key string, k *keyWaiters) (stop func()) {
	if w.keys[key] == k {
		delete(w.keys, key)
	}
	k.ended = true
	stop, k.stop = k.stop, nil
	return stop
}

// settled wakes every waiter of key.
// Settled wakes the requests that wait for the record at the store key key (concurrency: wait):
// the admin API's resolve has settled it (admin.Pipeline).
func (g *Gateway) Settled(key string) { g.waiters.settled(key) }

func (w *waiters) settled(key string) {
	w.wake(key, nil, w.bySettle)
}

// wake wakes the waiters of key, and stops their watch; when only is not nil, only if they are
// still only: a notice of a watch that has ended is not for newer waiters, which have their own.
// It adds the number of waiters it woke to woken.
func (w *waiters) wake(key string, only *keyWaiters, woken prometheus.Counter) {
	w.mu.Lock()
	k := w.keys[key]
	if k == nil || (only != nil && k != only) {
		w.mu.Unlock()
		return
	}
	for ch := range k.chans {
		close(ch)
	}
	woken.Add(float64(len(k.chans)))
	clear(k.chans)
	stop := w.end(key, k)
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// duplicateWait is one duplicate's wait for a record in flight to settle (concurrency: wait), until
// a deadline: wait_timeout from its first claim.
type duplicateWait struct {
	w       *waiters
	key     string
	until   time.Time
	settled <-chan struct{} // nil until the duplicate listens
	stopped func()          // ends the current listening
	polled  bool            // the last await ended on the safety poll, not a wake-up
}

// duplicate starts the wait of a duplicate of the record at key, which may last until until.
func (w *waiters) duplicate(key string, until time.Time) *duplicateWait {
	return &duplicateWait{w: w, key: key, until: until}
}

// left reports whether the duplicate may still wait: the deadline has not passed and the client is
// still there.
func (d *duplicateWait) left(ctx context.Context) bool {
	return time.Now().Before(d.until) && ctx.Err() == nil
}

// await returns once the record may have settled, for the caller to read it again. The first call
// only starts listening and returns at once: listening first and reading again, a settle between the
// caller's read and now is not missed. Later calls block until a settle wakes the duplicate (it then
// listens afresh next time: the record may be claimed again), the safety poll is due, the deadline
// passes or ctx is done.
func (d *duplicateWait) await(ctx context.Context) {
	if d.settled == nil {
		d.settled, d.stopped = d.w.wait(d.key)
		return
	}
	poll := time.NewTimer(min(time.Until(d.until), d.w.poll))
	defer poll.Stop()
	d.polled = false
	select {
	case <-d.settled:
		d.stop()
	case <-poll.C: // still listening
		d.polled = true
	case <-ctx.Done():
	}
}

// over ends the wait with the record no longer in progress: it counts a wait that the safety poll,
// not a wake-up, brought to the read that found it so (idemgateway_wait_wakeups_total{cause="poll"}:
// on a shared Redis, notices that do not arrive).
func (d *duplicateWait) over() {
	if d.polled {
		d.w.byPoll.Inc()
	}
}

// stop ends the duplicate's listening, if any.
func (d *duplicateWait) stop() {
	if d.stopped != nil {
		d.stopped()
	}
	d.settled, d.stopped = nil, nil
}
