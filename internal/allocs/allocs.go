// Package allocs measures how many bytes, or objects, a function allocates, for the tests that
// bound what the gateway's code allocates (canonical's memory bound, the gateway's body and record
// readers, the allocations per call).
//
// The runtime counts allocations for the whole process (runtime.MemStats.TotalAlloc), so what
// other goroutines allocate meanwhile (servers and sweepers of other tests, the race detector's
// own work) is counted too, and only ever adds to a call's count. Bytes therefore runs the
// function several times on one P and keeps the least: the function's own allocation, however
// busy the machine. It measures what the code allocates, not what the runtime happens to hold.
package allocs

import (
	"math"
	"runtime"
)

// Bytes returns the fewest bytes that one call of f allocated over runs calls (at least one),
// made with GOMAXPROCS 1 as testing.AllocsPerRun does, after one call to warm up (first-use
// allocations are not f's).
func Bytes(runs int, f func()) uint64 {
	return least(runs, f, func(m *runtime.MemStats) uint64 { return m.TotalAlloc })
}

// Objects returns the fewest heap objects that one call of f allocated over runs calls, as Bytes
// does: testing.AllocsPerRun's count, but the least of the runs rather than their mean, so that
// another goroutine's allocations do not count.
func Objects(runs int, f func()) uint64 {
	return least(runs, f, func(m *runtime.MemStats) uint64 { return m.Mallocs })
}

// least returns the least growth of the counter of MemStats that one call of f makes over runs
// calls, on one P, after a call to warm up.
func least(runs int, f func(), counter func(*runtime.MemStats) uint64) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	fewest := uint64(math.MaxUint64)
	var before, after runtime.MemStats
	for range max(runs, 1) {
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		fewest = min(fewest, counter(&after)-counter(&before))
	}
	return fewest
}
