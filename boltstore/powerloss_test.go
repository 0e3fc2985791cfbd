package boltstore_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/crashfs"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/record"
)

// powerLossEnv tells a child process of TestTransitionsSurvivePowerLoss what to do:
// "<data dir>|<round number>|<clock, Unix milliseconds>|<Options.CheckpointEntries>".
const powerLossEnv = "BOLTSTORE_TEST_POWERLOSS"

// Leases and TTL of the records of TestTransitionsSurvivePowerLoss.
const plLong, plShort, plTTL = time.Hour, time.Minute, 24 * time.Hour

// plWant is the state and payload (its claim and settle parts) a record must have; state "" is
// absent.
type plWant struct{ state, claim, settle string }

// plRound is one round of TestTransitionsSurvivePowerLoss: before advances the clock, do runs in
// the child process on the crash filesystem and must be acknowledged, set and unknown are the
// records the round changes and what ListUnknown lists afterwards, after advances the clock
// before the check.
type plRound struct {
	name          string
	before, after time.Duration
	do            func(t *testing.T, s *boltstore.Store)
	set           map[string]plWant
	unknown       []string
}

// acknowledged fails the test unless a transition was acknowledged.
func acknowledged(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	if !ok || err != nil {
		t.Fatalf("%s = %v, %v; want acknowledged", what, ok, err)
	}
}

// plRounds make each kind of transition once the last one before a crash.
var plRounds = []plRound{
	{name: "claim", do: func(t *testing.T, s *boltstore.Store) {
		for _, key := range []string{"a", "b", "c"} {
			claimed, _, _, err := s.Claim(ctx, key, "owner-"+key, []byte("claim-"+key), plLong, plTTL)
			acknowledged(t, "Claim("+key+")", claimed, err)
		}
		claimed, _, _, err := s.Claim(ctx, "d", "owner-d", []byte("claim-d"), plShort, plTTL)
		acknowledged(t, "Claim(d)", claimed, err)
	}, set: map[string]plWant{
		"a": {record.StateInProgress, "claim-a", ""}, "b": {record.StateInProgress, "claim-b", ""},
		"c": {record.StateInProgress, "claim-c", ""}, "d": {record.StateInProgress, "claim-d", ""},
	}},
	{name: "commit", do: func(t *testing.T, s *boltstore.Store) {
		ok, err := s.Commit(ctx, "a", "owner-a", []byte("receipt-a\x00"), plTTL)
		acknowledged(t, "Commit(a)", ok, err)
	}, set: map[string]plWant{"a": {record.StateCommitted, "claim-a", "receipt-a\x00"}}},
	{name: "mark unknown", do: func(t *testing.T, s *boltstore.Store) {
		ok, err := s.MarkUnknown(ctx, "b", "owner-b", []byte("unknown-b"), plTTL)
		acknowledged(t, "MarkUnknown(b)", ok, err)
	}, set: map[string]plWant{"b": {record.StateUnknown, "claim-b", "unknown-b"}}, unknown: []string{"b"}},
	{name: "release", do: func(t *testing.T, s *boltstore.Store) {
		ok, err := s.Release(ctx, "c", "owner-c")
		acknowledged(t, "Release(c)", ok, err)
	}, set: map[string]plWant{"c": {}}, unknown: []string{"b"}},
	{name: "reclaim", do: func(t *testing.T, s *boltstore.Store) {
		ok, err := s.Reclaim(ctx, "b", "owner-b", "owner-b2", []byte("reclaim-b"), plLong, plTTL)
		acknowledged(t, "Reclaim(b)", ok, err)
	}, set: map[string]plWant{"b": {record.StateInProgress, "reclaim-b", ""}}},
	// Checked past the claim's lease and within the renewed one: a lost renewal reads outcome_unknown.
	{name: "renew", before: plShort - 10*time.Second, after: 20 * time.Second, do: func(t *testing.T, s *boltstore.Store) {
		ok, err := s.Renew(ctx, "d", "owner-d", plShort)
		acknowledged(t, "Renew(d)", ok, err)
	}},
	// Get reads a lapsed lease as outcome_unknown whether stored or not; ListUnknown lists it only
	// when the claim that observed the lapse stored it.
	{name: "claim of a lapsed lease", before: plShort, do: func(t *testing.T, s *boltstore.Store) {
		claimed, state, _, err := s.Claim(ctx, "d", "owner-d2", []byte("claim-d2"), plShort, plTTL)
		if claimed || state != record.StateUnknown || err != nil {
			t.Fatalf("Claim(d) after its lease = %v, %q, %v; want outcome_unknown stored", claimed, state, err)
		}
	}, set: map[string]plWant{"d": {record.StateUnknown, "claim-d", ""}}, unknown: []string{"d"}},
	{name: "delete", do: func(t *testing.T, s *boltstore.Store) {
		existed, err := s.Delete(ctx, "a")
		acknowledged(t, "Delete(a)", existed, err)
	}, set: map[string]plWant{"a": {}}, unknown: []string{"d"}},
}

