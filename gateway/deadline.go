package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// deadline bounds a guarded upstream exchange by the upstream's timeout, as a context deadline
// would, except that a front end may hold it (Exchange.HoldDeadline): while the upstream waits on
// the client (an MCP server's elicitation/create, answered by a person), that time does not count
// (docs/contract.md §9 Server-to-client requests). While held it is bounded by the hold's own
// limit instead. When either runs out, expire ends the exchange, and ranOut says which.
type deadline struct {
	cancel context.CancelFunc // ends the upstream exchange's context

	mu       sync.Mutex
	timer    *time.Timer   // fires when the time left runs out; stopped while held
	left     time.Duration // the time left when the hold started
	since    time.Time     // when the timer last started
	holds    int
	holdTmr  *time.Timer // the holds' own limit, while held
	timedOut string      // what ran out; "" while none has
	done     bool
}

// startDeadline starts a deadline of d, which calls cancel when it runs out.
func startDeadline(d time.Duration, cancel context.CancelFunc) *deadline {
	dl := &deadline{cancel: cancel, left: d, since: time.Now()}
	dl.timer = time.AfterFunc(d, func() { dl.expire(fmt.Sprintf("after %s", d)) })
	return dl
}

// expire ends the exchange: what ran out, as ranOut says it.
func (dl *deadline) expire(what string) {
	dl.mu.Lock()
	if dl.timedOut == "" {
		dl.timedOut = what
	}
	dl.mu.Unlock()
	dl.cancel()
}

// hold stops the deadline's clock until the returned release is called (once; later calls do
// nothing), and bounds the hold by limit instead: a client that never answers still ends the
// exchange. Holds nest: the clock runs again when the last is released.
func (dl *deadline) hold(limit time.Duration) (release func()) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.done || dl.timedOut != "" {
		return func() {}
	}
	if dl.holds == 0 && dl.timer.Stop() {
		dl.left -= time.Since(dl.since)
		dl.holdTmr = time.AfterFunc(limit, func() { dl.expire(fmt.Sprintf("after %s waiting on the client", limit)) })
	}
	dl.holds++
	var once sync.Once
	return func() { once.Do(dl.release) }
}

func (dl *deadline) release() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.holds--; dl.holds > 0 || dl.done || dl.timedOut != "" || dl.holdTmr == nil {
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

// ranOut says what ran out ("after 30s", "after 5m0s waiting on the client"); ok is false when
// nothing has.
func (dl *deadline) ranOut() (what string, ok bool) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return dl.timedOut, dl.timedOut != ""
}
