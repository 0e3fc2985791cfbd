package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/routes"
)

// defaultGrace is the shutdown grace used when IDEMGATEWAY_SHUTDOWN_GRACE is 0: the longest upstream
// timeout of every routes file put in force during the process's life, plus 5 s, and at least 5 s.
// It never shrinks: a call started under an older file keeps that file's timeout after a reload
// that lowers it (docs/configuration.md, "Process settings"). Safe for concurrent use; the zero value is 5 s.
type defaultGrace struct {
	longest atomic.Int64 // the longest upstream timeout seen, in nanoseconds
}

// see takes in the upstream timeouts of cfg, a routes file now in force.
func (g *defaultGrace) see(cfg *routes.Config) {
	for _, up := range cfg.Upstreams {
		for {
			old := g.longest.Load()
			if int64(up.Timeout) <= old || g.longest.CompareAndSwap(old, int64(up.Timeout)) {
				break
			}
		}
	}
}

// get returns the grace: the longest upstream timeout seen plus 5 s.
func (g *defaultGrace) get() time.Duration {
	return time.Duration(g.longest.Load()) + 5*time.Second
}

// afterCut is how long a shutdown whose grace ran out waits for the calls it cut off to settle
// their records and answer their clients (one store write each, in the usual case) before the
// process ends.
const afterCut = 5 * time.Second

// drain shuts proxy down (docs/operations.md#shutdown): it stops accepting, and lets the calls in
// flight finish and settle their records for grace. Then it cuts off the upstream calls still
// under way (gateway.CutOff): each ends as a call broken after it may have reached the upstream,
// so its record is left outcome_unknown (or its key freed, as its route says) and its client is
// answered so (502 upstream-failed, or a JSON-RPC error) instead of losing its connection with the
// process; afterCut later the process ends whatever is left. A grace that ran out is said in the
// log at warn, not by an error: the records are as safe as after a drain. drain returns the error
// of a listener that would not close.
func drain(proxy *http.Server, gw *gateway.Gateway, grace time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace+afterCut)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- proxy.Shutdown(ctx) }()
	graceOver := time.NewTimer(grace)
	defer graceOver.Stop()
	var err error
	select {
	case err = <-stopped:
	case <-graceOver.C:
		n := gw.CutOff()
		log.Warn("grace period over: upstream calls still under way are cut off, their outcome unknown", "calls", n)
		err = <-stopped
	}
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("requests still under way after the cut lose their connections; a record they did not settle lapses to outcome_unknown with its lease")
		return nil
	}
	return err
}
