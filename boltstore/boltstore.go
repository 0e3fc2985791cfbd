// Package boltstore is the embedded implementation of record.Store, on go.etcd.io/bbolt, for a
// gateway that runs as a single process with no Redis.
//
// The records live in one bbolt file, FileName, under a data directory, and the writes not yet
// checkpointed into it in a write-ahead log of two segments, WALNames, beside it. Every write is
// appended to the log and fsync'd (fdatasync on Linux) before the call returns, so a record written
// survives kill -9 and power loss on a disk that honours fsync (TestTransitionsSurvivePowerLoss
// drops every unsynced write after each kind of transition, and after many concurrent ones, with
// and without checkpoints; docs/guarantees.md says what that proves). Concurrent writes share one
// append and its fsync (group commit, commit.go); a checkpoint, in the background, writes the
// logged records into the bbolt file in one synced transaction now and then, and Open applies what
// the log holds past the last one (checkpoint.go). Reads, and a Claim that finds a live record,
// look in the memtables (the logged writes) and then in a read-only transaction, and make no fsync.
// bbolt lets one process open the file at a time: a second Open fails after Options.LockTimeout
// with an error wrapping ErrLocked.
//
// Records sit in the bucket "records" keyed by the gateway's opaque key (any bytes). A value is a
// versioned binary encoding, integers big-endian:
//
//	offset  size  field
//	0       1     format version, 2
//	1       1     state: 1 in_progress, 2 committed, 3 outcome_unknown
//	2       8     lease_until, Unix milliseconds (int64)
//	10      8     expires_at, Unix milliseconds (int64)
//	18      4     n, length of owner (uint32)
//	22      4     m, length of the claim part of the payload (uint32)
//	26      n     owner
//	26+n    m     the payload's claim part (record.Payload.Claim), byte for byte
//	26+n+m  rest  its settle part (record.Payload.Settle), byte for byte; empty until settled
//
// Values of version 1, written before the payload was split, lack m: their payload, all of it, is
// the claim part. They are still read; every write stores version 2.
//
// The bucket "meta" holds the key "format" = "idemgateway-records-v1"; Open refuses a file with
// another format (ErrFormat), and the key "wal-seq", the last log record checkpointed (wal.go). A
// value that does not decode is refused with an error wrapping record.ErrCorrupt, never
// overwritten or freed; Delete removes it.
//
// Leases and TTLs use the local clock (Options.Now), in milliseconds: a wall clock stepped forward
// lapses leases and expires records early, stepped backward extends them. An expired record is
// treated as absent by every operation, and a background sweeper removes expired records every
// Options.SweepInterval.
package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/idemgateway/idemgateway/record"
)

// FileName is the name of the database file in the data directory.
const FileName = "idemgateway.db"

// Defaults of Options.
const (
	// DefaultSweepInterval is the default of Options.SweepInterval.
	DefaultSweepInterval = time.Minute
	// DefaultLockTimeout is the default of Options.LockTimeout.
	DefaultLockTimeout = time.Second
)

// initialMmapSize is the address space bbolt maps at Open (not memory: the file is not grown to
// it). Until the file outgrows it, a checkpoint that grows the file does not remap it, which copies
// every value its transaction holds out of the old mapping and waits for every reader.
const initialMmapSize = 256 << 20

// ErrLocked is wrapped by Open's error when another process (or another Open in this one) holds
// the database file.
var ErrLocked = errors.New("database file is in use by another process")

// ErrFormat is wrapped by Open's error when the database file is marked with another format than
// this store's ("idemgateway-records-v1"): records of another version of this store.
var ErrFormat = errors.New("database file of another format")

// Bucket and format marker.
var (
	recordsBucket = []byte("records")
	unknownBucket = []byte("unknown") // index: the keys of the records in outcome_unknown
	metaBucket    = []byte("meta")
	formatKey     = []byte("format")
	formatValue   = []byte("idemgateway-records-v1")
)

// Options configure a Store. The zero value is the default.
type Options struct {
	// SweepInterval is how often the background sweeper deletes expired records. Expired records
	// are treated as absent whether swept or not; sweeping only reclaims space. Default
	// DefaultSweepInterval (1 minute); a negative value disables the sweeper.
	SweepInterval time.Duration

	// LockTimeout is how long Open waits for the file lock that another process holds before it
	// fails with ErrLocked. Default DefaultLockTimeout (1 second).
	LockTimeout time.Duration

	// Now is the clock of leases and TTLs. Default time.Now.
	Now func() time.Time

	// Logger receives the sweeper's errors (warn) and counts (debug). Default slog.Default().
	Logger *slog.Logger

	// CheckpointEntries is how many records written since the last checkpoint make the committer
	// start the next, which writes them to the bbolt file (checkpoint.go); Close makes one too.
	// Default DefaultCheckpointEntries.
	CheckpointEntries int
}

