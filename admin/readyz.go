package admin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemgateway/idemgateway/problem"
)

// readyEvery is how long the result of a /readyz store probe is served before another probe runs.
const readyEvery = time.Second

// readiness shares the store probe of /readyz (probeStore: a Ping, and a claim and release that
// write to the store): one probe runs at a time, the callers that come while it runs wait for its
// result, and those that come within readyEvery of its end get that result. So the unauthenticated
// endpoint writes to the store at most once a second, however often it is asked
// (docs/operations.md#admin-listener).
type readiness struct {
	mu   sync.Mutex
	last *probeRun // the probe under way, or the last one; nil before the first
}

// probeRun is one store probe.
type probeRun struct {
	done    chan struct{} // closed when the probe has ended; err and ended are then set
	err     error
	ended   time.Time
	waiting int // callers waiting for it besides the one that runs it (tests read it)
}

// ready runs the store probe, or shares one under way or just ended (readiness).
func (a *admin) ready(ctx context.Context) error {
	rd := &a.readiness
	rd.mu.Lock()
	run := rd.last
	switch {
	case run == nil, !run.ended.IsZero() && a.now().Sub(run.ended) >= readyEvery:
		run = &probeRun{done: make(chan struct{})}
		rd.last = run
		rd.mu.Unlock()
		err := a.storeOp(ctx, a.probeStore) // bounded by StoreTimeout, detached from ctx's end
		rd.mu.Lock()
		run.err, run.ended = err, a.now()
		rd.mu.Unlock()
		close(run.done)
		return err
	case run.ended.IsZero():
		run.waiting++
	}
	rd.mu.Unlock()
	select {
	case <-run.done:
		return run.err
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", problem.ErrStoreUnavailable, ctx.Err())
	}
}
