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
