package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/idemgateway/idemgateway/gateway"
)

// gcPercentWithLimit is the GOGC the gateway runs with when a memory limit bounds its heap and
// GOGC is not set: its live heap is small (a few MB of records, buffers and connections), so the
// default of 100 collects tens of times a second under load; 400 collects a fifth as often
// (docs/performance.md#garbage-collection).
const gcPercentWithLimit = 400

// memoryLimitRatio is the share of the container's memory limit that becomes GOMEMLIMIT: the
// rest is for what the Go runtime does not count (stacks' slack, the binary, the kernel's
// buffers of the process).
const memoryLimitRatio = 0.9

// setGCPolicy sets the garbage collector's policy of the serving process, logs it and returns the
// memory limit in force (math.MaxInt64: none). GOMEMLIMIT is the container's memory limit (cgroup
// memory.max, or provider's, times memoryLimitRatio) unless GOMEMLIMIT is set, or AUTOMEMLIMIT is
// "off" (github.com/KimMachineGun/automemlimit). Once a memory limit is in force, from either, an
// unset GOGC becomes gcPercentWithLimit: the limit, not GOGC, then bounds the heap, which the
// memory bounds of docs/security.md#resource-limits count on. Without a limit, GOGC is left as it
// is (100 unless set).
func setGCPolicy(log *slog.Logger, provider memlimit.Provider) int64 {
	limit, err := memlimit.Set(memlimit.WithProvider(provider), memlimit.WithRatio(memoryLimitRatio))
	if err != nil {
		log.Warn("GOMEMLIMIT is not set from the memory limit (check AUTOMEMLIMIT)", "err", err)
	}
	gogc := debug.SetGCPercent(-1) // the only reader of the GOGC in force: put it back at once
	debug.SetGCPercent(gogc)
	if limit != math.MaxInt64 && os.Getenv("GOGC") == "" {
		gogc = gcPercentWithLimit
		debug.SetGCPercent(gogc)
	}
	if limit == math.MaxInt64 {
		log.Info("garbage collection", "gogc", gogc, "memory_limit", "none")
		return limit
	}
	log.Info("garbage collection", "gogc", gogc, "memory_limit", limit)
	return limit
}

// minInflightBytes is the least budget of the body parses under way: a gated parse (a body over
// 64 KiB) weighs at least 384 KiB, and the gate lets a parse heavier than the whole budget in
// alone, so a smaller budget would run every large parse alone.
const minInflightBytes = 1 << 20

// inflightBytes is the budget of the body parses under way (gateway.Options.MaxInflightBytes):
// IDEMGATEWAY_MAX_INFLIGHT_BYTES when set, else a quarter of the memory limit in force (the Go
// runtime's, GOMEMLIMIT), between minInflightBytes and gateway.DefaultMaxInflightBytes (the
// latter without a limit). A quarter: the parses' bounds are their worst case, and the rest of the
// limit holds the bodies themselves, the answers kept for receipts and the connections; a budget
// as large as the limit would let parses alone take a pod's whole memory
// (docs/security.md#resource-limits). A budget set above the limit is kept, with a warning.
func inflightBytes(log *slog.Logger, set, limit int64) int64 {
	if set == 0 {
		return min(gateway.DefaultMaxInflightBytes, max(minInflightBytes, limit/4))
	}
	if set > limit {
		log.Warn("IDEMGATEWAY_MAX_INFLIGHT_BYTES is over the memory limit: body parses alone may exhaust it",
			"max_inflight_bytes", set, "memory_limit", limit)
	}
	return set
}
