package chaos

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// settings sizes the run by E2E_CHAOS_OPS, the number of operations: by default 550 (about a
// minute under -race on two cores, the run of make test), 150 with -short; make chaos asks for
// 10 000. Runs get 32 clients, longer ones more (up to 128: a client mostly waits, in_progress answers
// included), and one gateway kill and one Redis stop per 110 operations, at most 60 of each.
func settings(t *testing.T) config {
	ops := 550
	if testing.Short() {
		ops = 150
	}
	if s := os.Getenv("E2E_CHAOS_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("E2E_CHAOS_OPS %q: want a number of operations, at least 10", s)
		}
		ops = n
	}
	faults := min(max(ops/110, 2), 60)
	return config{ops: ops, workers: min(max(ops/75, 32), 128), gateways: 3, kills: faults, redisRestarts: faults}
}

// lostReplyPause is how long each injector of lost replies (one per transition and fault)
// waits before it loses the next: about one a second each.
func lostReplyPause(rng *rand.Rand) time.Duration {
	return time.Duration(300+rng.IntN(1200)) * time.Millisecond
}

// Bounds of the run.
const (
	deliveryTimeout = 30 * time.Second // one delivery stops retrying after this
	maxAttempts     = 80               // one delivery stops retrying after this many requests
	batchOps        = 6                // operations whose first deliveries are shuffled together
	slowDelay       = 300 * time.Millisecond
)

// seedFromEnv is E2E_CHAOS_SEED when set, else a fresh one.
func seedFromEnv(t *testing.T) uint64 {
	if s := os.Getenv("E2E_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("E2E_CHAOS_SEED %q: %v", s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}