// Store is a record.Store in a bbolt file. It is safe for concurrent use.
type Store struct {
	db     *bolt.DB
	now    func() time.Time
	logger *slog.Logger

	// afterScan, when set, is called by sweep between its read transaction (the scan) and its
	// write transactions (the deletes). Only tests set it (export_test.go), before the store is
	// used, to run a Claim in that window deterministically.
	afterScan func()

	// beforeCheckpoint, when set, is called by every checkpoint before it writes. Only tests set
	// it (export_test.go), before the store is used, to hold a checkpoint under way.
	beforeCheckpoint func()

	commit committer // runs every write (commit.go)

	// The write-ahead log (wal.go) and the memtables (checkpoint.go). The committer alone appends,
	// moves seq and cur, and writes active; memMu guards the active and frozen pointers for readers.
	logs          [2]*wal
	cur           int    // the segment appended to
	seq           uint64 // of the last batch appended, or recovered
	memMu         sync.RWMutex
	active        *memtable
	frozen        *memtable     // under checkpoint; nil when none is under way
	checkpointing chan struct{} // closed when the last checkpoint started has finished

	checkpointEntries int
	broken            atomic.Pointer[error] // set by fail

	stop      chan struct{} // closed by Close to stop the sweeper
	swept     chan struct{} // closed when the sweeper has returned
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating it if missing) the database FileName in dir, creating dir with mode 0700
// when it does not exist, and starts the sweeper. It fails with an error wrapping ErrLocked when the
// file stays locked by another process for Options.LockTimeout, and with an error wrapping
// ErrFormat when the file holds another format.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("boltstore: empty data directory")
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CheckpointEntries <= 0 {
		opts.CheckpointEntries = DefaultCheckpointEntries
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("boltstore: create data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout, FreelistType: bolt.FreelistMapType, InitialMmapSize: initialMmapSize})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: %w (bbolt allows one process per file: is another idemgateway using this data directory?)", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	if err := db.Update(initBuckets); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	logs, err := openWAL(dir)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open the write-ahead log in %s: %w", dir, err)
	}
	s := &Store{
		db:                db,
		now:               opts.Now,
		logger:            opts.Logger,
		logs:              logs,
		active:            &memtable{},
		checkpointEntries: opts.CheckpointEntries,
		stop:              make(chan struct{}),
		swept:             make(chan struct{}),
	}
	if err := s.recoverLog(); err != nil {
		_ = closeWAL(logs)
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: recover the write-ahead log: %w", path, err)
	}
	s.startCommitter()
	if opts.SweepInterval > 0 {
		go s.sweepLoop(opts.SweepInterval)
	} else {
		close(s.swept)
	}
	return s, nil
}

// initBuckets creates the buckets of a new file and checks the format marker of an existing one.
func initBuckets(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(metaBucket)
	if err != nil {
		return err
	}
	switch format := meta.Get(formatKey); {
	case format == nil:
		if err := meta.Put(formatKey, formatValue); err != nil {
			return err
		}
	case string(format) != string(formatValue):
		return fmt.Errorf("%w: file format %q, want %q", ErrFormat, format, formatValue)
	}
	if _, err = tx.CreateBucketIfNotExists(recordsBucket); err != nil {
		return err
	}
	_, err = tx.CreateBucketIfNotExists(unknownBucket)
	return err
}

// Close stops the sweeper, waits for the writes under way, and closes the database file. Later
// calls return the first call's result; operations on a closed Store return errors.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.swept
		s.stopCommitter()
		s.waitCheckpoint()
		if s.failed() == nil {
			// What the log holds would be recovered at the next Open; written now, the file is
			// whole without it, and the log empty.
			<-s.startCheckpoint()
		}
		errs := []error{s.failed(), closeWAL(s.logs), s.db.Close()}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("boltstore: close: %w", err)
		}
	})
	return s.closeErr
}