// TestTransitionsSurvivePowerLoss: every transition the store acknowledged is there after a power
// cut, that is after the loss of every write that no fsync covered (kill -9 keeps the page cache,
// so TestCommitSurvivesKill9 cannot see a missing fsync). Each round mounts a crash
// filesystem (internal/crashfs) over one backing directory, runs a child process that opens the
// store on it and makes one kind of transition the last before the crash, kills the child with
// SIGKILL once it reports the transitions acknowledged, crashes the filesystem, and opens the
// backing directory itself, as a host would after the reboot, to check every record so far. A
// write path that returns before its fsync (bbolt's NoSync) fails here: its records, or the whole
// file, are gone. The store runs in a child because a process must not map a file of a FUSE mount
// that it serves itself (a page fault would wait for a server stopped by the garbage collector).
//
// It runs twice: with the default checkpoints, so that every transition is in the write-ahead log
// alone when the power is cut, and with a checkpoint after every batch, which the power cut may
// interrupt at any of its steps.
func TestTransitionsSurvivePowerLoss(t *testing.T) {
	if env := os.Getenv(powerLossEnv); env != "" {
		powerLossChild(t, env)
		return
	}
	t.Parallel()
	for _, every := range plCheckpoints {
		t.Run(every.name, func(t *testing.T) {
			t.Parallel()
			transitionsSurvivePowerLoss(t, every.entries)
		})
	}
}

// plCheckpoints are the Options.CheckpointEntries the power-loss tests run with.
var plCheckpoints = []struct {
	name    string
	entries int
}{{"log only", 0}, {"checkpoint every batch", 1}}

// transitionsSurvivePowerLoss is TestTransitionsSurvivePowerLoss with checkpoints every
// checkpointEntries records.
func transitionsSurvivePowerLoss(t *testing.T, checkpointEntries int) {
	backing := t.TempDir()
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	wants := map[string]plWant{}
	for i, round := range plRounds {
		clk.Advance(round.before)
		fsys := crashfs.MountTest(t, backing)
		runUntilAcknowledged(t, "TestTransitionsSurvivePowerLoss", powerLossEnv, fmt.Sprintf("%s|%d|%d|%d", fsys.Dir, i, clk.Now().UnixMilli(), checkpointEntries))
		st := fsys.Stats()
		if err := fsys.Crash(); err != nil {
			t.Fatal(err)
		}
		if st.Writes == 0 || st.Syncs == 0 {
			t.Fatalf("%s: the store's writes did not go through the crash filesystem: %+v", round.name, st)
		}
		t.Logf("%s: %d writes, %d syncs; at the crash %d files unsynced", round.name, st.Writes, st.Syncs, st.Unsynced)
		for key, w := range round.set {
			wants[key] = w
		}
		clk.Advance(round.after)

		s, err := boltstore.Open(backing, boltstore.Options{Now: clk.Now, SweepInterval: -1})
		if err != nil {
			t.Fatalf("Open after the crash that followed %s: %v", round.name, err)
		}
		for key, w := range wants {
			state, stored, err := s.Get(ctx, key)
			if err != nil || state != w.state || string(stored.Claim) != w.claim || string(stored.Settle) != w.settle {
				t.Errorf("after the crash that followed %s: Get(%s) = %q, %q, %q, %v; want %q, %q, %q", round.name, key, state, stored.Claim, stored.Settle, err, w.state, w.claim, w.settle)
			}
		}
		keys, _, _, err := s.ListUnknown(ctx, "", "", 100)
		if err != nil || !slices.Equal(keys, round.unknown) {
			t.Errorf("after the crash that followed %s: ListUnknown = %q, %v; want %q", round.name, keys, err, round.unknown)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			t.Fatalf("stopped after the crash that followed %s: the later rounds build on these records", round.name)
		}
	}
}

