// Package pgstore is the PostgreSQL store of idempotency records (record.Store): one table, each
// transition one statement (a claim of a new key two: a read, then the insert; rare paths one more), fenced by the
// owner token and safe to send twice, with durations on the database's clock (now()). Waiting
// duplicates are woken by LISTEN/NOTIFY (notify.go), expired rows are never read as live and are
// swept in batches (sweep.go), and the schema is created and migrated at start under a version
// (schema.go). docs/stores.md#postgresql says how to run it.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgateway/idemgateway/record"
)

// Options configure New. The zero value is the defaults.
type Options struct {
	// Schema holds the store's tables: created at start when missing. Several gateways (or
	// tests) that share a database and must not share records use a schema each. Default
	// DefaultSchema; a lower-case letter or "_", then lower-case letters, digits and "_", at most
	// 40 bytes, not starting with "pg_" (PostgreSQL's own).
	Schema string
	// SweepInterval is how often expired rows are deleted (sweep.go). Default DefaultSweepInterval;
	// negative: never (tests).
	SweepInterval time.Duration
}

// Defaults of Options.
const (
	DefaultSchema        = "idemgateway"
	DefaultSweepInterval = time.Minute
)

// schemaName is what Options.Schema may be: a lower-case SQL identifier that needs no quoting.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// ParseConfig parses a connection URL (or key=value string) as pgxpool does, and sizes the pool
// at 10 connections per CPU (GOMAXPROCS), as go-redis sizes the Redis store's, unless the string
// sets pool_max_conns: pgx's default of 4 (or one per CPU) lets only that many claims and commits
// wait for the WAL's flush at once, which caps first executions (a quarter fewer at the store with
// 32 callers, pgstore's TestWorkPerExecution conditions). Its errors hide the password.
func ParseConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(connString, "pool_max_conns") {
		cfg.MaxConns = int32(10 * runtime.GOMAXPROCS(0))
	}
	return cfg, nil
}

// Store is the PostgreSQL record.Store. It also implements record.SettleNotifier. Build it with
// New; it is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	table   string // the records table, schema-qualified
	channel string // the NOTIFY channel of settles
	q       queries
	notify  *listener
	stop    context.CancelFunc
	done    chan struct{}
}

// New opens a store on pool: it creates or migrates the schema (schema.go), starts the sweep and
// the listener of settle notices, and returns. Close stops them; the pool is the caller's.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if !schemaName.MatchString(opts.Schema) || strings.HasPrefix(opts.Schema, "pg_") {
		return nil, fmt.Errorf("pgstore: schema %q: want a lower-case letter or _ first, then lower-case letters, digits and _, at most 40 bytes, not starting with pg_", opts.Schema)
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	if err := migrate(ctx, pool, opts.Schema); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, table: opts.Schema + ".records", channel: opts.Schema + "_settled", done: make(chan struct{})}
	s.q = newQueries(s.table)
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.notify = newListener(bg, pool.Config().ConnConfig, s.channel)
	go func() {
		defer close(s.done)
		if opts.SweepInterval > 0 {
			s.sweepEvery(bg, opts.SweepInterval)
		}
	}()
	return s, nil
}

// Close stops the sweep and the listener. It does not close the pool.
func (s *Store) Close() error {
	s.stop()
	<-s.done
	s.notify.wait()
	return nil
}

// SynchronousCommit returns the database's synchronous_commit: a commit acknowledged under "off"
// (or "local" on a standby setup) may be lost in a crash, and with it a receipt whose success
// reached a client. The command warns at start when it is "off".
func (s *Store) SynchronousCommit(ctx context.Context) (string, error) {
	var v string
	if err := s.pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
		return "", fmt.Errorf("pgstore: synchronous_commit: %w", err)
	}
	return v, nil
}

