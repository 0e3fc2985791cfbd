package admin

import (
	"net/http"
	"time"
)

// HandlerAt is Handler, with now as the clock that the result of the /readyz store probe is kept
// by, and readyzWaiting, which returns how many /readyz callers wait for the probe under way besides
// the one that runs it (0 when none runs).
func HandlerAt(opts Options, now func() time.Time) (h http.Handler, readyzWaiting func() int) {
	a := newAdmin(opts)
	a.now = now
	return a.handler(opts.Token, opts.Metrics), func() int {
		a.readiness.mu.Lock()
		defer a.readiness.mu.Unlock()
		if run := a.readiness.last; run != nil && run.ended.IsZero() {
			return run.waiting
		}
		return 0
	}
}
