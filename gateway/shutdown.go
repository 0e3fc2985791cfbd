package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemgateway/idemgateway/record"
)

// execution is an upstream call under way, as Abandon needs it: the record's key, owner and
// claimed state.
type execution struct {
	key, owner string
	rec        record.Record // as claimed; encoded only if Abandon needs it
	ttl        time.Duration
}

// Abandon marks every upstream call still under way outcome_unknown, for a shutdown whose grace
// period ran out: a call that is cut off may have reached the upstream, so its key must block
// retries (or be released by route policy when a retry meets it), never be free. A call that
// settles meanwhile wins: the store refuses the later of the two writes (fencing). It returns how
// many records it marked.
func (g *Gateway) Abandon(ctx context.Context) int {
	var (
		mu     sync.Mutex
		marked int
		wg     sync.WaitGroup
	)
	g.inFlight.Range(func(k, _ any) bool {
		e := k.(*execution)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := g.storeContext(ctx)
			defer cancel()
			rec := e.rec
			rec.Detail = "the gateway shut down before the upstream call finished"
			rec.ExpiresAt = time.Now().UTC().Add(e.ttl)
			ok, err := g.store.MarkUnknown(sctx, e.key, e.owner, rec.EncodeSettle(), e.ttl)
			if err != nil {
				g.log.Error("abandoning a call: store failed; its lease will lapse to outcome_unknown", "err", err)
			}
			if ok {
				g.waiters.settled(e.key)
				mu.Lock()
				marked++
				mu.Unlock()
			}
		}()
		return true
	})
	wg.Wait()
	return marked
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