// Claim implements record.Store.Claim: it reads the record, and inserts one when there is none; a
// replay is the read alone. A record that must change (expired, this very claim sent again, a
// lapsed lease, a duplicate that marks it watched) takes a second, guarded statement, and a guard
// that no longer holds (a concurrent transition) runs the claim again.
func (s *Store) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (claimed bool, state string, stored record.Payload, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease), record.Positive("ttl", ttl)); err != nil {
		return false, "", record.Payload{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	leaseMs, ttlMs := record.Millis(lease), record.Millis(ttl)
	for range maxAttempts {
		var r row
		err := s.pool.QueryRow(ctx, s.q.read, []byte(key)).
			Scan(&r.state, &r.owner, &r.claim, &r.settle, &r.watched, &r.expired, &r.lapsed)
		if errors.Is(err, pgx.ErrNoRows) {
			inserted, err := s.exec(ctx, s.q.insert, []byte(key), owner, payload, leaseMs, ttlMs)
			if err != nil {
				return false, "", record.Payload{}, wrap("claim", key, err)
			}
			if inserted {
				return true, record.StateInProgress, record.Payload{Claim: payload}, nil
			}
			continue // a concurrent claim inserted it: read it
		}
		if err != nil {
			return false, "", record.Payload{}, wrap("claim", key, err)
		}
		var done bool
		switch {
		case r.expired:
			done, err = s.exec(ctx, s.q.claimExpired, []byte(key), owner, payload, leaseMs, ttlMs)
			claimed, state, stored = true, record.StateInProgress, record.Payload{Claim: payload}
		case r.state == record.StateInProgress && r.owner == owner && string(r.claim) == string(payload):
			// This very claim, sent again after its answer was lost (docs/guarantees.md#lost-replies).
			done, err = s.exec(ctx, s.q.claimAgain, []byte(key), owner, payload, leaseMs)
			claimed, state, stored = true, record.StateInProgress, record.Payload{Claim: payload}
		case r.state == record.StateInProgress && r.lapsed:
			done, err = s.exec(ctx, s.q.claimLapsed, []byte(key), r.owner)
			state, stored = record.StateUnknown, r.payload()
		case r.state == record.StateInProgress && !r.watched:
			// A duplicate: the settle must announce itself (notify.go). Best effort: a lost mark
			// costs a waiter a poll.
			_, _ = s.exec(ctx, s.q.watch, []byte(key), r.owner)
			return false, r.state, r.payload(), nil
		default:
			return false, r.state, r.payload(), nil
		}
		if err != nil {
			return false, "", record.Payload{}, wrap("claim", key, err)
		}
		if done {
			return claimed, state, stored, nil
		}
	}
	return false, "", record.Payload{}, wrap("claim", key, errContended)
}

// maxAttempts bounds the rounds of Claim and Reclaim against concurrent transitions of one key.
const maxAttempts = 16

// errContended is a Claim that concurrent transitions of its key kept from deciding.
var errContended = errors.New("the record changed under every attempt")

// row is what Claim reads of a record.
type row struct {
	state, owner    string
	claim, settle   []byte // claim nil when settle is set: the read leaves it out (queries.go)
	watched         bool
	expired, lapsed bool
}

func (r *row) payload() record.Payload { return record.Payload{Claim: r.claim, Settle: r.settle} }

// exec runs a guarded statement and reports whether its guard held (a row changed).
func (s *Store) exec(ctx context.Context, sql string, args ...any) (bool, error) {
	tag, err := s.pool.Exec(ctx, sql, args...)
	return err == nil && tag.RowsAffected() > 0, err
}

// Reclaim implements record.Store.Reclaim.
func (s *Store) Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease), record.Positive("ttl", ttl)); err != nil {
		return false, fmt.Errorf("pgstore: reclaim: %w", err)
	}
	leaseMs := record.Millis(lease)
	if ok, err = s.exec(ctx, s.q.claimAgain, []byte(key), owner, payload, leaseMs); err != nil || ok {
		return ok, wrap("reclaim", key, err) // this very reclaim, sent again: the lease from now
	}
	ok, err = s.exec(ctx, s.q.reclaim, []byte(key), from, owner, payload, leaseMs, record.Millis(ttl))
	return ok, wrap("reclaim", key, err)
}

// Renew implements record.Store.Renew: the owner of a record still in_progress renews it, even
// after its lease lapsed, as long as no Claim observed the lapse.
func (s *Store) Renew(ctx context.Context, key, owner string, lease time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease)); err != nil {
		return false, fmt.Errorf("pgstore: renew: %w", err)
	}
	ok, err = s.exec(ctx, s.q.renew, []byte(key), owner, record.Millis(lease))
	return ok, wrap("renew", key, err)
}

