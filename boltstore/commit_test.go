package boltstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/record"
)

// gatherBatch makes the committer of s, the first time it finds a transition queued, wait until n
// are queued: the first batch then has exactly those n members, whatever the scheduling. Later
// batches are not held.
func gatherBatch(t *testing.T, s *boltstore.Store, n int) {
	t.Helper()
	var once sync.Once
	boltstore.SetBeforeBatch(s, func() {
		once.Do(func() {
			if !eventually.Within(eventually.Ceiling, func() bool { return boltstore.Queued(s) >= n }) {
				t.Errorf("%d transitions queued after %s, want %d", boltstore.Queued(s), eventually.Ceiling, n)
			}
		})
	})
}

// concurrently runs each of fns in a goroutine of its own and waits for them all.
func concurrently(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(fn)
	}
	wg.Wait()
}

// TestGroupCommitKeepsResultsApart: transitions queued together share one transaction, and each
// gets its own answer. A member that fails, after writing or by panicking, is answered with its
// error and its writes are rolled back; the others are committed all the same, in one transaction;
// those that ran before it ran again with the clock of their first run.
func TestGroupCommitKeepsResultsApart(t *testing.T) {
	t.Parallel()
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := open(t, t.TempDir(), boltstore.Options{Now: clk.Now, SweepInterval: -1})
	put := func(b *boltstore.Batch, key string) error { b.PutRaw(key, []byte("v-"+key)); return nil }
	errB := errors.New("b failed after its write")
	var nowsA []int64 // the clock of each run of a
	members := map[string]func(b *boltstore.Batch, now int64) error{
		"a": func(b *boltstore.Batch, now int64) error { nowsA = append(nowsA, now); return put(b, "a") },
		"b": func(b *boltstore.Batch, now int64) error {
			clk.Advance(time.Hour) // a rerun with a new clock would see it
			if err := put(b, "b"); err != nil {
				return err
			}
			return errB
		},
		"c": func(b *boltstore.Batch, now int64) error { return boltstore.ErrNoWrite },
		"d": func(b *boltstore.Batch, now int64) error { return put(b, "d") },
		"e": func(b *boltstore.Batch, now int64) error {
			if err := put(b, "e"); err != nil {
				return err
			}
			panic("e panics after its write")
		},
	}
	// Queued in this order, so that a runs before b and the batch is rolled back twice.
	order := []string{"a", "b", "c", "d", "e"}
	answers := make(map[string]error)
	var mu sync.Mutex
	hold := make(chan struct{})
	boltstore.SetBeforeBatch(s, func() { <-hold })
	var wg sync.WaitGroup
	for i, key := range order {
		wg.Go(func() {
			err := boltstore.Transition(s, members[key])
			mu.Lock()
			answers[key] = err
			mu.Unlock()
		})
		// queued before the next is sent, so that the batch keeps this order
		eventually.True(t, "the transition queued", func() bool { return boltstore.Queued(s) >= i+1 })
	}
	commits := boltstore.Commits(s)
	close(hold)
	wg.Wait()

	for key, want := range map[string]error{"a": nil, "b": errB, "c": nil, "d": nil} {
		if !errors.Is(answers[key], want) {
			t.Errorf("%s answered %v, want %v", key, answers[key], want)
		}
	}
	if err := answers["e"]; err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("e answered %v, want its panic as an error", err)
	}
	for key, want := range map[string]string{"a": "v-a", "b": "", "c": "", "d": "v-d", "e": ""} {
		if v, err := boltstore.GetRaw(s, key); string(v) != want || err != nil {
			t.Errorf("after the batch, %s holds %q, %v; want %q", key, v, err, want)
		}
	}
	if n := boltstore.Commits(s) - commits; n != 1 {
		t.Errorf("the batch took %d commits, want 1", n)
	}
	if len(nowsA) != 3 || nowsA[1] != nowsA[0] || nowsA[2] != nowsA[0] {
		t.Errorf("a ran with the clocks %v; want 3 runs (two rollbacks) with one clock", nowsA)
	}
}