// errNoWrite is returned by a transition (see update, commit.go) that wrote nothing: update then
// returns nil, and a batch in which no transition wrote is not appended, sparing it the fsync.
var errNoWrite = errors.New("no write")

// fail stops the store's writes after err, an error of the log or of a checkpoint, and returns
// the error every write gets from now on. The store no longer knows what its files hold (a batch
// whose fdatasync failed may be on disk or not); Open reads them again.
func (s *Store) fail(err error) error {
	err = fmt.Errorf("%w (writes stopped: reopen the store to recover its write-ahead log)", err)
	if s.broken.CompareAndSwap(nil, &err) {
		s.logger.Error("boltstore: writes stopped", "error", err)
	}
	return *s.broken.Load()
}

// failed returns the error fail set, nil while the store writes.
func (s *Store) failed() error {
	if err := s.broken.Load(); err != nil {
		return *err
	}
	return nil
}

// read returns the live record at key as the last durable batch left it, decoded by dec (decode,
// or decodeAnswer), nil when there is none or it has expired: the memtables' write of key when
// they hold one, else the bbolt file's value. The memtables are looked at first, and the file
// after (checkpoint.go says why that order).
func (s *Store) read(key string, dec func([]byte) (*entry, error)) (r *entry, now int64, err error) {
	if w, ok := s.memtables().get(key); ok {
		now = s.now().UnixMilli()
		r, err = live(w.value, now, dec)
		return r, now, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		now = s.now().UnixMilli()
		r, err = live(tx.Bucket(recordsBucket).Get([]byte(key)), now, dec)
		return err
	})
	return r, now, err
}

// live decodes the value v with dec, and returns nil when there is none (v nil) or it has expired
// at now.
func live(v []byte, now int64, dec func([]byte) (*entry, error)) (*entry, error) {
	if v == nil {
		return nil, nil
	}
	r, err := dec(v)
	if err != nil {
		return nil, err
	}
	if r.expired(now) {
		return nil, nil
	}
	return r, nil
}

// load returns the live record at key in b, or nil when there is none or it has expired.
func load(b *batch, key string, now int64) (*entry, error) { return live(b.get(key), now, decode) }

// put stores r at key in b.
func put(b *batch, key string, r *entry) {
	b.set(write{key: key, value: r.encode(), unknown: r.state == record.StateUnknown})
}

// del removes the record at key in b.
func del(b *batch, key string) { b.set(write{key: key, del: true}) }

// Claim implements record.Store.Claim. A replay is answered by a read (Store.read); creating a
// record, or turning a lapsed one into outcome_unknown, is one fsync'd write. When it claims, stored
// is payload itself. lease and ttl are rounded up to whole milliseconds and must be positive; key
// and owner must not be empty, and key at most bolt.MaxKeySize bytes.
func (s *Store) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (claimed bool, state string, stored record.Payload, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease), record.Positive("ttl", ttl)); err != nil {
		return false, "", record.Payload{}, fmt.Errorf("boltstore: claim: %w", err)
	}
	if len(key) > bolt.MaxKeySize {
		// Refused now, as bbolt would refuse it: logged, it would fail the checkpoint, and with it
		// every later write and every Open. Claim alone creates records.
		return false, "", record.Payload{}, fmt.Errorf("boltstore: claim: key of %d bytes, longer than %d", len(key), bolt.MaxKeySize)
	}
	// Fast path: a live record that needs no change, answered without a settled one's claim part.
	found, now, err := s.read(key, decodeAnswer)
	if err != nil {
		return false, "", record.Payload{}, wrap("claim", key, err)
	}
	if found != nil && !found.lapsed(now) && !found.claimedBy(owner, payload) {
		return false, found.state, found.claimAnswer(), nil
	}
	err = s.update(func(b *batch, now int64) error {
		r, err := load(b, key, now)
		switch {
		case err != nil:
			return err
		case r == nil:
			claimed, state, stored = true, record.StateInProgress, record.Payload{Claim: payload}
			put(b, key, newEntry(owner, payload, now, lease, ttl))
			return nil
		case r.claimedBy(owner, payload):
			// This very claim, sent again after its answer was lost (docs/guarantees.md#lost-replies):
			// it is claimed, with the lease from now, as if the first had come now.
			r.leaseUntil = now + record.Millis(lease)
			claimed, state, stored = true, record.StateInProgress, record.Payload{Claim: payload}
			put(b, key, r)
			return nil
		case r.lapsed(now):
			r.state = record.StateUnknown
			claimed, state, stored = false, r.state, r.claimAnswer()
			put(b, key, r)
			return nil
		default:
			claimed, state, stored = false, r.state, r.claimAnswer()
			return errNoWrite
		}
	})
	if err != nil {
		return false, "", record.Payload{}, wrap("claim", key, err)
	}
	return claimed, state, stored, nil
}

