package chaos

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/e2e"
)

// config sizes a run: how many operations are handed out, by how many clients, and how many
// process faults come meanwhile.
type config struct {
	ops           int
	workers       int
	gateways      int
	kills         int // kill -9 of a gateway during upstream calls
	redisRestarts int // Redis stops (SIGTERM and SIGKILL alternately) with executions in flight
}

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

// routeLeases are the lock_lease of each route of testdata/chaos.yaml.tmpl: short, down to
// 300 ms, so that a stalled renewal, a lost reply or a Redis stop tests whether the lease holds.
var routeLeases = map[string]time.Duration{
	toolTicket: 300 * time.Millisecond, toolWait: time.Second, toolSlow: 500 * time.Millisecond,
	toolFK: 1200 * time.Millisecond, toolRec: 700 * time.Millisecond,
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

// Routes of testdata/chaos.yaml.tmpl, by tool.
const (
	toolTicket = "create_ticket"
	toolWait   = "create_ticket_wait"
	toolSlow   = "create_ticket_slow" // upstream timeout 500ms: opTimeout only
	toolFK     = "create_ticket_fk"   // forward_key, so on_unknown_outcome release
	toolRec    = "create_ticket_rec"  // reconcile
)

// routeNames are the routes in the report's order; paths their paths.
var (
	routeNames = []string{toolTicket, toolWait, toolSlow, toolFK, toolRec}
	paths      = map[string]string{toolTicket: e2e.PathTickets, toolWait: e2e.PathWait, toolSlow: "/slow/v1/tickets",
		toolFK: "/fk/v1/tickets", toolRec: "/rec/v1/tickets"}
)
