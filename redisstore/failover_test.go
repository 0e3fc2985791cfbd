package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

// failoverRun is one store writing through the failover client while the primary dies.
type failoverRun struct {
	name  string
	store *redisstore.Store

	mu          sync.Mutex
	acked       []ackedCommit   // the commits that returned ok, in order
	unconfirmed map[string]bool // keys that OnUnreplicated reported

	afterRecover atomic.Int64 // commits that succeeded after the sentinels reported the new primary
	errors       atomic.Int64 // store errors (claims and commits) during the run
	firstAfter   atomic.Int64 // unix nanoseconds of the first commit of a claim begun after the kill
}

// ackedCommit is a commit that returned ok.
type ackedCommit struct {
	key string
	// claimed is when its claim was sent, claimDone when it returned, committed when the commit
	// returned (monotonic clock).
	claimed, claimDone, committed time.Time
}

// count returns how many commits were acknowledged.
func (r *failoverRun) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acked)
}

// TestSentinelFailover runs two stores (without WAIT, and with WAIT 1) through a Sentinel failover
// client against a primary with one replica and three sentinels, kills the primary with SIGKILL
// while the stores claim and commit, and checks that both recover and serve once the sentinels have
// promoted the replica. Redis replicates asynchronously, so commits acknowledged just before the
// kill may be lost, and so may claims (a retry then executes again: a duplicate), which
// docs/guarantees.md says of a store without WAIT. The test counts those losses into its report
// and asserts what the page does promise:
//
//   - both stores recover: they commit on the new primary;
//   - no write the new primary served is lost (a claim sent after the old primary died);
//   - what a failover loses is the last writes the old primary acknowledged, never a write
//     followed by one that survived: Redis replicates its writes in order, so a replica holds a
//     prefix of them (a lost commit X and a surviving record Y whose claim the old primary served
//     and which was sent after X returned is a violation);
//   - a lost commit whose claim survived blocks its retry (the record reads in_progress);
//   - with WAIT, no commit that WAIT confirmed before the kill is lost (the only replica, which
//     acknowledged it, is the one promoted).
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and three sentinels and waits for a failover (about 6 s); skipped with -short")
	}
	t.Parallel()
	primary := redistest.Start(t, redistest.Options{})
	replica := redistest.Start(t, redistest.Options{ReplicaOf: primary.Addr()})
	sentinels := redistest.StartSentinels(t, primary, 3, redistest.SentinelOptions{
		DownAfter: 500 * time.Millisecond, FailoverTimeout: 2 * time.Second})
	runs := []*failoverRun{
		newFailoverRun(t, sentinels, "async", redisstore.Options{}),
		newFailoverRun(t, sentinels, "wait", redisstore.Options{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond}),
	}
	load := startFailoverLoad(runs, 4)
	defer load.end()

	// Some traffic first, then the crash in the middle of it.
	eventually.True(t, "100 commits per store before the kill", func() bool {
		for _, r := range runs {
			if r.count() < 100 {
				return false
			}
		}
		return true
	})
	var m failoverMoments
	m.killedAt = time.Now().UnixNano()
	m.killing = time.Now()
	primary.Kill()
	m.dead = time.Now()
	load.killed.Store(true)

	newPrimary := sentinels.WaitFailover(primary.Addr(), 15*time.Second)
	failedOver := time.Since(time.Unix(0, m.killedAt))
	load.recovered.Store(true)
	if newPrimary != replica.Addr() {
		t.Fatalf("sentinels promoted %s, want the replica %s", newPrimary, replica.Addr())
	}
	eventually.True(t, "50 commits per store on the new primary", func() bool {
		for _, r := range runs {
			if r.afterRecover.Load() < 50 {
				return false
			}
		}
		return true
	})
	load.end()

	t.Logf("primary %s killed; sentinels reported %s as the new primary after %s", primary.Addr(), newPrimary, failedOver.Round(time.Millisecond))
	for _, r := range runs {
		r.audit(t, m)
	}
}

