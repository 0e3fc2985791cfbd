package gateway

import (
	"context"
	"errors"
	"sync"

	"github.com/idemgateway/idemgateway/admin"
)

// execution is an upstream call under way: what the operator console shows of it (Activity), and
// the cancellation of its upstream exchange, which a shutdown may cut off (CutOff).
type execution struct {
	call admin.Call

	mu     sync.Mutex
	cancel context.CancelFunc // the upstream exchange's, once it is built; nil before
	cut    bool               // CutOff cut it off
}

// started takes cancel, which ends the call's upstream exchange, and runs it at once when CutOff
// came first.
func (e *execution) started(cancel context.CancelFunc) {
	e.mu.Lock()
	e.cancel = cancel
	cut := e.cut
	e.mu.Unlock()
	if cut {
		cancel()
	}
}

// cutOff ends the call's upstream exchange, or has started end it as soon as it is built.
func (e *execution) cutOff() {
	e.mu.Lock()
	e.cut = true
	cancel := e.cancel
	e.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// wasCut reports whether CutOff cut the call off.
func (e *execution) wasCut() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cut
}

// CutOff ends every upstream call still under way, for a shutdown whose grace period ran out,
// and returns how many. Each then fails as a call broken after it may have reached the upstream,
// whatever the upstream did: its handler settles the record as it settles any such call
// (outcome_unknown, or the key freed where the route releases unknown outcomes, or where no
// connection was made yet: docs/operations.md#shutdown) and answers its client that the gateway
// shut down (faultShutdown), instead of the process closing the client's connection under it. A
// handler that cannot settle (the store failing) leaves its record in_progress, whose lease then
// lapses to outcome_unknown: never a free key. An execution that starts afterwards (a waiting
// duplicate that finds the key freed, a request still claiming) is cut off as it starts: it makes
// no connection, frees its key and answers the same.
func (g *Gateway) CutOff() int {
	g.cutting.Store(true) // before the walk: an execution stored after it sees the flag
	n := 0
	g.inFlight.Range(func(k, _ any) bool {
		k.(*execution).cutOff()
		n++
		return true
	})
	return n
}

// SettlePending tries once more every settle write that the store has failed so far (pending
// receipts, and the releases of claims whose reply was lost), and stops retrying them in the
// background: for a shutdown, once the calls in flight have finished (docs/operations.md). It
// returns how many the store took, and how many it still failed: those records read
// outcome_unknown once their leases lapse (a receipt not stored, never a free key). A write refused
// to a stale owner counts in neither; it is logged.
func (g *Gateway) SettlePending(ctx context.Context) (stored, left int) {
	g.settles.mu.Lock()
	pending := make([]*pendingSettle, 0, len(g.settles.set))
	for p := range g.settles.set {
		pending = append(pending, p)
	}
	g.settles.mu.Unlock()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, p := range pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.ended {
				return
			}
			err := g.storeWrite(ctx, p.op.String(), p.write)
			mu.Lock()
			switch {
			case err == nil:
				stored++
			case !errors.Is(err, errRefused):
				left++
			}
			mu.Unlock()
			p.finish(err, "the gateway shut down")
		}()
	}
	wg.Wait()
	return stored, left
}
