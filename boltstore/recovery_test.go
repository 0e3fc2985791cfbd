package boltstore_test

import (
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/record"
)

// copyDir copies the regular files of src into a new directory and returns it: what a host holds
// after kill -9 (the page cache survives), taken while the store is idle.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range append([]string{boltstore.FileName}, boltstore.WALNames[:]...) {
		in, err := os.Open(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(filepath.Join(dst, name), os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = io.Copy(out, in)
		}
		_ = in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// logged returns how many records the write-ahead log of s holds past the last checkpoint.
func logged(t *testing.T, s *boltstore.Store) int {
	t.Helper()
	n, err := boltstore.Logged(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fileRecords returns how many records the bbolt file in dir holds, read with bbolt alone, as a
// build without the write-ahead log reads it.
func fileRecords(t *testing.T, dir string) (n int) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, boltstore.FileName), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket([]byte("records")).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenRecoversTheLog: transitions answered before a crash and not yet checkpointed are in the
// write-ahead log alone; Open applies them to the bbolt file, in order, and empties the log.
func TestOpenRecoversTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, boltstore.Options{SweepInterval: -1})
	for _, key := range []string{"a", "b", "c"} {
		if ok, _, _, err := s.Claim(ctx, key, "owner", []byte("claim-"+key), time.Hour, time.Hour); !ok || err != nil {
			t.Fatalf("Claim(%s) = %v, %v", key, ok, err)
		}
	}
	if ok, err := s.Commit(ctx, "a", "owner", []byte("receipt-a"), time.Hour); !ok || err != nil {
		t.Fatalf("Commit(a) = %v, %v", ok, err)
	}
	if ok, err := s.MarkUnknown(ctx, "b", "owner", []byte("unknown-b"), time.Hour); !ok || err != nil {
		t.Fatalf("MarkUnknown(b) = %v, %v", ok, err)
	}
	if ok, err := s.Release(ctx, "c", "owner"); !ok || err != nil {
		t.Fatalf("Release(c) = %v, %v", ok, err)
	}
	if n := boltstore.Checkpoints(s); n != 0 {
		t.Fatalf("%d checkpoints before the crash; want the writes in the log alone", n)
	}
	if n := logged(t, s); n != 6 {
		t.Fatalf("the log holds %d records before the crash; want the 6 batches", n)
	}
	crashed := copyDir(t, dir)

	r := open(t, crashed, boltstore.Options{SweepInterval: -1})
	for key, want := range map[string]struct{ state, settle string }{
		"a": {record.StateCommitted, "receipt-a"}, "b": {record.StateUnknown, "unknown-b"}, "c": {},
	} {
		if state, stored, err := r.Get(ctx, key); state != want.state || string(stored.Settle) != want.settle || err != nil {
			t.Errorf("after recovery Get(%s) = %q, %q, %v; want %q, %q", key, state, stored.Settle, err, want.state, want.settle)
		}
	}
	if keys, _, _, err := r.ListUnknown(ctx, "", "", 10); len(keys) != 1 || keys[0] != "b" || err != nil {
		t.Errorf("after recovery ListUnknown = %q, %v; want [b]", keys, err)
	}
	if n, err := boltstore.RawCount(r); n != 2 || err != nil {
		t.Errorf("after recovery the file holds %d records, %v; want 2 (c released)", n, err)
	}
}

// TestCheckpoint: once CheckpointEntries records were written since the last checkpoint, the
// committer writes them to the bbolt file and empties the log; Close checkpoints what is left.
func TestCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := boltstore.Open(dir, boltstore.Options{SweepInterval: -1, CheckpointEntries: 3})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(key string) {
		t.Helper()
		if ok, _, _, err := s.Claim(ctx, key, "owner", []byte("claim-"+key), time.Hour, time.Hour); !ok || err != nil {
			t.Fatalf("Claim(%s) = %v, %v", key, ok, err)
		}
	}
	claim("a")
	claim("b")
	if n, records := boltstore.Checkpoints(s), logged(t, s); n != 0 || records != 2 {
		t.Fatalf("after 2 records: %d checkpoints, %d in the log; want none, both in the log", n, records)
	}
	claim("c")
	// The committer checkpoints once it has answered the batch: wait for it.
	eventually.True(t, "the checkpoint", func() bool { return boltstore.Checkpoints(s) > 0 })
	if n, records := boltstore.Checkpoints(s), logged(t, s); n != 1 || records != 0 {
		t.Errorf("after 3 records: %d checkpoints, %d in the log; want 1, none", n, records)
	}
	claim("d")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fileRecords(t, dir); n != 4 {
		t.Errorf("after Close the bbolt file holds %d records; want all 4, written by a last checkpoint", n)
	}
	r := open(t, dir, boltstore.Options{SweepInterval: -1})
	for _, key := range []string{"a", "b", "c", "d"} {
		if state, _, err := r.Get(ctx, key); state != record.StateInProgress || err != nil {
			t.Errorf("after reopening Get(%s) = %q, %v; want in_progress", key, state, err)
		}
	}
}

