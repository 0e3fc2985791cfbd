package boltstore

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Group commit. Every write of the store is a transition: a function run on a batch (the records
// as the committer sees them) with the current time. One goroutine, the committer, runs them: it
// takes every transition queued, runs them one after the other on one batch, and makes the batch's
// writes durable with one append to the write-ahead log and one fdatasync (wal.go), so that under
// concurrency N transitions cost one fdatasync instead of N. It adds no delay: a transition queued
// while the committer is idle starts at once, and those queued while a batch is being synced make
// up the next one. Only then does the committer put the writes in the active memtable, where
// readers see them, and answer; now and then, between batches, it starts a checkpoint that writes
// them to the bbolt file (checkpoint.go).
//
// Each transition keeps its own result:
//
//   - A transition's answer is sent after the batch's fdatasync has returned, whatever it did: one
//     that changed nothing may have read what an earlier member wrote.
//   - A transition that fails (an error other than errNoWrite, or a panic) is taken out: the
//     batch's writes are dropped, its with them, and its error is its answer. That error is what a
//     batch of its own would have answered on the same records, after the members before it, so it
//     is not run again. The others run again on a new batch: those before it on the same records
//     with the same clock, so they do exactly what they did; those after it for the first time.
//   - When the append or its fdatasync fails, every member gets its error, and so does every later
//     write (Store.fail): the batch may or may not be on disk, and the store no longer knows what
//     the file holds. Open reads it again.
//   - When no member writes, nothing is appended and no fdatasync is made.
//
// A transition must therefore return errNoWrite only when it wrote nothing, and its results must
// depend on nothing but the records, its clock and its arguments: it may run more than once, and
// only its last run's results count.

// transition is one write waiting for the committer.
type transition struct {
	fn   func(b *batch, now int64) error // nil: a request for a checkpoint once the batch is durable
	now  int64                           // the clock of its first run, kept for a rerun
	ran  bool
	done chan error // its answer: nil (errNoWrite included) or its error
}

// batch is the records as a transition sees them: as the members before it in its batch left
// them, over the memtable, over the bbolt file. Its writes reach the log and the memtable only
// once every member has run.
type batch struct {
	mem    memtables      // taken before tx was opened (checkpoint.go)
	tx     *bolt.Tx       // read-only, on the bbolt file as a checkpoint left it
	writes map[string]int // index in list of each key written
	list   []write        // the writes, in the order their keys were first written
}

// get returns the value at key, nil when there is none. It is valid until the batch ends.
func (b *batch) get(key string) []byte {
	if i, ok := b.writes[key]; ok {
		return b.list[i].value // nil when deleted
	}
	if w, ok := b.mem.get(key); ok {
		return w.value
	}
	return b.tx.Bucket(recordsBucket).Get([]byte(key))
}

// set records w as the batch's write of its key.
func (b *batch) set(w write) {
	if i, ok := b.writes[w.key]; ok {
		b.list[i] = w
		return
	}
	b.writes[w.key] = len(b.list)
	b.list = append(b.list, w)
}

// reset drops the batch's writes, for a run of its members again.
func (b *batch) reset() {
	clear(b.writes)
	b.list = b.list[:0]
}

// committer queues transitions for commitLoop.
type committer struct {
	mu      sync.Mutex
	more    *sync.Cond // signalled when a transition is queued or closing is set
	queue   []*transition
	closing bool          // set by stopCommitter: no transition is queued after it
	stopped chan struct{} // closed when commitLoop has returned

	commits     atomic.Int64 // batches appended to the log, not those that wrote nothing; tests read it
	checkpoints atomic.Int64 // checkpoints that wrote to the bbolt file; tests read it

	// beforeBatch, when set, is called by commitLoop once a transition is queued and before it
	// takes the queue. Only tests set it (export_test.go, under mu), to let a batch of known
	// members gather.
	beforeBatch func()
}

// startCommitter starts commitLoop.
func (s *Store) startCommitter() {
	s.commit.more = sync.NewCond(&s.commit.mu)
	s.commit.stopped = make(chan struct{})
	go s.commitLoop()
}

// stopCommitter makes commitLoop commit what is queued and return, and waits for it. Transitions
// submitted after it fail with bbolt's ErrDatabaseNotOpen, as on a closed database.
func (s *Store) stopCommitter() {
	s.commit.mu.Lock()
	s.commit.closing = true
	s.commit.more.Signal()
	s.commit.mu.Unlock()
	<-s.commit.stopped
}

// update runs fn as one transition and returns its answer once it is on disk: nil when fn wrote,
// or returned errNoWrite (nothing to write), or fn's error. fn gets its batch and the current time
// in Unix milliseconds, read when the batch starts.
func (s *Store) update(fn func(b *batch, now int64) error) error {
	return s.queue(&transition{fn: fn, done: make(chan error, 1)})
}

// flush returns once every write answered before it was called is in the bbolt file: it asks the
// committer for a checkpoint and waits for it. Only tests call it (RawCount).
func (s *Store) flush() error {
	return s.queue(&transition{done: make(chan error, 1)})
}

// queue hands t to the committer and returns its answer.
func (s *Store) queue(t *transition) error {
	if err := s.failed(); err != nil {
		return err
	}
	c := &s.commit
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return berrors.ErrDatabaseNotOpen
	}
	c.queue = append(c.queue, t)
	c.more.Signal()
	c.mu.Unlock()
	return <-t.done
}

