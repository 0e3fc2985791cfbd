// Package allocs measures how many bytes a function allocates, for the tests that bound what the
// gateway's code allocates (canonical's memory bound, the gateway's body and record readers).
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
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	least := uint64(math.MaxUint64)
	var before, after runtime.MemStats
	for range max(runs, 1) {
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}
