// Package chaos is the fault-injection suite of idemgateway (docs/guarantees.md#the-chaos-suite-e2echaos).
// TestChaos runs one real redis-server (appendonly yes, appendfsync always) behind
// internal/faultproxy, the sandbox upstream and three gateway processes on loopback that share that
// Redis through the proxy, and 32 to 128 clients that play a queue redelivering jobs, for
// E2E_CHAOS_OPS operations (550 by default, 150 with -short, 10 000 under make chaos): every
// operation (a distinct Idempotency-Key and body) is delivered two to four times, some deliveries
// at once, some later, and each delivery sends it through randomly chosen gateways until it gets a
// final answer (2xx execute or replay, 409 outcome-unknown, or a 422 that must never come),
// retrying 409 in-progress, 503, 502/504 and connection errors, with bounded attempts and time.
//
// Meanwhile it injects, at random moments of a seeded schedule (the seed is logged; rerun with
// E2E_CHAOS_SEED=<seed>): kill -9 of a gateway that has slow upstream calls in flight (by its
// idemgateway_upstream_in_flight metric: asserted), then a restart on a new port that the clients
// route to; Redis stopped (SIGTERM or SIGKILL) while
// executions are between claim and commit, down for up to 1.5 s (longer than every lease), then
// restarted on its AOF; all along, the reply of a claim, commit, renew, release, mark unknown or
// reclaim lost after Redis ran it, by a closed connection and by a stall (about one a second for
// each transition and fault; asserted to have hit the first five both ways); leases of 300 ms to
// 1.2 s, by route (routeLeases); and, per operation, upstream delays beyond the lease (renewals),
// X-Sandbox-Fail-After-Commit drop or 500 (the upstream acts, the gateway cannot know), 503 before
// acting, calls longer than the upstream timeout of create_ticket_slow, and clients that give up
// mid-call. Every request is detached (X-Sandbox-Detach): the sandbox finishes it and counts its
// effect also when the gateway timed out or died meanwhile (docs/cases.md C11). Besides the two
// block routes, a forward_key route (the sandbox de-duplicates by the forwarded key) and a reconcile
// route (the sandbox's lookup finds the effect) run the same faults.
//
// Side effects are counted on the upstream's side, per operation. The sandbox logs one line per
// request with its endpoint, whether it performed the effect, the id it created and the fault it
// applied; every request of operation i carries X-Sandbox-Body-Bytes: i+1, which the sandbox applies
// (a padding member in its 2xx body) and logs as "body_bytes=i+1" in that same line. So each effect
// line names its operation, in the process that performed the effect. The test checks that the
// lines with effect=true add up to the sandbox's own counter, that every one of them names an
// operation of this run, and that every 2xx a client saw echoes its own operation's marker in the
// body ("op"), carries the padding of its own operation, and a remote id that the sandbox logged as
// an effect of that operation.
//
// After the faults stop and the gateways have no upstream call in flight, each operation's record
// is read through the admin API (read-only) and, where there is one, replayed once through the
// proxy, which cannot execute on a key that has a record. It asserts, for every operation:
//   - at most one side effect (the core promise);
//   - no lost receipt: every 2xx of the operation carries the same remote id, which is the id of its
//     one effect and the one the final replay returns; no second execute; a committed record after
//     a 2xx, unless that 2xx said Idempotency-Receipt: pending and its gateway was killed;
//   - a final state: committed with exactly one effect (replayed with that effect's id), blocked as
//     outcome_unknown (zero or one effect), or no record and zero effects (never executed);
//   - no 422 and no answer outside the contract's decision table;
//   - lease renewals when calls outlived the lease, and an upstream call in flight on every killed
//     gateway;
//   - on the forward_key and reconcile routes, that the faults reached them: at least one answer
//     from the upstream's de-duplication, and one reconciliation that found the effect.
//
// The report says why each record left outcome_unknown is (whyUnknown), and logs the story of
// those it cannot explain.
//
// What it does not prove: anything about Redis replication, failover, Sentinel or Cluster (one
// Redis, restarted on its own AOF with appendfsync always; with everysec or without AOF a restart
// can lose claims and receipts); the embedded store; network partitions or clock jumps (everything
// is loopback on one host, and lease deadlines come from the one Redis's clock); routes with
// on_unknown_outcome: release without forward_key (which re-execute unknown outcomes by design);
// gateways paused past their lease; and a kill in the microseconds between the upstream's commit
// and the receipt write, which random kills hit rarely (a kill during the upstream's delay is what
// it mostly exercises: the detached sandbox then acts, and the record is left outcome_unknown).
// Absence of a duplicate in one run is evidence, not proof; the schedule is random across runs.
// docs/guarantees.md says which test covers what is left out here.
//
// The run's parts: config_test.go sizes it; operation_test.go makes the operations and reads
// each answer; run_test.go starts the processes and delivers the operations; faults_test.go and
// lostreply_test.go inject the faults; verify_test.go reads what the run left; report_test.go
// judges it and assert_test.go fails the test for each broken promise.
package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestChaos runs the operations of a seeded schedule through three gateways while it injects the
// faults, then checks every operation against the side effects the sandbox performed (package
// comment).
func TestChaos(t *testing.T) {
	t.Parallel()
	cfg := settings(t)
	seed := seedFromEnv(t)
	t.Logf("chaos seed %d (rerun with E2E_CHAOS_SEED=%d); %d operations, %d workers, %d gateways, short=%v",
		seed, seed, cfg.ops, cfg.workers, cfg.gateways, testing.Short())

	c := newRun(t, cfg, seed)
	setupDone := time.Now()

	ctx, cancel := context.WithCancel(context.Background())
	queue := make(chan *operation)
	var wg sync.WaitGroup
	// Registered after the processes started: it runs before their cleanups stop them.
	t.Cleanup(func() { cancel(); wg.Wait() })
	// The phase lasts while operations are handed out; faults come only during it.
	phase, phaseEnd := context.WithCancel(ctx)
	wg.Go(func() { c.produce(ctx, queue); phaseEnd() })
	for w := range cfg.workers {
		wg.Go(func() { c.work(ctx, w, queue) })
	}
	wg.Go(func() { c.lost.inject(phase, seed, lostReplyPause) })
	c.inject(phase)
	phaseDone := time.Now()
	wg.Wait()
	drained := time.Now()

	c.quiesce()
	c.verify()
	sb := c.sandboxEffects()
	verified := time.Now()

	rep := c.evaluate(sb)
	rep.timings = []string{
		fmt.Sprintf("setup %s", setupDone.Sub(c.start).Round(100*time.Millisecond)),
		fmt.Sprintf("chaos phase %s", phaseDone.Sub(setupDone).Round(100*time.Millisecond)),
		fmt.Sprintf("deliveries drained %s", drained.Sub(phaseDone).Round(100*time.Millisecond)),
		fmt.Sprintf("quiesce+verify %s", verified.Sub(drained).Round(100*time.Millisecond)),
		fmt.Sprintf("total %s", verified.Sub(c.start).Round(100*time.Millisecond)),
	}
	t.Log("\n" + rep.table(c))
	c.assert(rep)
}