// newFailoverRun opens a store called name with opts through a Sentinel failover client of
// sentinels, its keys under the prefix name, recording the keys OnUnreplicated reports.
func newFailoverRun(t *testing.T, sentinels *redistest.Sentinels, name string, opts redisstore.Options) *failoverRun {
	t.Helper()
	r := &failoverRun{name: name, unconfirmed: map[string]bool{}}
	opts.Prefix = name + ":"
	opts.OnUnreplicated = func(_ context.Context, u redisstore.Unreplicated) {
		r.mu.Lock()
		r.unconfirmed[u.Key] = true
		r.mu.Unlock()
	}
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    sentinels.MasterName(),
		SentinelAddrs: sentinels.Addrs(),
		DialTimeout:   250 * time.Millisecond,
		ReadTimeout:   500 * time.Millisecond,
		WriteTimeout:  500 * time.Millisecond,
	})
	s, err := redisstore.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r.store = s
	return r
}

// failoverLoad is the claims and commits of the runs' workers, from startFailoverLoad to end.
type failoverLoad struct {
	// killed is set once the primary has exited, recovered once the sentinels report the new one.
	killed, recovered atomic.Bool
	stop              chan struct{}
	wg                sync.WaitGroup
}

// startFailoverLoad starts workers goroutines per run, each claiming and committing keys of its
// own until end.
func startFailoverLoad(runs []*failoverRun, workers int) *failoverLoad {
	l := &failoverLoad{stop: make(chan struct{})}
	for _, r := range runs {
		for w := range workers {
			l.wg.Go(func() { r.work(l, w) })
		}
	}
	return l
}

// end stops the workers and waits for them; it may be called again.
func (l *failoverLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// work is worker w of run r: it claims and commits key after key until the load ends, recording
// the commits that return ok.
func (r *failoverRun) work(l *failoverLoad, w int) {
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		key := fmt.Sprintf("w%d/%d", w, i)
		startedAfterKill := l.killed.Load()
		claimedAt := time.Now()
		claimed, _, _, err := r.store.Claim(ctx, key, "owner", []byte("claim"), time.Minute, time.Minute)
		claimDone := time.Now()
		if err == nil && claimed {
			var ok bool
			if ok, err = r.store.Commit(ctx, key, "owner", []byte("receipt"), time.Minute); ok && err == nil {
				r.mu.Lock()
				r.acked = append(r.acked, ackedCommit{key, claimedAt, claimDone, time.Now()})
				r.mu.Unlock()
				if startedAfterKill {
					r.firstAfter.CompareAndSwap(0, time.Now().UnixNano())
				}
				if l.recovered.Load() {
					r.afterRecover.Add(1)
				}
			}
		}
		if err != nil {
			r.errors.Add(1)
			time.Sleep(5 * time.Millisecond) // the load's pace while the store is away, not a wait for an event
		}
	}
}

// failoverMoments are the moments of the kill that the audit judges commits by.
type failoverMoments struct {
	killedAt int64     // unix nanoseconds, as the kill began
	killing  time.Time // commits that returned before it were served by the old primary
	dead     time.Time // claims sent after it are served by the new primary
}

// failoverAudit is what retrying every acknowledged commit of a run found.
type failoverAudit struct {
	lost   []bool // the commit is gone
	exists []bool // the record is there, committed or in_progress
	// nLost commits are lost, lostOld of them acknowledged before the kill, duplicates with the
	// record gone; before were acknowledged before the kill, unconfirmedBefore of them not
	// confirmed by WAIT; newPrimary were claimed on the new primary.
	nLost, lostOld, duplicates, before, unconfirmedBefore, newPrimary int
}

