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

// Group commit. Every write of the store is a transition: a function run in a read-write
// transaction with the records bucket and the current time. One goroutine, the committer, runs
// them: it takes every transition queued, runs them one after the other in one transaction, and
// commits it with one fsync, so that under concurrency N transitions cost one fsync instead of N.
// It adds no delay: a transition queued while the committer is idle starts at once, and those
// queued while a commit is under way make up the next one.
//
// Each transition keeps its own result:
//
//   - A transition's answer is sent after the transaction's commit has returned, fsync included,
//     whatever it did: one that changed nothing may have read what an earlier member wrote.
//   - A transition that fails (an error other than errNoWrite, or a panic) is taken out: the
//     transaction is rolled back, its writes with it, and its error is its answer. That error is
//     what a transaction of its own would have answered on the same records, after the members
//     before it, so it is not run again. The others run again in a new transaction: those before it
//     on the same records with the same clock, so they do exactly what they did; those after it for
//     the first time.
//   - When the commit itself fails (a write or an fsync), every member gets its error: none of them
//     is on disk.
//   - When every member returns errNoWrite, the transaction is rolled back and no fsync is made.
//
// A transition must therefore return errNoWrite only when it wrote nothing, and its results must
// depend on nothing but the records, its clock and its arguments: it may run more than once, and
// only its last run's results count.

// transition is one write waiting for the committer.
type transition struct {
	fn   func(b *bolt.Bucket, now int64) error
	now  int64 // the clock of its first run, kept for a rerun
	ran  bool
	done chan error // its answer: nil (errNoWrite included) or its error
}

// committer queues transitions for commitLoop.
type committer struct {
	mu      sync.Mutex
	more    *sync.Cond // signalled when a transition is queued or closing is set
	queue   []*transition
	closing bool          // set by stopCommitter: no transition is queued after it
	stopped chan struct{} // closed when commitLoop has returned

	commits atomic.Int64 // transactions committed, not those rolled back; tests read it

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
// or returned errNoWrite (nothing to write), or fn's error. fn gets the records bucket and the
// current time in Unix milliseconds, read once the transaction holds the writer lock.
func (s *Store) update(fn func(b *bolt.Bucket, now int64) error) error {
	t := &transition{fn: fn, done: make(chan error, 1)}
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

// commitBatch runs batch in one transaction and answers each of its transitions, as the comment
// at the top of this file says.
func (s *Store) commitBatch(batch []*transition) {
	for len(batch) > 0 {
		failed, wrote := -1, false
		err := s.db.Update(func(tx *bolt.Tx) error {
			b, now := tx.Bucket(recordsBucket), s.now().UnixMilli()
			for i, t := range batch {
				if !t.ran {
					t.now, t.ran = now, true
				}
				switch err := run(t, b); {
				case err == nil:
					wrote = true
				case errors.Is(err, errNoWrite):
				default:
					failed = i
					return err
				}
			}
			if !wrote {
				return errNoWrite
			}
			return nil
		})
		if failed >= 0 {
			batch[failed].done <- err
			batch = slices.Delete(batch, failed, failed+1)
			continue
		}
		if err == nil {
			s.commit.commits.Add(1)
		}
		if errors.Is(err, errNoWrite) {
			err = nil
		}
		for _, t := range batch {
			t.done <- err
		}
		return
	}
}

// run runs t's function, turning a panic into an error of t alone.
func run(t *transition, b *bolt.Bucket) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("transition panicked: %v", p)
		}
	}()
	return t.fn(b, t.now)
}