// Commit implements record.Store.Commit; ttl 0 keeps the claim's expiry.
func (s *Store) Commit(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.NotNegative("ttl", ttl)); err != nil {
		return false, fmt.Errorf("pgstore: commit: %w", err)
	}
	return s.finish(ctx, "commit", key, owner, record.StateCommitted, settle, ttl)
}

// MarkUnknown implements record.Store.MarkUnknown.
func (s *Store) MarkUnknown(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("ttl", ttl)); err != nil {
		return false, fmt.Errorf("pgstore: mark unknown: %w", err)
	}
	return s.finish(ctx, "mark unknown", key, owner, record.StateUnknown, settle, ttl)
}

// finish settles the record owned by owner to state with settle (finishSQL), announcing it to
// waiting duplicates when one marked it watched.
func (s *Store) finish(ctx context.Context, op, key, owner, state string, settle []byte, ttl time.Duration) (bool, error) {
	var changed int
	err := s.pool.QueryRow(ctx, s.q.finish, []byte(key), owner, state, settle, record.Millis(ttl), s.channel).Scan(&changed)
	if err != nil {
		return false, wrap(op, key, err)
	}
	return changed > 0, nil
}

// Release implements record.Store.Release: a missing or expired record is released already.
func (s *Store) Release(ctx context.Context, key, owner string) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner); err != nil {
		return false, fmt.Errorf("pgstore: release: %w", err)
	}
	var deleted int
	var exists bool
	if err := s.pool.QueryRow(ctx, s.q.release, []byte(key), owner, s.channel).Scan(&deleted, &exists); err != nil {
		return false, wrap("release", key, err)
	}
	return deleted > 0 || !exists, nil
}

// Get implements record.Store.Get: an in_progress record whose lease lapsed is reported
// outcome_unknown, an expired one absent.
func (s *Store) Get(ctx context.Context, key string) (state string, stored record.Payload, err error) {
	if err := record.CheckKeyArg(ctx, key); err != nil {
		return "", record.Payload{}, fmt.Errorf("pgstore: get: %w", err)
	}
	var lapsed bool
	err = s.pool.QueryRow(ctx, s.q.get, []byte(key)).Scan(&state, &lapsed, &stored.Claim, &stored.Settle)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", record.Payload{}, nil
	case err != nil:
		return "", record.Payload{}, wrap("get", key, err)
	case lapsed:
		state = record.StateUnknown // its executor is gone; a Claim will store it so
	}
	return state, stored, nil
}

// ListUnknown implements record.Store.ListUnknown from the partial index of outcome_unknown rows.
func (s *Store) ListUnknown(ctx context.Context, prefix, cursor string, limit int) (keys []string, stored []record.Payload, next string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, "", fmt.Errorf("pgstore: list: %w", err)
	}
	if limit <= 0 {
		return nil, nil, "", errors.New("pgstore: list: limit must be positive")
	}
	rows, err := s.pool.Query(ctx, s.q.list, []byte(prefix), []byte(cursor), limit+1)
	if err != nil {
		return nil, nil, "", fmt.Errorf("pgstore: list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k []byte
		var p record.Payload
		if err := rows.Scan(&k, &p.Claim, &p.Settle); err != nil {
			return nil, nil, "", fmt.Errorf("pgstore: list: %w", err)
		}
		keys, stored = append(keys, string(k)), append(stored, p)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, "", fmt.Errorf("pgstore: list: %w", err)
	}
	if len(keys) > limit {
		keys, stored = keys[:limit], stored[:limit]
		next = keys[limit-1]
	}
	return keys, stored, next, nil
}

// Delete implements record.Store.Delete; existed is false for an expired record, which it removes
// all the same.
func (s *Store) Delete(ctx context.Context, key string) (existed bool, err error) {
	if err := record.CheckKeyArg(ctx, key); err != nil {
		return false, fmt.Errorf("pgstore: delete: %w", err)
	}
	err = s.pool.QueryRow(ctx, s.q.delete, []byte(key)).Scan(&existed)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return existed, wrap("delete", key, err)
}

// Ping implements record.Store.Ping: the database answers, and the records table is there.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, s.q.ping); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	return nil
}

// wrap adds the operation and key to err; nil stays nil.
func wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("pgstore: %s %q: %w", op, key, err)
}