// TestConcurrentTransitionsShareACommit: concurrent claims of distinct keys, then their commits,
// are committed in one transaction each, and each caller gets its own answer; two claims of one key
// in the same batch still make one winner, the other reading the winner's record.
func TestConcurrentTransitionsShareACommit(t *testing.T) {
	t.Parallel()
	const n = 16
	s := open(t, t.TempDir(), boltstore.Options{SweepInterval: -1})
	gatherBatch(t, s, n+1)
	commits := boltstore.Commits(s)
	claimed := make([]bool, n+1)
	stored := make([]string, n+1)
	var fns []func()
	for i := range n + 1 {
		key, owner := fmt.Sprint("k", i), fmt.Sprint("owner-", i)
		if i == n {
			key = "k0" // a duplicate of the first
		}
		fns = append(fns, func() {
			ok, state, payload, err := s.Claim(ctx, key, owner, []byte(owner), time.Minute, time.Hour)
			if err != nil || state != record.StateInProgress {
				t.Errorf("Claim(%s) by %s = %v, %q, %v", key, owner, ok, state, err)
			}
			claimed[i], stored[i] = ok, string(payload.Claim)
		})
	}
	concurrently(fns...)
	if d := boltstore.Commits(s) - commits; d != 1 {
		t.Errorf("%d concurrent claims took %d commits, want 1", n+1, d)
	}
	for i := 1; i < n; i++ {
		if !claimed[i] || stored[i] != fmt.Sprint("owner-", i) {
			t.Errorf("Claim(k%d) = %v, %q; want claimed with its own payload", i, claimed[i], stored[i])
		}
	}
	if claimed[0] == claimed[n] || stored[0] != stored[n] {
		t.Errorf("two claims of k0 in one batch: claimed %v and %v, stored %q and %q; want one winner, both reading its record",
			claimed[0], claimed[n], stored[0], stored[n])
	}

	gatherBatch(t, s, n)
	commits = boltstore.Commits(s)
	fns = fns[:0]
	for i := range n {
		key, owner := fmt.Sprint("k", i), fmt.Sprint("owner-", i)
		if i == 0 && !claimed[0] {
			owner = fmt.Sprint("owner-", n)
		}
		fns = append(fns, func() {
			if ok, err := s.Commit(ctx, key, owner, []byte("receipt-"+key), time.Hour); !ok || err != nil {
				t.Errorf("Commit(%s) = %v, %v", key, ok, err)
			}
		})
	}
	concurrently(fns...)
	if d := boltstore.Commits(s) - commits; d != 1 {
		t.Errorf("%d concurrent commits took %d commits, want 1", n, d)
	}
	for i := range n {
		key := fmt.Sprint("k", i)
		if state, payload, err := s.Get(ctx, key); state != record.StateCommitted || string(payload.Settle) != "receipt-"+key || err != nil {
			t.Errorf("Get(%s) = %q, %q, %v; want committed", key, state, payload, err)
		}
	}
}

// TestBatchThatWritesNothingIsNotCommitted: when no member of a batch writes (refused fenced
// writes), the transaction is rolled back: no commit, no fsync.
func TestBatchThatWritesNothingIsNotCommitted(t *testing.T) {
	t.Parallel()
	const n = 8
	s := open(t, t.TempDir(), boltstore.Options{SweepInterval: -1})
	gatherBatch(t, s, n)
	commits := boltstore.Commits(s)
	var fns []func()
	for i := range n {
		fns = append(fns, func() {
			if ok, err := s.Commit(ctx, fmt.Sprint("absent-", i), "owner", []byte("receipt"), time.Hour); ok || err != nil {
				t.Errorf("Commit of an absent record = %v, %v; want refused", ok, err)
			}
		})
	}
	concurrently(fns...)
	if d := boltstore.Commits(s) - commits; d != 0 {
		t.Errorf("a batch that wrote nothing made %d commits, want 0", d)
	}
}

// TestTransitionAfterCloseFails: a write after Close fails at once instead of waiting for a
// committer that has stopped.
func TestTransitionAfterCloseFails(t *testing.T) {
	t.Parallel()
	s, err := boltstore.Open(t.TempDir(), boltstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Claim(ctx, "k", "owner", nil, time.Minute, time.Hour); err == nil {
		t.Error("Claim after Close: no error")
	}
	if _, err := s.Commit(ctx, "k", "owner", nil, time.Hour); err == nil {
		t.Error("Commit after Close: no error")
	}
}