// commitLoop commits batches of queued transitions until stopCommitter.
func (s *Store) commitLoop() {
	defer close(s.commit.stopped)
	c := &s.commit
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closing {
			c.more.Wait()
		}
		if hook := c.beforeBatch; hook != nil && len(c.queue) > 0 {
			c.mu.Unlock()
			hook()
			c.mu.Lock()
		}
		batch := c.queue
		c.queue = nil
		c.mu.Unlock()
		if len(batch) == 0 {
			return // closing, and nothing left
		}
		s.commitBatch(batch)
	}
}

// commitBatch runs the transitions queued on one batch, makes their writes durable, and answers
// each, as the comment at the top of this file says; then it starts a checkpoint when one is due,
// and makes one for the flushes queued.
func (s *Store) commitBatch(queued []*transition) {
	var flushes, members []*transition
	for _, t := range queued {
		if t.fn == nil {
			flushes = append(flushes, t)
		} else {
			members = append(members, t)
		}
	}
	err := s.failed()
	if err == nil {
		err = s.commitMembers(members)
	} else {
		answer(members, err)
	}
	if err == nil {
		switch running := s.checkpointRunning(); {
		case len(flushes) > 0:
			s.waitCheckpoint()
			<-s.startCheckpoint()
			err = s.failed()
		case !running && s.checkpointDue(1):
			s.startCheckpoint()
		case running && s.checkpointDue(checkpointBacklog):
			s.waitCheckpoint() // the checkpoint does not keep up: bound the memory and the log
			s.startCheckpoint()
		}
	}
	answer(flushes, err)
}

// checkpointRunning reports whether a checkpoint is under way.
func (s *Store) checkpointRunning() bool {
	if s.checkpointing == nil {
		return false
	}
	select {
	case <-s.checkpointing:
		return false
	default:
		return true
	}
}

// waitCheckpoint returns once no checkpoint is under way.
func (s *Store) waitCheckpoint() {
	if s.checkpointing != nil {
		<-s.checkpointing
	}
}

// commitMembers runs members on one batch, appends the batch's writes to the log, puts them in the
// active memtable and answers each member. It returns the append's error, which every member got.
func (s *Store) commitMembers(members []*transition) error {
	b := &batch{writes: make(map[string]int, len(members))}
	for len(members) > 0 {
		b.reset()
		failed, err := s.runMembers(b, members)
		if failed >= 0 {
			members[failed].done <- err
			members = slices.Delete(members, failed, failed+1)
			continue
		}
		if err == nil && len(b.list) > 0 {
			if err = s.logs[s.cur].append(s.seq+1, b.list); err != nil {
				err = s.fail(err)
			} else {
				s.seq++
				s.active.add(b.list)
				s.commit.commits.Add(1)
			}
		}
		answer(members, err)
		return err
	}
	return nil
}

// runMembers runs members on b in a read-only transaction of the bbolt file, and returns the index
// of the member that failed and its error, or -1 and the error of the transaction itself.
func (s *Store) runMembers(b *batch, members []*transition) (failed int, err error) {
	failed = -1
	b.mem = s.memtables()
	err = s.db.View(func(tx *bolt.Tx) error {
		b.tx = tx
		defer func() { b.tx = nil }()
		now := s.now().UnixMilli()
		for i, t := range members {
			if !t.ran {
				t.now, t.ran = now, true
			}
			if err := run(t, b); err != nil && !errors.Is(err, errNoWrite) {
				failed = i
				return err
			}
		}
		return nil
	})
	return failed, err
}

// answer sends err to each of ts.
func answer(ts []*transition, err error) {
	for _, t := range ts {
		t.done <- err
	}
}

// run runs t's function, turning a panic into an error of t alone.
func run(t *transition, b *batch) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("transition panicked: %v", p)
		}
	}()
	return t.fn(b, t.now)
}
