package gateway

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

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

// newStoreSafeGauge is idemgateway_store_safe, read from the store's verdict at each scrape.
func newStoreSafeGauge(g *Gateway) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "idemgateway", Name: "store_safe",
		Help: "1 while the store is fit to keep records; 0 while its safety check finds it unfit (an evicting Redis policy, scripts refused, unreachable: keyed requests get 503) or refusing writes (out of memory: only replays work). The reason is logged at each change and served by /readyz.",
	}, func() float64 {
		if g.storeSafety() != nil {
			return 0
		}
		return 1
	})
}
