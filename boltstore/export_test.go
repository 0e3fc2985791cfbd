package boltstore

import bolt "go.etcd.io/bbolt"

// RawCount returns the number of values in the records bucket, expired or not.
func RawCount(s *Store) (n int, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(recordsBucket).Stats().KeyN
		return nil
	})
	return n, err
}

// PutRaw stores value at key as it is, bypassing the encoding.
func PutRaw(s *Store, key string, value []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(recordsBucket).Put([]byte(key), value)
	})
}

// SetAfterScan makes f run inside every sweep between its scan for expired records and its
// deletes. Call it before the store is used; with SweepInterval < 0 only Sweep runs sweeps.
func SetAfterScan(s *Store, f func()) { s.afterScan = f }

// Sweep runs one sweep now and returns how many records it deleted.
func Sweep(s *Store) (removed int, err error) { return s.sweep() }

// ErrNoWrite is what a transition returns when it wrote nothing.
var ErrNoWrite = errNoWrite

// Transition runs fn as the store runs each of its writes (commit.go): queued for the committer,
// in a read-write transaction shared with the other transitions queued, answered once committed.
func Transition(s *Store, fn func(b *bolt.Bucket, now int64) error) error { return s.update(fn) }

// GetRaw returns the raw value at key in the records bucket, nil when there is none.
func GetRaw(s *Store, key string) (value []byte, err error) {
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

// Commits returns how many read-write transactions the committer has committed.
func Commits(s *Store) int64 { return s.commit.commits.Load() }
