package main

import (
	"sync/atomic"
	"time"

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
