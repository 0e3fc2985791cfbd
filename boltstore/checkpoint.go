package boltstore

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// The memtables and the checkpoints. A batch made durable in the write-ahead log (wal.go) is put in
// the active memtable, where readers find it. When the active memtable has grown enough, the
// committer freezes it, moves its appends to the log's other segment and starts a checkpoint: a
// goroutine that writes the frozen memtable to the bbolt file in one transaction, synced as bbolt
// syncs every commit, then releases the segment that held its batches and drops the frozen
// memtable. The committer goes on meanwhile, into a new active memtable; it starts the next
// checkpoint only once this one has finished, so that the segment it moves to is released.
//
// Order is what keeps readers right. A reader looks in the active memtable, then the frozen one,
// then a read-only transaction of the bbolt file opened after it took the two (Store.read): the
// committer puts a batch in the active memtable only after its fdatasync, so nothing is read before
// it is durable, and a checkpoint drops its frozen memtable only after its transaction committed,
// so a reader who took the memtables before the drop finds the values there, and one who took
// them after finds them in the file. A batch takes the memtables before it opens its read-only
// transaction, for the same reason.

// Defaults and bounds of checkpoints.
const (
	// DefaultCheckpointEntries is the default of Options.CheckpointEntries.
	DefaultCheckpointEntries = 4096
	// checkpointBytes starts a checkpoint once the active memtable holds this many bytes of
	// values, or its segment is this long, whatever Options.CheckpointEntries says, bounding the
	// memory and the log a burst of large records takes.
	checkpointBytes = 32 << 20
	// checkpointBacklog is how many times its bounds the active memtable may grow while a
	// checkpoint is under way before the committer waits for it.
	checkpointBacklog = 4
)

// walSeqKey, in the meta bucket, holds the seq (uint64, big-endian) of the last log record a
// checkpoint applied.
var walSeqKey = []byte("wal-seq")

// memtable holds, by key, the writes of batches made durable in the log and not yet in the bbolt
// file. The active one is written by the committer under mu; a frozen one is never written again
// and is read without the lock.
type memtable struct {
	mu    sync.RWMutex
	m     map[string]write
	bytes int // of the values in m
}

// get returns the write the active memtable t holds for key.
func (t *memtable) get(key string) (w write, ok bool) {
	t.mu.RLock()
	w, ok = t.m[key]
	t.mu.RUnlock()
	return w, ok
}

// add puts a batch's writes in the active memtable t, each replacing the key's earlier one.
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

// size returns how many writes the active memtable t holds, and the bytes of their values.
func (t *memtable) size() (n, bytes int) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m), t.bytes
}

// memtables are the active memtable and the frozen one, nil when no checkpoint is under way, as a
// reader takes them (Store.memtables).
type memtables struct{ active, frozen *memtable }

// get returns the write the memtables hold for key: the active one's, else the frozen one's.
func (ms memtables) get(key string) (w write, ok bool) {
	if w, ok = ms.active.get(key); ok || ms.frozen == nil {
		return w, ok
	}
	w, ok = ms.frozen.m[key]
	return w, ok
}

// unknownKeys returns, in order, the keys after cursor with prefix whose records the memtables
// hold in outcome_unknown (a key's write in the active memtable replacing the frozen one's).
func (ms memtables) unknownKeys(prefix, cursor string) []string {
	var keys []string
	add := func(m map[string]write, shadow *memtable) {
		for key, w := range m {
			if w.unknown && !w.del && strings.HasPrefix(key, prefix) && key > cursor {
				if shadow != nil {
					if _, ok := shadow.m[key]; ok {
						continue // the active memtable's write of key counts
					}
				}
				keys = append(keys, key)
			}
		}
	}
	ms.active.mu.RLock()
	add(ms.active.m, nil)
	if ms.frozen != nil {
		add(ms.frozen.m, ms.active)
	}
	ms.active.mu.RUnlock()
	slices.Sort(keys)
	return keys
}