// audit checks what the failover did to r's acknowledged commits, and logs the count of them.
func (r *failoverRun) audit(t *testing.T, m failoverMoments) {
	t.Helper()
	r.mu.Lock()
	acked, unconfirmed := r.acked, r.unconfirmed
	r.mu.Unlock()
	a := r.retryAcked(t, acked, unconfirmed, m)
	checkLossesAreATail(t, r.name, acked, a, m.killing)
	firstAfter := "never"
	if ns := r.firstAfter.Load(); ns != 0 {
		firstAfter = time.Unix(0, ns).Sub(time.Unix(0, m.killedAt)).Round(time.Millisecond).String()
	}
	waitNote := "no WAIT"
	if r.name == "wait" {
		waitNote = fmt.Sprintf("%d of those not confirmed by WAIT", a.unconfirmedBefore)
	}
	t.Logf("%s: %d commits acknowledged, %d of them before the kill (%s), %d claimed on the new primary; "+
		"after the failover %d read committed and %d are lost (%d of those acknowledged before the kill; "+
		"%d with the record gone, so a retry would execute again: a duplicate; %d left in_progress, so a retry is refused); "+
		"%d store errors during the run; the first claim begun after the kill committed %s after it",
		r.name, len(acked), a.before, waitNote, a.newPrimary, len(acked)-a.nLost, a.nLost, a.lostOld, a.duplicates, a.nLost-a.duplicates, r.errors.Load(), firstAfter)
	if r.afterRecover.Load() < 50 {
		t.Errorf("%s: only %d commits after the failover", r.name, r.afterRecover.Load())
	}
}

// retryAcked checks every acknowledged commit as a retry would: Claim with a new owner. A replay
// means the receipt survived; in_progress means the claim survived but not the commit (the retry
// is refused with 409, not executed); claimed means both were lost and the retry would execute
// the upstream call again: a duplicate effect.
func (r *failoverRun) retryAcked(t *testing.T, acked []ackedCommit, unconfirmed map[string]bool, m failoverMoments) failoverAudit {
	t.Helper()
	f := failoverAudit{lost: make([]bool, len(acked)), exists: make([]bool, len(acked))}
	for i, a := range acked {
		old := a.committed.Before(m.killing) // served by the old primary
		if old {
			f.before++
			if unconfirmed[a.key] {
				f.unconfirmedBefore++
			}
		}
		if a.claimed.After(m.dead) {
			f.newPrimary++
		}
		claimed, state, _, err := r.store.Claim(ctx, a.key, "auditor", nil, time.Minute, time.Minute)
		if err != nil {
			t.Fatalf("%s: checking claim %q: %v", r.name, a.key, err)
		}
		f.exists[i] = !claimed
		if state == record.StateCommitted && !claimed {
			continue
		}
		f.lost[i] = true
		f.nLost++
		if old {
			f.lostOld++
		}
		switch {
		case claimed:
			f.duplicates++
		case state != record.StateInProgress:
			t.Errorf("%s: lost commit of %q reads %q, want in_progress (its claim, blocking retries) or no record", r.name, a.key, state)
		}
		if a.claimed.After(m.dead) {
			t.Errorf("%s: commit of %q, claimed after the old primary died (so on the new primary), reads %q after the failover", r.name, a.key, state)
		}
		if old && r.name == "wait" && !unconfirmed[a.key] {
			t.Errorf("%s: commit of %q was confirmed by WAIT before the kill but reads %q after the failover", r.name, a.key, state)
		}
	}
	return f
}

// checkLossesAreATail checks that losses are a tail of the old primary's writes: no write it
// served survived when it was sent after a lost commit had been acknowledged. The earliest lost
// commit bounds them all: a claim sent after it returned and answered before the kill began must
// be gone too.
func checkLossesAreATail(t *testing.T, name string, acked []ackedCommit, f failoverAudit, killing time.Time) {
	t.Helper()
	var firstLost *ackedCommit
	for i := range acked {
		if f.lost[i] && (firstLost == nil || acked[i].committed.Before(firstLost.committed)) {
			firstLost = &acked[i]
		}
	}
	if firstLost == nil {
		return
	}
	for i, a := range acked {
		if f.exists[i] && a.claimDone.Before(killing) && a.claimed.After(firstLost.committed) {
			t.Errorf("%s: commit of %q was lost, but the claim of %q, sent after it was acknowledged and served by the old primary, survived: "+
				"the replica does not hold a prefix of the old primary's writes", name, firstLost.key, a.key)
			break
		}
	}
}