// runUntilAcknowledged runs test in a child process with name=value in its environment, waits
// until it reports its transitions acknowledged, and kills it with SIGKILL if it has not killed
// itself (see acknowledge).
func runUntilAcknowledged(t *testing.T, test, name, value string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), name+"="+value)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var said []string
	for lines := bufio.NewScanner(out); lines.Scan(); {
		if lines.Text() == "acknowledged" {
			return
		}
		said = append(said, lines.Text())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	t.Fatalf("child %s did not acknowledge:\n%s\n%s", value, strings.Join(said, "\n"), stderr.String())
}

// acknowledge says "acknowledged" on stdout, for runUntilAcknowledged, and kills this process with
// SIGKILL at once: whatever the store had not synced when it answered is then lost, not written
// while the parent reads the line.
func acknowledge() {
	fmt.Println("acknowledged")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// powerLossChild opens the store named by env, runs its round, says "acknowledged" on stdout and
// waits to be killed.
func powerLossChild(t *testing.T, env string) {
	parts := strings.Split(env, "|")
	if len(parts) != 4 {
		t.Fatalf("%s=%q: want dir|round|clock|checkpoint entries", powerLossEnv, env)
	}
	i, err1 := strconv.Atoi(parts[1])
	ms, err2 := strconv.ParseInt(parts[2], 10, 64)
	every, err3 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil || err3 != nil || i < 0 || i >= len(plRounds) {
		t.Fatalf("%s=%q: want dir|round|clock|checkpoint entries", powerLossEnv, env)
	}
	now := time.UnixMilli(ms)
	s, err := boltstore.Open(parts[0], boltstore.Options{Now: func() time.Time { return now }, SweepInterval: -1, CheckpointEntries: every})
	if err != nil {
		t.Fatal(err)
	}
	plRounds[i].do(t, s)
	acknowledge() // never Close
}

// concurrentPowerLossEnv tells a child process of TestConcurrentTransitionsSurvivePowerLoss
// "<data dir>|<clock, Unix milliseconds>|<Options.CheckpointEntries>".
const concurrentPowerLossEnv = "BOLTSTORE_TEST_CONCURRENT_POWERLOSS"

// plWorkers is how many goroutines of TestConcurrentTransitionsSurvivePowerLoss make transitions
// at once, each on a key of its own.
const plWorkers = 64

// plWorker returns the key of worker i and the record it leaves: worker i claims its key, then
// commits it (i%4 == 0), marks it unknown (1), releases it (2) or leaves it claimed (3).
func plWorker(i int) (key string, want plWant) {
	key = fmt.Sprintf("w%02d", i)
	switch i % 4 {
	case 0:
		return key, plWant{record.StateCommitted, "claim-" + key, "receipt-" + key}
	case 1:
		return key, plWant{record.StateUnknown, "claim-" + key, "unknown-" + key}
	case 2:
		return key, plWant{}
	}
	return key, plWant{record.StateInProgress, "claim-" + key, ""}
}

// TestConcurrentTransitionsSurvivePowerLoss: transitions made at once by many goroutines, which
// the store commits in shared transactions (group commit), are each on disk when acknowledged. A
// child process on a crash filesystem runs plWorkers goroutines, each claiming a key of its own
// and then settling it (commit, mark unknown, release, or nothing); once every transition is
// acknowledged it reports so and kills itself, the filesystem crashes, and every record, and the
// outcome_unknown index, must be as acknowledged. A batch whose members are answered before its
// fsync loses its records here.
func TestConcurrentTransitionsSurvivePowerLoss(t *testing.T) {
	if env := os.Getenv(concurrentPowerLossEnv); env != "" {
		concurrentPowerLossChild(t, env)
		return
	}
	t.Parallel()
	for _, every := range plCheckpoints {
		t.Run(every.name, func(t *testing.T) {
			t.Parallel()
			concurrentTransitionsSurvivePowerLoss(t, every.entries)
		})
	}
}

// concurrentTransitionsSurvivePowerLoss is TestConcurrentTransitionsSurvivePowerLoss with
// checkpoints every checkpointEntries records.
func concurrentTransitionsSurvivePowerLoss(t *testing.T, checkpointEntries int) {
	backing := t.TempDir()
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	fsys := crashfs.MountTest(t, backing)
	runUntilAcknowledged(t, "TestConcurrentTransitionsSurvivePowerLoss", concurrentPowerLossEnv, fmt.Sprintf("%s|%d|%d", fsys.Dir, clk.Now().UnixMilli(), checkpointEntries))
	st := fsys.Stats()
	if err := fsys.Crash(); err != nil {
		t.Fatal(err)
	}
	transitions := plWorkers + 3*plWorkers/4 // a claim each, and a settle for three in four
	t.Logf("%d transitions: %d writes, %d syncs; at the crash %d files unsynced", transitions, st.Writes, st.Syncs, st.Unsynced)
	if st.Syncs == 0 || (checkpointEntries == 0 && st.Syncs >= transitions) {
		t.Errorf("%d syncs for %d concurrent transitions: want some, and fewer than the transitions", st.Syncs, transitions)
	}

	s, err := boltstore.Open(backing, boltstore.Options{Now: clk.Now, SweepInterval: -1})
	if err != nil {
		t.Fatalf("Open after the crash: %v", err)
	}
	defer s.Close()
	var unknown []string
	for i := range plWorkers {
		key, w := plWorker(i)
		state, stored, err := s.Get(ctx, key)
		if err != nil || state != w.state || string(stored.Claim) != w.claim || string(stored.Settle) != w.settle {
			t.Errorf("after the crash: Get(%s) = %q, %q, %q, %v; want %q, %q, %q", key, state, stored.Claim, stored.Settle, err, w.state, w.claim, w.settle)
		}
		if w.state == record.StateUnknown {
			unknown = append(unknown, key)
		}
	}
	keys, _, _, err := s.ListUnknown(ctx, "", "", 2*plWorkers)
	if err != nil || !slices.Equal(keys, unknown) {
		t.Errorf("after the crash: ListUnknown = %q, %v; want %q", keys, err, unknown)
	}
}

// concurrentPowerLossChild opens the store named by env, runs the workers of
// TestConcurrentTransitionsSurvivePowerLoss together, and acknowledges once all are answered.
func concurrentPowerLossChild(t *testing.T, env string) {
	parts := strings.Split(env, "|")
	if len(parts) != 3 {
		t.Fatalf("%s=%q: want dir|clock|checkpoint entries", concurrentPowerLossEnv, env)
	}
	ms, err1 := strconv.ParseInt(parts[1], 10, 64)
	every, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("%s=%q: want dir|clock|checkpoint entries", concurrentPowerLossEnv, env)
	}
	now := time.UnixMilli(ms)
	s, err := boltstore.Open(parts[0], boltstore.Options{Now: func() time.Time { return now }, SweepInterval: -1, CheckpointEntries: every})
	if err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range plWorkers {
		wg.Go(func() {
			key, w := plWorker(i)
			owner := "owner-" + key
			<-start
			claimed, _, _, err := s.Claim(ctx, key, owner, []byte("claim-"+key), plLong, plTTL)
			if !claimed || err != nil {
				t.Errorf("Claim(%s) = %v, %v; want acknowledged", key, claimed, err)
				return
			}
			var settled bool
			switch w.state {
			case record.StateCommitted:
				settled, err = s.Commit(ctx, key, owner, []byte(w.settle), plTTL)
			case record.StateUnknown:
				settled, err = s.MarkUnknown(ctx, key, owner, []byte(w.settle), plTTL)
			case "":
				settled, err = s.Release(ctx, key, owner)
			default:
				return
			}
			if !settled || err != nil {
				t.Errorf("settling %s to %q = %v, %v; want acknowledged", key, w.state, settled, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	acknowledge() // never Close
}
