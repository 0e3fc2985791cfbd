package gateway

import (
	"context"
	"sync"
	"time"
)

// deadline bounds a guarded upstream exchange by the upstream's timeout, as a context deadline
// would, except that a front end may hold it (Exchange.HoldDeadline): while the upstream waits on
// the client (an MCP server's elicitation/create, answered by a person), that time does not count
// (docs/contract.md §9 Server-to-client requests). While held it is bounded by the hold's own
// limit instead. When either runs out, expire ends the exchange, and timedOut says so.
type deadline struct {
	expire func() // cancels the upstream exchange's context

	mu       sync.Mutex
	timer    *time.Timer   // fires when the time left runs out; stopped while held
	left     time.Duration // the time left when the hold started
	since    time.Time     // when the timer last started
	holds    int
	holdTmr  *time.Timer // the holds' own limit, while held
	timedOut bool
	done     bool
}

// startDeadline starts a deadline of d, which calls cancel when it runs out.
func startDeadline(d time.Duration, cancel context.CancelFunc) *deadline {
	dl := &deadline{left: d, since: time.Now()}
	dl.expire = func() {
		dl.mu.Lock()
		dl.timedOut = true
		dl.mu.Unlock()
		cancel()
	}
	dl.timer = time.AfterFunc(d, dl.expire)
	return dl
}

// hold stops the deadline's clock until the returned release is called (once; later calls do
// nothing), and bounds the hold by limit instead: a client that never answers still ends the
// exchange. Holds nest: the clock runs again when the last is released.
func (dl *deadline) hold(limit time.Duration) (release func()) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.done || dl.timedOut {
		return func() {}
	}
	if dl.holds == 0 && dl.timer.Stop() {
		dl.left -= time.Since(dl.since)
		dl.holdTmr = time.AfterFunc(limit, dl.expire)
	}
	dl.holds++
	var once sync.Once
	return func() { once.Do(dl.release) }
}

func (dl *deadline) release() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.holds--; dl.holds > 0 || dl.done || dl.timedOut || dl.holdTmr == nil {
		return
	}
	dl.holdTmr.Stop()
	dl.holdTmr = nil
	dl.since = time.Now()
	dl.timer.Reset(max(dl.left, 0))
}

// stop ends the deadline once the exchange has ended.
func (dl *deadline) stop() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.done = true
	dl.timer.Stop()
	if dl.holdTmr != nil {
		dl.holdTmr.Stop()
	}
}

// ranOut reports whether the deadline, or a hold's limit, ran out.
func (dl *deadline) ranOut() bool {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return dl.timedOut
}
