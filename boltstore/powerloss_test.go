package boltstore_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/crashfs"
	"github.com/idemgateway/idemgateway/record"
)

// powerLossEnv tells a child process of TestTransitionsSurvivePowerLoss what to do:
// "<data dir>|<round number>|<clock, Unix milliseconds>".
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
// cut, that is after the loss of every write that no fsync covered (audit W3, F4: kill -9 keeps the
// page cache, so TestCommitSurvivesKill9 cannot see a missing fsync). Each round mounts a crash
// filesystem (internal/crashfs) over one backing directory, runs a child process that opens the
// store on it and makes one kind of transition the last before the crash, kills the child with
// SIGKILL once it reports the transitions acknowledged, crashes the filesystem, and opens the
// backing directory itself, as a host would after the reboot, to check every record so far. A
// write path that returns before its fsync (bbolt's NoSync) fails here: its records, or the whole
// file, are gone. The store runs in a child because a process must not map a file of a FUSE mount
// that it serves itself (a page fault would wait for a server stopped by the garbage collector).
func TestTransitionsSurvivePowerLoss(t *testing.T) {
	if env := os.Getenv(powerLossEnv); env != "" {
		powerLossChild(t, env)
		return
	}
	t.Parallel()
	backing := t.TempDir()
	clk := newClock()
	wants := map[string]plWant{}
	for i, round := range plRounds {
		clk.Advance(round.before)
		fsys := crashfs.MountTest(t, backing)
		runUntilAcknowledged(t, fmt.Sprintf("%s|%d|%d", fsys.Dir, i, clk.Now().UnixMilli()))
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

// runUntilAcknowledged runs a child process of TestTransitionsSurvivePowerLoss with env, waits
// until it reports its transitions acknowledged, and kills it with SIGKILL.
func runUntilAcknowledged(t *testing.T, env string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTransitionsSurvivePowerLoss$")
	cmd.Env = append(os.Environ(), powerLossEnv+"="+env)
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
	t.Fatalf("child %s did not acknowledge:\n%s\n%s", env, strings.Join(said, "\n"), stderr.String())
}

// powerLossChild opens the store named by env, runs its round, says "acknowledged" on stdout and
// waits to be killed.
func powerLossChild(t *testing.T, env string) {
	parts := strings.Split(env, "|")
	if len(parts) != 3 {
		t.Fatalf("%s=%q: want dir|round|clock", powerLossEnv, env)
	}
	i, err1 := strconv.Atoi(parts[1])
	ms, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || i < 0 || i >= len(plRounds) {
		t.Fatalf("%s=%q: want dir|round|clock", powerLossEnv, env)
	}
	now := time.UnixMilli(ms)
	s, err := boltstore.Open(parts[0], boltstore.Options{Now: func() time.Time { return now }, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	plRounds[i].do(t, s)
	fmt.Println("acknowledged")
	select {} // never Close: the parent kills this process
}