// Reclaim implements record.Store.Reclaim. lease and ttl are rounded up to whole milliseconds and
// must be positive; key and owner must not be empty.
func (s *Store) Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease), record.Positive("ttl", ttl)); err != nil {
		return false, fmt.Errorf("boltstore: reclaim: %w", err)
	}
	return s.fenced("reclaim", key, func(r *entry, now int64) bool {
		if r.claimedBy(owner, payload) {
			// Taken over by this very reclaim, sent again after its answer was lost
			// (docs/guarantees.md#lost-replies): the lease from now, as if the first had come now.
			r.leaseUntil = now + record.Millis(lease)
			return true
		}
		if r.owner != from || (r.state != record.StateUnknown && !r.lapsed(now)) {
			return false
		}
		*r = *newEntry(owner, payload, now, lease, ttl)
		return true
	})
}

// Renew implements record.Store.Renew. The owner of a record that is still in_progress may renew
// it even after its lease lapsed, as long as no Claim has turned it into outcome_unknown and no
// Reclaim has taken it over. lease is rounded up to whole milliseconds and must be positive. The
// record's expiry is unchanged.
func (s *Store) Renew(ctx context.Context, key, owner string, lease time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease)); err != nil {
		return false, fmt.Errorf("boltstore: renew: %w", err)
	}
	return s.fenced("renew", key, func(r *entry, now int64) bool {
		if !r.ownedInProgress(owner) {
			return false
		}
		r.leaseUntil = now + record.Millis(lease)
		return true
	})
}

// Commit implements record.Store.Commit. ttl is rounded up to whole milliseconds and must not be
// negative (0 keeps the claim's expiry).
func (s *Store) Commit(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.NotNegative("ttl", ttl)); err != nil {
		return false, fmt.Errorf("boltstore: commit: %w", err)
	}
	return s.finish("commit", key, owner, record.StateCommitted, settle, ttl)
}

// MarkUnknown implements record.Store.MarkUnknown. ttl is rounded up to whole milliseconds and
// must be positive.
func (s *Store) MarkUnknown(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("ttl", ttl)); err != nil {
		return false, fmt.Errorf("boltstore: mark unknown: %w", err)
	}
	return s.finish("mark unknown", key, owner, record.StateUnknown, settle, ttl)
}

// finish moves the in_progress record owned by owner, or the one a Claim found lapsed under owner
// (lapsedUnder), to state with settle as its settle part, expiring after ttl. The owner is kept, so
// that a later Reclaim can name it.
func (s *Store) finish(op, key, owner, state string, settle []byte, ttl time.Duration) (bool, error) {
	return s.fenced(op, key, func(r *entry, now int64) bool {
		if r.owner == owner && r.state == state && len(settle) > 0 && bytes.Equal(r.settle, settle) {
			// This very call, sent again after its answer was lost (docs/guarantees.md#lost-replies):
			// done already. The record is stored again unchanged, its expiry still the first's.
			return true
		}
		if !r.ownedInProgress(owner) && !r.lapsedUnder(owner) {
			return false
		}
		r.state, r.settle = state, settle
		if ttl > 0 {
			r.expiresAt = now + record.Millis(ttl)
		}
		return true
	})
}

// Release implements record.Store.Release. A missing or expired record is released already: ok.
func (s *Store) Release(ctx context.Context, key, owner string) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner); err != nil {
		return false, fmt.Errorf("boltstore: release: %w", err)
	}
	err = s.update(func(b *batch, now int64) error {
		r, err := load(b, key, now)
		if err != nil {
			return err
		}
		if r == nil {
			ok = true // gone already, whoever removed it: a retry executes again (docs/guarantees.md#lost-replies)
			return errNoWrite
		}
		if !r.ownedInProgress(owner) && !r.lapsedUnder(owner) {
			return errNoWrite
		}
		ok = true
		del(b, key)
		return nil
	})
	if err != nil {
		return false, wrap("release", key, err)
	}
	return ok, nil
}