// TestLogWriteErrorStopsWrites: when the log refuses a write, the batch's transitions get the
// error, and so does every later write, while reads go on and Ping fails (the gateway answers 503
// on keyed routes, docs/stores.md); Open recovers what was acknowledged.
func TestLogWriteErrorStopsWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := boltstore.Open(dir, boltstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, _, err := s.Claim(ctx, "a", "owner", []byte("claim-a"), time.Hour, time.Hour); !ok || err != nil {
		t.Fatalf("Claim(a) = %v, %v", ok, err)
	}
	if err := boltstore.BreakLog(s); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Claim(ctx, "b", "owner", []byte("claim-b"), time.Hour, time.Hour); err == nil {
		t.Fatal("Claim(b) on a log that refuses writes: no error")
	}
	if state, _, err := s.Get(ctx, "b"); state != "" || err != nil {
		t.Errorf("Get(b) after its claim failed = %q, %v; want absent: a write is read only once durable", state, err)
	}
	if _, err := s.Commit(ctx, "a", "owner", []byte("receipt-a"), time.Hour); err == nil {
		t.Error("Commit(a) after the log failed: no error")
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping after the log failed: no error")
	}
	if state, _, err := s.Get(ctx, "a"); state != record.StateInProgress || err != nil {
		t.Errorf("Get(a) after the log failed = %q, %v; want in_progress: reads go on", state, err)
	}
	_ = s.Close() // the log's file is closed already

	r := open(t, dir, boltstore.Options{SweepInterval: -1})
	if state, _, err := r.Get(ctx, "a"); state != record.StateInProgress || err != nil {
		t.Errorf("after reopening Get(a) = %q, %v; want in_progress", state, err)
	}
	if state, _, err := r.Get(ctx, "b"); state != "" || err != nil {
		t.Errorf("after reopening Get(b) = %q, %v; want absent (never acknowledged)", state, err)
	}
}

// TestCheckpointUnderWay: while a checkpoint writes the frozen memtable, the committer goes on in
// the log's other segment; readers see the newest write of each key (the active memtable's over
// the frozen one's over the file's), ListUnknown merges the three, and a crash then loses nothing:
// Open applies both segments in order.
func TestCheckpointUnderWay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir, boltstore.Options{SweepInterval: -1, CheckpointEntries: 3})
	must := func(what string, ok bool, err error) {
		t.Helper()
		if !ok || err != nil {
			t.Fatalf("%s = %v, %v", what, ok, err)
		}
	}
	claim := func(key string) {
		t.Helper()
		ok, _, _, err := s.Claim(ctx, key, "owner", []byte("claim-"+key), time.Hour, time.Hour)
		must("Claim("+key+")", ok, err)
	}
	// x: outcome_unknown in the file and its index.
	claim("x")
	ok, err := s.MarkUnknown(ctx, "x", "owner", []byte("unknown-x"), time.Hour)
	must("MarkUnknown(x)", ok, err)
	if err := boltstore.Flush(s); err != nil {
		t.Fatal(err)
	}
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold) }) }) // before Close, which waits for it
	boltstore.SetBeforeCheckpoint(s, func() {
		select {
		case held <- struct{}{}:
		default: // a later checkpoint: nobody waits for it
		}
		<-hold
	})
	claim("a")
	claim("b")
	claim("f") // three records: the checkpoint of a, b and f starts, and waits
	<-held
	claim("c")
	ok, err = s.Commit(ctx, "a", "owner", []byte("receipt-a"), time.Hour)
	must("Commit(a)", ok, err)
	ok, err = s.MarkUnknown(ctx, "b", "owner", []byte("unknown-b"), time.Hour)
	must("MarkUnknown(b)", ok, err)
	existed, err := s.Delete(ctx, "x")
	must("Delete(x)", existed, err)

	want := map[string]struct{ state, settle string }{
		"a": {record.StateCommitted, "receipt-a"}, "b": {record.StateUnknown, "unknown-b"},
		"c": {record.StateInProgress, ""}, "f": {record.StateInProgress, ""}, "x": {},
	}
	check := func(s *boltstore.Store, when string) {
		t.Helper()
		for key, w := range want {
			if state, stored, err := s.Get(ctx, key); state != w.state || string(stored.Settle) != w.settle || err != nil {
				t.Errorf("%s: Get(%s) = %q, %q, %v; want %q, %q", when, key, state, stored.Settle, err, w.state, w.settle)
			}
		}
		keys, _, next, err := s.ListUnknown(ctx, "", "", 1)
		if len(keys) != 1 || keys[0] != "b" || next != "" || err != nil {
			t.Errorf("%s: ListUnknown = %q, next %q, %v; want [b] alone (x deleted)", when, keys, next, err)
		}
	}
	check(s, "during the checkpoint")
	// A crash now: both segments hold batches, the file none of a, b, c, f.
	check(open(t, copyDir(t, dir), boltstore.Options{SweepInterval: -1}), "after a crash during the checkpoint")
	checkpoints := boltstore.Checkpoints(s)
	release.Do(func() { close(hold) })
	eventually.True(t, "the checkpoint held until now", func() bool { return boltstore.Checkpoints(s) > checkpoints })
	claim("g") // appended after the checkpoint, in the segment it did not release
	want["g"] = struct{ state, settle string }{record.StateInProgress, ""}
	check(s, "after the checkpoint")
	// A crash now: the file holds a, b and f as frozen, the other segment the rest.
	check(open(t, copyDir(t, dir), boltstore.Options{SweepInterval: -1}), "after a crash after the checkpoint")
}

