package boltstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/record/recordtest"
)

var _ record.Store = (*boltstore.Store)(nil)

// subject opens a store in a directory of its own on a clock the conformance suite moves.
func subject(t *testing.T, opts boltstore.Options) recordtest.Subject {
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	opts.Now = clk.Now
	s := open(t, t.TempDir(), opts)
	return recordtest.Subject{Store: s, Advance: clk.Advance,
		TTL: func(key string) (time.Duration, error) { return boltstore.TTL(s, key) }}
}

func TestConformance(t *testing.T) {
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		return subject(t, boltstore.Options{})
	})
}

// TestConformanceEncrypted: the store that encrypts at rest (record.Encrypted) around this one is
// still a store. It runs here, where the embedded store's clock and TTLs can be reached.
func TestConformanceEncrypted(t *testing.T) {
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		s := subject(t, boltstore.Options{})
		enc, err := record.Encrypted(s.Store, bytes.Repeat([]byte{7}, 32))
		if err != nil {
			t.Fatal(err)
		}
		s.Store = enc
		return s
	})
}

// TestConformanceCompressed: the store that compresses (record.Compressed), around one that
// encrypts, as the idemgateway command stacks them, is still a store. The suite's payloads are a
// few bytes, under what is compressed, so padded grows each part it is given by 8 KiB of JSON
// before the compressing store sees it, and takes them off what it reads back: every part the
// suite writes is stored compressed.
func TestConformanceCompressed(t *testing.T) {
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		s := subject(t, boltstore.Options{})
		enc, err := record.Encrypted(s.Store, bytes.Repeat([]byte{7}, 32))
		if err != nil {
			t.Fatal(err)
		}
		s.Store = padded{record.Compressed(enc, record.DefaultCompressMinBytes)}
		return s
	})
}

// padding is what padded appends to every part: 8 KiB of JSON.
var padding = bytes.Repeat([]byte(`{"pad":1}`), 8<<10/9)

// padded is a Store whose non-empty payload parts are stored with padding after them.
type padded struct{ record.Store }

func pad(p []byte) []byte {
	if len(p) == 0 {
		return p
	}
	return append(bytes.Clone(p), padding...)
}

func unpad(p record.Payload) record.Payload {
	return record.Payload{Claim: bytes.TrimSuffix(p.Claim, padding), Settle: bytes.TrimSuffix(p.Settle, padding)}
}

func (s padded) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload, error) {
	claimed, state, stored, err := s.Store.Claim(ctx, key, owner, pad(payload), lease, ttl)
	return claimed, state, unpad(stored), err
}

func (s padded) Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (bool, error) {
	return s.Store.Reclaim(ctx, key, from, owner, pad(payload), lease, ttl)
}

func (s padded) Commit(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (bool, error) {
	return s.Store.Commit(ctx, key, owner, pad(settle), ttl)
}

func (s padded) MarkUnknown(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (bool, error) {
	return s.Store.MarkUnknown(ctx, key, owner, pad(settle), ttl)
}

func (s padded) Get(ctx context.Context, key string) (string, record.Payload, error) {
	state, stored, err := s.Store.Get(ctx, key)
	return state, unpad(stored), err
}

func (s padded) ListUnknown(ctx context.Context, prefix, cursor string, limit int) ([]string, []record.Payload, string, error) {
	keys, stored, next, err := s.Store.ListUnknown(ctx, prefix, cursor, limit)
	for i := range stored {
		stored[i] = unpad(stored[i])
	}
	return keys, stored, next, err
}

// TestConformanceCheckpointingEveryBatch runs the conformance suite with a checkpoint after every
// batch: each record is read back from the bbolt file as often as from the memtable.
func TestConformanceCheckpointingEveryBatch(t *testing.T) {
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		return subject(t, boltstore.Options{CheckpointEntries: 1})
	})
}

func TestOpenCreatesPrivateDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data", "nested")
	open(t, dir, boltstore.Options{})
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("data directory mode = %v, want 0700", perm)
	}
	info, err = os.Stat(filepath.Join(dir, boltstore.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("database file mode = %v, want 0600", perm)
	}
	for _, name := range boltstore.WALNames {
		info, err = os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("write-ahead log %s mode = %v, want 0600", name, perm)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	otherFormat := t.TempDir()
	db, err := bolt.Open(filepath.Join(otherFormat, boltstore.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("format"), []byte("idemgateway-records-v9"))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	cases := []struct {
		name string
		dir  string
		want error
	}{
		{"empty dir", "", nil},
		{"dir is a file", file, nil},
		{"other format", otherFormat, boltstore.ErrFormat},
	}
	for _, tc := range cases {
		s, err := boltstore.Open(tc.dir, boltstore.Options{})
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Open = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := open(t, dir, boltstore.Options{})
	start := time.Now()
	second, err := boltstore.Open(dir, boltstore.Options{LockTimeout: 100 * time.Millisecond})
	if err == nil {
		second.Close()
		t.Fatal("second Open of the same directory succeeded")
	}
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Errorf("second Open = %v, want ErrLocked", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("second Open took %s, want about the lock timeout", took)
	}
	t.Logf("second Open: %v", err)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, dir, boltstore.Options{}) // the lock is free again
}

// TestClaimRefusesKeyTheFileCannotHold: a key longer than bbolt's bolt.MaxKeySize is refused by
// Claim, alone. Accepted into the write-ahead log, it would make the checkpoint fail (bbolt refuses
// the key), which stops every write, and then every Open, whose recovery applies the log.
func TestClaimRefusesKeyTheFileCannotHold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, boltstore.Options{SweepInterval: -1})
	long := strings.Repeat("k", bolt.MaxKeySize+1)
	if ok, _, _, err := s.Claim(ctx, long, "owner", []byte("claim"), time.Hour, time.Hour); ok || err == nil {
		t.Errorf("Claim of a key of %d bytes = %v, %v; want an error", len(long), ok, err)
	}
	longest := long[:bolt.MaxKeySize]
	if ok, _, _, err := s.Claim(ctx, longest, "owner", []byte("claim"), time.Hour, time.Hour); !ok || err != nil {
		t.Errorf("Claim of a key of %d bytes = %v, %v; want claimed", len(longest), ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := open(t, dir, boltstore.Options{SweepInterval: -1})
	if state, _, err := r.Get(ctx, longest); state != record.StateInProgress || err != nil {
		t.Errorf("after reopening Get of the longest key = %q, %v; want in_progress", state, err)
	}
}

func TestRecordsSurviveCloseAndOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := open(t, dir, boltstore.Options{Now: clk.Now})
	if claimed, _, _, err := s.Claim(ctx, "committed", "owner", []byte("claim"), time.Minute, time.Hour); !claimed || err != nil {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	if ok, err := s.Commit(ctx, "committed", "owner", []byte("receipt\x00"), time.Hour); !ok || err != nil {
		t.Fatalf("Commit = %v, %v", ok, err)
	}
	if claimed, _, _, err := s.Claim(ctx, "in-flight", "owner", []byte("claim"), time.Minute, time.Hour); !claimed || err != nil {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping after Close: no error")
	}
	if _, _, err := s.Get(ctx, "committed"); err == nil {
		t.Error("Get after Close: no error")
	}

	s = open(t, dir, boltstore.Options{Now: clk.Now})
	for key, want := range map[string]struct{ state, claim, settle string }{
		"committed": {record.StateCommitted, "claim", "receipt\x00"},
		"in-flight": {record.StateInProgress, "claim", ""},
	} {
		state, stored, err := s.Get(ctx, key)
		if err != nil || state != want.state || string(stored.Claim) != want.claim || string(stored.Settle) != want.settle {
			t.Errorf("Get(%s) after reopen = %q, %q, %q, %v; want %q, %q, %q", key, state, stored.Claim, stored.Settle, err, want.state, want.claim, want.settle)
		}
	}
	// Leases and expiry are kept too.
	clk.Advance(2 * time.Minute)
	if _, state, _, _ := s.Claim(ctx, "in-flight", "other", nil, time.Minute, time.Hour); state != record.StateUnknown {
		t.Errorf("Claim after the lease = %q, want %q", state, record.StateUnknown)
	}
	clk.Advance(time.Hour)
	if state, _, _ := s.Get(ctx, "committed"); state != "" {
		t.Errorf("Get after the TTL = %q, want absent", state)
	}
}

func TestExpiredRecordsAreAbsentAndSwept(t *testing.T) {
	t.Parallel()
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := open(t, t.TempDir(), boltstore.Options{Now: clk.Now, SweepInterval: 10 * time.Millisecond})
	for i := range 5 {
		ttl := time.Minute
		if i%2 == 0 {
			ttl = time.Hour
		}
		if claimed, _, _, err := s.Claim(ctx, fmt.Sprint("k", i), "owner", nil, time.Second, ttl); !claimed || err != nil {
			t.Fatalf("Claim = %v, %v", claimed, err)
		}
	}
	clk.Advance(time.Minute) // exactly the TTL: expired
	if state, _, err := s.Get(ctx, "k1"); state != "" || err != nil {
		t.Errorf("Get(expired) = %q, %v; want absent", state, err)
	}
	if existed, err := s.Delete(ctx, "k3"); existed || err != nil {
		t.Errorf("Delete(expired) = %v, %v; want false", existed, err)
	}
	eventually.True(t, "the 3 live records alone stored, after a sweep", func() bool {
		n, err := boltstore.RawCount(s)
		if err != nil {
			t.Fatal(err)
		}
		return n == 3
	})
	for _, key := range []string{"k0", "k2", "k4"} { // live, but their 1 s leases lapsed a minute ago
		if state, _, err := s.Get(ctx, key); state != record.StateUnknown || err != nil {
			t.Errorf("Get(%s) = %q, %v; want outcome_unknown", key, state, err)
		}
	}
}

// TestSweepKeepsARecordClaimedAfterItsScan: the sweeper finds expired records in a read
// transaction and deletes them in a later write transaction; a key claimed afresh in between (a
// Claim sees its expired record as absent) must keep its new in_progress record. The window is
// held open by the afterScan seam, so the interleaving does not depend on scheduling.
func TestSweepKeepsARecordClaimedAfterItsScan(t *testing.T) {
	t.Parallel()
	clk := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := open(t, t.TempDir(), boltstore.Options{Now: clk.Now, SweepInterval: -1})
	for _, key := range []string{"reclaimed", "stale"} {
		if claimed, _, _, err := s.Claim(ctx, key, "old", []byte("old"), time.Second, time.Minute); !claimed || err != nil {
			t.Fatalf("Claim(%s) = %v, %v", key, claimed, err)
		}
	}
	if err := boltstore.Flush(s); err != nil { // the sweeper scans the bbolt file
		t.Fatal(err)
	}
	clk.Advance(time.Minute) // both expired
	scans := 0
	boltstore.SetAfterScan(s, func() {
		scans++
		if claimed, _, _, err := s.Claim(ctx, "reclaimed", "new", []byte("fresh"), time.Minute, time.Hour); !claimed || err != nil {
			t.Errorf("Claim(reclaimed) after the scan = %v, %v; want a fresh claim", claimed, err)
		}
	})
	removed, err := boltstore.Sweep(s)
	if err != nil || removed != 1 || scans != 1 {
		t.Fatalf("Sweep = %d, %v after %d scans; want 1 removed (stale) after 1 scan", removed, err, scans)
	}
	if state, stored, err := s.Get(ctx, "reclaimed"); state != record.StateInProgress || string(stored.Claim) != "fresh" || err != nil {
		t.Errorf("Get(reclaimed) = %q, %q, %v; want the fresh in_progress record", state, stored.Claim, err)
	}
	if n, err := boltstore.RawCount(s); n != 1 || err != nil {
		t.Errorf("RawCount = %d, %v; want 1 (the fresh record; stale swept)", n, err)
	}
}

func TestCorruptRecordsAreRefused(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), boltstore.Options{})
	if err := boltstore.PutRaw(s, "k", []byte("not a record")); err != nil {
		t.Fatal(err)
	}
	_, _, _, claimErr := s.Claim(ctx, "k", "owner", []byte("new"), time.Minute, time.Minute)
	_, reclaimErr := s.Reclaim(ctx, "k", "owner", "other", []byte("new"), time.Minute, time.Minute)
	_, renewErr := s.Renew(ctx, "k", "owner", time.Minute)
	_, commitErr := s.Commit(ctx, "k", "owner", []byte("new"), time.Minute)
	_, unknownErr := s.MarkUnknown(ctx, "k", "owner", []byte("new"), time.Minute)
	_, releaseErr := s.Release(ctx, "k", "owner")
	_, _, getErr := s.Get(ctx, "k")
	for op, err := range map[string]error{"Claim": claimErr, "Reclaim": reclaimErr, "Renew": renewErr,
		"Commit": commitErr, "MarkUnknown": unknownErr, "Release": releaseErr, "Get": getErr} {
		if !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s = %v, want record.ErrCorrupt", op, err)
		}
	}
	if existed, err := s.Delete(ctx, "k"); !existed || err != nil {
		t.Errorf("Delete = %v, %v; want true", existed, err)
	}
	if claimed, _, _, err := s.Claim(ctx, "k", "owner", nil, time.Minute, time.Minute); !claimed || err != nil {
		t.Errorf("Claim after Delete = %v, %v; want claimed", claimed, err)
	}
}

// crashEnv names the data directory of the child process of TestCommitSurvivesKill9.
const crashEnv = "BOLTSTORE_TEST_CRASH_DIR"

// TestCommitSurvivesKill9 runs a child process that commits a record, reports it, and is then
// killed with SIGKILL: the record must be there when the parent opens the file.
func TestCommitSurvivesKill9(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitSurvivesKill9$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "committed\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child said %q, %v", line, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	s := open(t, dir, boltstore.Options{})
	state, stored, err := s.Get(ctx, "k")
	if err != nil || state != record.StateCommitted || string(stored.Settle) != "receipt" {
		t.Errorf("Get after kill -9 = %q, %q, %v; want committed receipt", state, stored.Settle, err)
	}
}

// crashChild commits a record, says so on stdout and waits to be killed.
func crashChild(dir string) {
	s, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, _, _, err := s.Claim(ctx, "k", "owner", []byte("claim"), time.Minute, time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := s.Commit(ctx, "k", "owner", []byte("receipt"), time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("committed")
	select {} // never Close: the parent kills this process
}