// memtables returns the active memtable and the frozen one, to be taken before a read-only
// transaction of the bbolt file is opened (the comment at the top of this file says why).
func (s *Store) memtables() memtables {
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	return memtables{s.active, s.frozen}
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

// writeCheckpoint applies writes to the bbolt file in one synced transaction that also records
// seq as the last log record applied.
func (s *Store) writeCheckpoint(writes []write, seq uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := applyWrites(tx, writes); err != nil {
			return err
		}
		return tx.Bucket(metaBucket).Put(walSeqKey, binary.BigEndian.AppendUint64(nil, seq))
	})
}

// walSeq returns the seq of the last log record a checkpoint applied, 0 for none.
func walSeq(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(metaBucket).Get(walSeqKey); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// checkpointDue reports whether the active memtable or its segment has grown enough for a
// checkpoint.
func (s *Store) checkpointDue(times int) bool {
	n, bytes := s.active.size()
	return n >= times*s.checkpointEntries || bytes >= times*checkpointBytes || s.logs[s.cur].size >= int64(times)*checkpointBytes
}

// startCheckpoint freezes the active memtable, moves appends to the other segment, and starts the
// checkpoint of the frozen memtable; it returns a channel closed when the checkpoint has finished.
// Only the committer calls it (and Close, once the committer has stopped), and only when no
// checkpoint is under way (s.checkpointing is nil or closed). It starts none once the store has
// failed: a checkpoint that failed leaves its frozen memtable and its segment, which hold writes
// the file lacks, and the next would drop the one and record a seq past the other's records. The
// failed checkpoint set the error before it closed its channel, so it is seen here.
func (s *Store) startCheckpoint() chan struct{} {
	done := make(chan struct{})
	s.checkpointing = done
	frozen, segment := s.active, s.logs[s.cur]
	if n, _ := frozen.size(); s.failed() != nil || n == 0 && segment.size == 0 {
		close(done)
		return done
	}
	s.memMu.Lock()
	s.active, s.frozen = &memtable{}, frozen
	s.memMu.Unlock()
	s.cur = 1 - s.cur
	go s.checkpoint(frozen, segment, s.seq, done)
	return done
}

// checkpoint writes frozen, whose batches end with seq and are in segment, to the bbolt file, then
// releases segment and drops frozen, and closes done. On an error the store stops writing
// (Store.fail): frozen stays, and every write in it is still durable in segment.
func (s *Store) checkpoint(frozen *memtable, segment *wal, seq uint64, done chan struct{}) {
	defer close(done)
	if s.beforeCheckpoint != nil {
		s.beforeCheckpoint()
	}
	writes := slices.SortedFunc(maps.Values(frozen.m), func(a, b write) int { return strings.Compare(a.key, b.key) })
	if err := s.writeCheckpoint(writes, seq); err != nil {
		s.fail(fmt.Errorf("checkpoint: %w", err))
		return
	}
	segment.release()
	s.memMu.Lock()
	s.frozen = nil
	s.memMu.Unlock()
	if len(writes) > 0 {
		s.commit.checkpoints.Add(1)
	}
}

// recoverLog applies to the bbolt file the log records past the last checkpoint, in one synced
// transaction, and releases both segments: what Open does before anything reads the store. The records of
// both segments are taken in seq order from the one after the last checkpoint's, up to the first
// seq missing.
func (s *Store) recoverLog() error {
	var after uint64
	if err := s.db.View(func(tx *bolt.Tx) error { after = walSeq(tx); return nil }); err != nil {
		return err
	}
	var records []logRecord
	for _, l := range s.logs {
		rs, err := l.read(after)
		if err != nil {
			return err
		}
		records = append(records, rs...)
	}
	slices.SortFunc(records, func(a, b logRecord) int { return cmp.Compare(a.seq, b.seq) })
	var writes []write
	last, seen := after, after
	for _, r := range records {
		if r.seq == last+1 {
			writes, last = append(writes, r.writes...), r.seq
		}
		seen = max(seen, r.seq)
	}
	// A record past a missing seq was never acknowledged (a batch is appended only once the one
	// before it is synced); the seqs go on past it, so that it stays stale.
	last = seen
	if last > after {
		if err := s.writeCheckpoint(writes, last); err != nil {
			return err
		}
	}
	s.seq = last
	for _, l := range s.logs {
		l.release() // what they hold is applied, or was never acknowledged
	}
	return nil
}