// TestFailedCheckpointKeepsItsWrites: a checkpoint that fails (here bbolt cannot write its pages:
// RLIMIT_FSIZE, as on a full disk) stops the store's writes, and its frozen memtable and its
// segment must stay: they hold acknowledged writes the file lacks. A batch whose members ran
// before the failure is still appended and answered; the committer must not then start another
// checkpoint, which would drop the frozen memtable (a read of an acknowledged write would find
// the file's older value) and record in the file a seq past the failed checkpoint's records (the
// next Open would skip them: the writes lost). Not parallel: the file size limit is the process's.
func TestFailedCheckpointKeepsItsWrites(t *testing.T) {
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	restore := sync.OnceFunc(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(restore)
	dir := t.TempDir()
	s, err := boltstore.Open(dir, boltstore.Options{SweepInterval: -1, CheckpointEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{})
	var first sync.Once
	boltstore.SetBeforeCheckpoint(s, func() {
		first.Do(func() {
			<-running // the committer is in the next batch, past its check of a failed store
			// bbolt writes the large value past its pages so far, far past this.
			low := syscall.Rlimit{Cur: 256 << 10, Max: limit.Max}
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &low); err != nil {
				t.Error(err)
			}
		})
	})
	if ok, _, _, err := s.Claim(ctx, "a", "owner", []byte("claim-a"), time.Hour, time.Hour); !ok || err != nil {
		t.Fatalf("Claim(a) = %v, %v", ok, err)
	}
	// A second record, large enough that the file must grow: the checkpoint of both starts.
	if err := boltstore.PutRaw(s, "big", make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	err = boltstore.Transition(s, func(b *boltstore.Batch, now int64) error {
		close(running)
		boltstore.WaitCheckpoint(s) // failed, as the batch runs
		restore()
		b.PutRaw("b", []byte("vb"))
		b.PutRaw("c", []byte("vc")) // two records: a checkpoint is due
		return nil
	})
	if err != nil {
		t.Fatalf("a transition run before the checkpoint failed: %v; want it appended", err)
	}
	if s.Ping(ctx) == nil {
		t.Fatal("Ping after a failed checkpoint: no error")
	}
	// The committer answered before it looked for a checkpoint to start: give it time to start
	// one, which would have written b and c by then. A window of wall time: there is no event to
	// wait for when nothing must happen.
	eventually.Within(time.Second, func() bool { return boltstore.Checkpoints(s) != 0 })
	if n := boltstore.Checkpoints(s); n != 0 {
		t.Errorf("%d checkpoints after the failed one; want none", n)
	}
	if state, _, err := s.Get(ctx, "a"); state != record.StateInProgress || err != nil {
		t.Errorf("Get(a) after the failed checkpoint = %q, %v; want in_progress, as acknowledged", state, err)
	}
	_ = s.Close() // fails: the store failed
	r := open(t, dir, boltstore.Options{SweepInterval: -1})
	if state, _, err := r.Get(ctx, "a"); state != record.StateInProgress || err != nil {
		t.Errorf("after reopening Get(a) = %q, %v; want in_progress, as acknowledged", state, err)
	}
	if v, err := boltstore.GetRaw(r, "c"); string(v) != "vc" || err != nil {
		t.Errorf("after reopening GetRaw(c) = %q, %v; want vc", v, err)
	}
}