// fenced runs change on the live record at key in a write transaction and stores the record when
// change reports that it changed it; a missing or expired record is refused.
func (s *Store) fenced(op, key string, change func(r *entry, now int64) bool) (ok bool, err error) {
	err = s.update(func(b *batch, now int64) error {
		r, err := load(b, key, now)
		if err != nil {
			return err
		}
		if r == nil || !change(r, now) {
			return errNoWrite
		}
		ok = true
		put(b, key, r)
		return nil
	})
	if err != nil {
		return false, wrap(op, key, err)
	}
	return ok, nil
}

// Get implements record.Store.Get with a read (Store.read). It returns the stored state,
// except that an in_progress record whose lease has lapsed is reported outcome_unknown (as the next
// Claim will store it). An expired record is reported absent.
func (s *Store) Get(ctx context.Context, key string) (state string, stored record.Payload, err error) {
	if err := record.CheckKeyArg(ctx, key); err != nil {
		return "", record.Payload{}, fmt.Errorf("boltstore: get: %w", err)
	}
	r, now, err := s.read(key, decode)
	if err != nil {
		return "", record.Payload{}, wrap("get", key, err)
	}
	if r != nil {
		state, stored = r.state, r.payload()
		if r.lapsed(now) {
			state = record.StateUnknown // its executor is gone; Claim will store it so
		}
	}
	return state, stored, nil
}

// Delete implements record.Store.Delete. It also removes a corrupt record (existed is then true),
// and an expired one (existed is then false).
func (s *Store) Delete(ctx context.Context, key string) (existed bool, err error) {
	if err := record.CheckKeyArg(ctx, key); err != nil {
		return false, fmt.Errorf("boltstore: delete: %w", err)
	}
	err = s.update(func(b *batch, now int64) error {
		v := b.get(key)
		if v == nil {
			return errNoWrite
		}
		r, err := decode(v)
		existed = err != nil || !r.expired(now)
		del(b, key)
		return nil
	})
	if err != nil {
		return false, wrap("delete", key, err)
	}
	return existed, nil
}

// Ping implements record.Store.Ping: it fails when the Store is closed or its file unreadable.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: ping: %w", err)
	}
	err := s.failed()
	if err == nil {
		err = s.db.View(func(tx *bolt.Tx) error {
			if tx.Bucket(recordsBucket) == nil {
				return errors.New("records bucket missing")
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("boltstore: ping: %w", err)
	}
	return nil
}

// wrap adds the operation and key to err.
func wrap(op, key string, err error) error {
	return fmt.Errorf("boltstore: %s %q: %w", op, key, err)
}

// ListUnknown implements record.Store.ListUnknown from the index bucket "unknown", which every
// checkpoint keeps in the same transaction as the records, merged with the records in
// outcome_unknown that the memtables hold: a page reads each record listed as it is now, in key
// order.
func (s *Store) ListUnknown(ctx context.Context, prefix, cursor string, limit int) (keys []string, stored []record.Payload, next string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, "", fmt.Errorf("boltstore: list: %w", err)
	}
	if limit <= 0 {
		return nil, nil, "", errors.New("boltstore: list: limit must be positive")
	}
	ms := s.memtables()
	logged := ms.unknownKeys(prefix, cursor)
	err = s.db.View(func(tx *bolt.Tx) error {
		b := &batch{mem: ms, tx: tx}
		now := s.now().UnixMilli()
		c := tx.Bucket(unknownBucket).Cursor()
		k, _ := c.Seek([]byte(max(prefix, cursor)))
		if cursor != "" && string(k) == cursor {
			k, _ = c.Next()
		}
		for {
			if k != nil && !strings.HasPrefix(string(k), prefix) {
				k = nil
			}
			var key string
			switch {
			case k == nil && len(logged) == 0:
				return nil
			case k == nil || (len(logged) > 0 && logged[0] < string(k)):
				key, logged = logged[0], logged[1:]
			default:
				key = string(k)
				if len(logged) > 0 && logged[0] == key {
					logged = logged[1:]
				}
				k, _ = c.Next()
			}
			r, err := load(b, key, now)
			if err != nil || r == nil || r.state != record.StateUnknown {
				continue // corrupt, expired and not swept yet, or settled since the checkpoint
			}
			if len(keys) == limit {
				next = keys[len(keys)-1]
				return nil
			}
			keys, stored = append(keys, key), append(stored, r.payload())
		}
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("boltstore: list: %w", err)
	}
	return keys, stored, next, nil
}
