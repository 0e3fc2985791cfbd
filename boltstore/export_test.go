package boltstore

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RawCount returns the number of values in the records bucket, expired or not, once a checkpoint
// has written every write answered so far to it.
func RawCount(s *Store) (n int, err error) {
	if err := s.flush(); err != nil {
		return 0, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(recordsBucket).Stats().KeyN
		return nil
	})
	return n, err
}

// PutRaw stores value at key as it is, bypassing the encoding, as a transition.
func PutRaw(s *Store, key string, value []byte) error {
	return s.update(func(b *batch, _ int64) error {
		b.PutRaw(key, value)
		return nil
	})
}

// PutRaw writes value at key in b as it is, bypassing the encoding.
func (b *batch) PutRaw(key string, value []byte) { b.set(write{key: key, value: value}) }

// Batch is what a transition reads and writes.
type Batch = batch

// SetAfterScan makes f run inside every sweep between its scan for expired records and its
// deletes. Call it before the store is used; with SweepInterval < 0 only Sweep runs sweeps.
func SetAfterScan(s *Store, f func()) { s.afterScan = f }

// SetBeforeCheckpoint makes f run in every checkpoint before it writes. Call it before the store
// is used.
func SetBeforeCheckpoint(s *Store, f func()) { s.beforeCheckpoint = f }

// Sweep runs one sweep now and returns how many records it deleted.
func Sweep(s *Store) (removed int, err error) { return s.sweep() }

// ErrNoWrite is what a transition returns when it wrote nothing.
var ErrNoWrite = errNoWrite

// Transition runs fn as the store runs each of its writes (commit.go): queued for the committer,
// run on a batch shared with the other transitions queued, answered once durable.
func Transition(s *Store, fn func(b *Batch, now int64) error) error { return s.update(fn) }

// GetRaw returns the raw value at key as a reader sees it, nil when there is none.
func GetRaw(s *Store, key string) (value []byte, err error) {
	if w, ok := s.memtables().get(key); ok {
		return w.value, nil
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		value = append([]byte(nil), tx.Bucket(recordsBucket).Get([]byte(key))...)
		return nil
	})
	return value, err
}

// SetBeforeBatch makes f run each time the committer finds transitions queued, before it takes
// them.
func SetBeforeBatch(s *Store, f func()) {
	s.commit.mu.Lock()
	defer s.commit.mu.Unlock()
	s.commit.beforeBatch = f
}

// Queued returns how many transitions wait for the committer.
func Queued(s *Store) int {
	s.commit.mu.Lock()
	defer s.commit.mu.Unlock()
	return len(s.commit.queue)
}

// Commits returns how many batches the committer has appended to the write-ahead log.
func Commits(s *Store) int64 { return s.commit.commits.Load() }

// Checkpoints returns how many checkpoints have written to the bbolt file.
func Checkpoints(s *Store) int64 { return s.commit.checkpoints.Load() }

// BreakLog closes the write-ahead log's files under the store: its next append fails, as on a
// disk that refuses writes.
func BreakLog(s *Store) error { return closeWAL(s.logs) }

// Flush returns once every write answered before it was called is in the bbolt file.
func Flush(s *Store) error { return s.flush() }

// Logged returns how many records the write-ahead log holds past the last checkpoint.
func Logged(s *Store) (n int, err error) {
	var after uint64
	if err := s.db.View(func(tx *bolt.Tx) error { after = walSeq(tx); return nil }); err != nil {
		return 0, err
	}
	for _, l := range s.logs {
		records, err := l.read(after)
		if err != nil {
			return 0, err
		}
		n += len(records)
	}
	return n, nil
}

// WaitCheckpoint returns once no checkpoint is under way. Only a transition may call it: it runs
// on the committer, which owns the checkpoint under way.
func WaitCheckpoint(s *Store) { s.waitCheckpoint() }

// TTL returns how long the live record at key has left before it expires, by the store's clock.
func TTL(s *Store, key string) (time.Duration, error) {
	r, now, err := s.read(key, decode)
	if err != nil {
		return 0, err
	}
	if r == nil {
		return 0, fmt.Errorf("no record at %q", key)
	}
	return time.Duration(r.expiresAt-now) * time.Millisecond, nil
}
