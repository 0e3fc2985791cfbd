package boltstore

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// The memtable and the checkpoint. A batch made durable in the write-ahead log (wal.go) is put in
// the memtable, where readers find it first; a checkpoint writes the memtable to the bbolt file in
// one transaction, synced as bbolt syncs every commit, then empties the log and the memtable.
//
// Order is what keeps readers right (Store.read): the committer puts a batch in the memtable only
// after its fdatasync, so that nothing is read before it is durable; a checkpoint empties the
// memtable only after its transaction has committed, so that a reader who misses the memtable and
// then opens a read transaction finds the value in the file. The committer alone writes the
// memtable and runs checkpoints, between batches, so that a batch's read transaction never sees a
// checkpoint land under it.

// Defaults and bounds of checkpoints.
const (
	// DefaultCheckpointEntries is the default of Options.CheckpointEntries.
	DefaultCheckpointEntries = 4096
	// checkpointBytes checkpoints a memtable that holds this many bytes of values, and a log this
	// long, whatever Options.CheckpointEntries says, bounding the memory and the log a burst of
	// large records takes.
	checkpointBytes = 32 << 20
)

// walSeqKey, in the meta bucket, holds the seq (uint64, big-endian) of the last log record a
// checkpoint applied.
var walSeqKey = []byte("wal-seq")

// memtable holds, by key, the writes of the batches made durable in the log since the last
// checkpoint: what the bbolt file holds once the next checkpoint has applied them.
type memtable struct {
	mu    sync.RWMutex
	m     map[string]write
	bytes int // of the values in m
}

// get returns the write the memtable holds for key.
func (t *memtable) get(key string) (w write, ok bool) {
	t.mu.RLock()
	w, ok = t.m[key]
	t.mu.RUnlock()
	return w, ok
}

// add puts a batch's writes in the memtable, each replacing the key's earlier one.
func (t *memtable) add(writes []write) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]write)
	}
	for _, w := range writes {
		t.bytes += len(w.value) - len(t.m[w.key].value)
		t.m[w.key] = w
	}
}

// clear empties the memtable once a checkpoint has written it to the file.
func (t *memtable) clear() {
	t.mu.Lock()
	clear(t.m)
	t.bytes = 0
	t.mu.Unlock()
}

// applyWrites applies writes, in order, to the records and their index in tx.
func applyWrites(tx *bolt.Tx, writes []write) error {
	records, index := tx.Bucket(recordsBucket), tx.Bucket(unknownBucket)
	for _, w := range writes {
		key := []byte(w.key)
		var err error
		if w.del {
			err = records.Delete(key)
		} else {
			err = records.Put(key, w.value)
		}
		if err == nil && w.unknown && !w.del {
			err = index.Put(key, nil)
		} else if err == nil {
			err = index.Delete(key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// setWALSeq records in tx that the log records up to seq are applied.
func setWALSeq(tx *bolt.Tx, seq uint64) error {
	return tx.Bucket(metaBucket).Put(walSeqKey, binary.BigEndian.AppendUint64(nil, seq))
}

// walSeq returns the seq of the last log record a checkpoint applied, 0 for none.
func walSeq(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(metaBucket).Get(walSeqKey); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// checkpointDue reports whether the memtable or the log has grown enough for a checkpoint.
func (s *Store) checkpointDue() bool {
	s.mem.mu.RLock()
	n, bytes := len(s.mem.m), s.mem.bytes
	s.mem.mu.RUnlock()
	return n >= s.checkpointEntries || bytes >= checkpointBytes || s.log.size >= checkpointBytes
}

// checkpoint writes the memtable to the bbolt file in one synced transaction, then empties the
// log and the memtable. Only the committer calls it, between batches. On an error the memtable
// and the log are left as they were: every write in them is still durable in the log.
func (s *Store) checkpoint() error {
	// The committer is the memtable's only writer: it reads it here without the lock.
	writes := slices.SortedFunc(maps.Values(s.mem.m), func(a, b write) int { return strings.Compare(a.key, b.key) })
	if len(writes) > 0 {
		err := s.db.Update(func(tx *bolt.Tx) error {
			if err := applyWrites(tx, writes); err != nil {
				return err
			}
			return setWALSeq(tx, s.log.seq)
		})
		if err != nil {
			return err
		}
	}
	if err := s.log.reset(); err != nil {
		return err
	}
	s.mem.clear()
	if len(writes) > 0 {
		s.commit.checkpoints.Add(1)
	}
	return nil
}

// recoverLog applies to the bbolt file the log records past the last checkpoint, in one synced
// transaction, and empties the log: what Open does before anything reads the store.
func (s *Store) recoverLog() error {
	var after uint64
	if err := s.db.View(func(tx *bolt.Tx) error { after = walSeq(tx); return nil }); err != nil {
		return err
	}
	var writes []write
	last, err := s.log.read(after, func(ws []write) error {
		writes = append(writes, ws...)
		return nil
	})
	if err != nil {
		return err
	}
	if last > after {
		err := s.db.Update(func(tx *bolt.Tx) error {
			if err := applyWrites(tx, writes); err != nil {
				return err
			}
			return setWALSeq(tx, last)
		})
		if err != nil {
			return err
		}
	}
	s.log.seq = last
	return s.log.empty() // past the last record read, the file holds nothing acknowledged
}
