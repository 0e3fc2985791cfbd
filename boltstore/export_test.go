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
