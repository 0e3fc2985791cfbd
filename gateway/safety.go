package gateway

import (
	"errors"
	"fmt"

	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
)

// storeSafety returns the store's verdict on its own fitness to keep records (record.Safety).
func (g *Gateway) storeSafety() error { return record.Safety(g.store) }

// claimRefused returns the 503 of a keyed request while the store is known to be unfit to keep
// records (docs/stores.md, "Fail closed"): Redis could evict them, refuses the store's scripts, or
// cannot be checked. The claim is not made, so no upstream is called. A store that only refuses
// writes (out of memory) is still asked: a claim that finds a committed record writes nothing and
// replays it, and one that must write fails with 503 too.
func (g *Gateway) claimRefused() error {
	err := g.storeSafety()
	if err == nil || errors.Is(err, record.ErrWritesRefused) {
		return nil
	}
	// The store's error may name its address: the log says it once per change, the client gets
	// what it needs to retry.
	return fmt.Errorf("%w: the store is unfit to keep records now (it could evict them, refuses the gateway's scripts, or cannot be checked); no claim was made", problem.ErrStoreUnavailable)
}
