package boltstore

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// sweepBatch bounds the records deleted by one write transaction, so that a large sweep does not
// hold the writer lock (and delay claims) for long.
const sweepBatch = 1000

// sweepLoop sweeps every interval until Close.
func (s *Store) sweepLoop(interval time.Duration) {
	defer close(s.swept)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			n, err := s.sweep()
			if err != nil {
				s.logger.Warn("boltstore: sweep expired records", "error", err, "removed", n)
			} else if n > 0 {
				s.logger.Debug("boltstore: swept expired records", "removed", n)
			}
		}
	}
}

// sweep deletes the expired records and returns how many it deleted. It finds them in a read
// transaction of the bbolt file, and deletes them in transitions of at most sweepBatch records,
// checking each again, since a Claim may have replaced it meanwhile. A record the memtables alone
// hold is swept once a checkpoint has written it to the file. Corrupt records are left for Delete.
func (s *Store) sweep() (removed int, err error) {
	var expired []string
	err = s.db.View(func(tx *bolt.Tx) error {
		now := s.now().UnixMilli()
		return tx.Bucket(recordsBucket).ForEach(func(k, v []byte) error {
			if r, err := decode(v); err == nil && r.expired(now) {
				expired = append(expired, string(k))
			}
			return nil
		})
	})
	if s.afterScan != nil {
		s.afterScan()
	}
	for len(expired) > 0 && err == nil {
		keys := expired[:min(sweepBatch, len(expired))]
		expired = expired[len(keys):]
		n := 0
		err = s.update(func(b *batch, now int64) error {
			n = 0
			for _, k := range keys {
				if r, err := decode(b.get(k)); err == nil && r.expired(now) {
					del(b, k)
					n++
				}
			}
			if n == 0 {
				return errNoWrite
			}
			return nil
		})
		if err == nil {
			removed += n
		}
	}
	return removed, err
}
