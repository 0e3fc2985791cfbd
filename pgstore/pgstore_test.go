package pgstore_test

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/pgtest"
	"github.com/idemgateway/idemgateway/pgstore"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/record/recordtest"
)

var ctx = context.Background()

// newPool is a pool on srv, closed when t ends.
func newPool(t *testing.T, srv *pgtest.Server) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// schemas numbers the schemas of one test binary's subtests.
var schemas atomic.Int64

// newStore is a store on pool in a schema of its own, closed when t ends.
func newStore(t *testing.T, pool *pgxpool.Pool) *pgstore.Store {
	t.Helper()
	return openStore(t, pool, fmt.Sprintf("t%d", schemas.Add(1)))
}

// openStore is a store on pool in schema, closed when t ends.
func openStore(t *testing.T, pool *pgxpool.Pool, schema string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// subject is the conformance suite's view of s: the time left before a record expires, read on
// the database's clock; the clock cannot be moved, so the suite lets time pass.
func subject(s *pgstore.Store, pool *pgxpool.Pool) recordtest.Subject {
	return recordtest.Subject{Store: s, TTL: func(key string) (time.Duration, error) {
		var ms float64
		err := pool.QueryRow(ctx, `SELECT extract(epoch FROM expires_at - now()) * 1000 FROM `+pgstore.Table(s)+` WHERE key = $1`, []byte(key)).Scan(&ms)
		if err == pgx.ErrNoRows {
			err = fmt.Errorf("no record at %q", key)
		}
		return time.Duration(ms * float64(time.Millisecond)), err
	}}
}

// TestConformance runs the suite of every store on one PostgreSQL server, a schema per subtest.
func TestConformance(t *testing.T) {
	srv := pgtest.Start(t)
	pool := newPool(t, srv)
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		return subject(newStore(t, pool), pool)
	})
}

// TestNewStoreTwice: a second store on the same schema finds it migrated, and keeps its records.
func TestNewStoreTwice(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pool := newPool(t, srv)
	a := openStore(t, pool, "shared")
	if claimed, _, _, err := a.Claim(ctx, "k", "o", []byte("p"), time.Minute, time.Hour); !claimed || err != nil {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	b := openStore(t, pool, "shared")
	if state, _, err := b.Get(ctx, "k"); state != record.StateInProgress || err != nil {
		t.Errorf("Get on the second store = %q, %v", state, err)
	}
	if _, err := pgstore.New(ctx, pool, pgstore.Options{Schema: "Bad-Name"}); err == nil {
		t.Error("New with schema Bad-Name: no error")
	}
}

// TestMigrateFromVersion1: a schema an earlier build made (version 1) is migrated at start to
// this build's version, its rows kept, its table keeping rows whole up to a page.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pool := newPool(t, srv)
	for _, sql := range []string{
		`CREATE SCHEMA old`,
		`CREATE TABLE old.schema_version (version integer NOT NULL)`,
		`INSERT INTO old.schema_version VALUES (1)`,
		strings.ReplaceAll(pgstore.Migrations()[0], "{s}", "old"),
		`INSERT INTO old.records (key, state, owner, lease_until, expires_at, claim) VALUES ('default/t/k', 'in_progress', 'o', now() + interval '1 minute', now() + interval '1 hour', 'p')`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	s := openStore(t, pool, "old")
	if state, _, err := s.Get(ctx, "default/t/k"); state != record.StateInProgress || err != nil {
		t.Errorf("the version 1 row after the migration: %q, %v", state, err)
	}
	var version int
	var options []string
	if err := pool.QueryRow(ctx, `SELECT (SELECT version FROM old.schema_version), (SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'old.records'::regclass)`).Scan(&version, &options); err != nil {
		t.Fatal(err)
	}
	if version != pgstore.SchemaVersion || strings.Join(options, ",") != "toast_tuple_target=8160" {
		t.Errorf("after the migration: version %d, options %q; want %d, toast_tuple_target=8160", version, options, pgstore.SchemaVersion)
	}
}

// TestLongDurations: leases and ttls up to a year (routes.MaxTTL) are kept, beyond what a 32-bit
// count of milliseconds holds.
func TestLongDurations(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pool := newPool(t, srv)
	s := newStore(t, pool)
	sub := subject(s, pool)
	const year = 365 * 24 * time.Hour
	for i, settle := range []func(key string) (bool, error){
		func(key string) (bool, error) { return s.Commit(ctx, key, "o", []byte("receipt"), year) },
		func(key string) (bool, error) { return s.MarkUnknown(ctx, key, "o", []byte("why"), year) },
	} {
		key := fmt.Sprint("k", i)
		if claimed, _, _, err := s.Claim(ctx, key, "o", []byte("p"), year, year); !claimed || err != nil {
			t.Fatalf("Claim for a year = %v, %v", claimed, err)
		}
		if ok, err := settle(key); !ok || err != nil {
			t.Fatalf("settle %d for a year = %v, %v", i, ok, err)
		}
		if left, err := sub.TTL(key); err != nil || left < year-time.Hour {
			t.Errorf("settle %d: %v left (%v), want about a year", i, left, err)
		}
	}
}

// ticketJSON is n bytes of JSON text shaped like a ticket's (words, ids, timestamps), of seed:
// payloads that compress as real records do, not as zeros do.
func ticketJSON(n int, seed int64) []byte {
	rng := rand.New(rand.NewSource(seed))
	words := []string{"disk", "full", "on", "db", "printer", "fire", "customer", "escalation", "priority", "high", "refund", "order", "shipped", "timeout", "agent"}
	b := []byte(`{"tickets":[`)
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, `{"id":"T-%d","summary":"%s %s %s","created":"2026-12-%02dT%02d:%02d:%02dZ","customer":"c-%d"},`,
			rng.Intn(100000), words[rng.Intn(len(words))], words[rng.Intn(len(words))], words[rng.Intn(len(words))],
			1+rng.Intn(28), rng.Intn(24), rng.Intn(60), rng.Intn(60), rng.Intn(10000))
	}
	return b[:n]
}

// TestWorkPerExecution states the PostgreSQL work of a first execution (docs/stores.md#postgresql):
// three statements, one round trip each (the claim's read and insert, the commit's update), and
// the WAL they write, measured here with a claim part and a settle part of the sizes a 1 KiB request
// and answer make (1.2 KB and 1.3 KB of ticket-shaped JSON). A replay is one statement that writes
// nothing (once the page's old row versions were pruned by a first read). Statements are counted
// at the pool, by the key they name: checked, as is the replay's WAL.
func TestWorkPerExecution(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	statements := &keyStatements{}
	cfg.ConnConfig.Tracer = statements
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := newStore(t, pool)
	claim, settle := ticketJSON(1200, 1), ticketJSON(1300, 2)
	lsn := func() (n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const n = 200
	before := lsn()
	for i := range n {
		key := fmt.Sprint("k", i)
		if claimed, _, _, err := s.Claim(ctx, key, "o", claim, time.Minute, 24*time.Hour); !claimed || err != nil {
			t.Fatalf("Claim = %v, %v", claimed, err)
		}
		if ok, err := s.Commit(ctx, key, "o", settle, 0); !ok || err != nil {
			t.Fatalf("Commit = %v, %v", ok, err)
		}
	}
	perExecution := (lsn() - before) / n
	executions := statements.take()
	replays := func() {
		for i := range n {
			if _, state, _, err := s.Claim(ctx, fmt.Sprint("k", i), "other", claim, time.Minute, 24*time.Hour); state != record.StateCommitted || err != nil {
				t.Fatalf("replay Claim = %q, %v", state, err)
			}
		}
	}
	replays() // the first reads prune the row versions the commits left, which PostgreSQL logs
	before = lsn()
	replays()
	perReplay := (lsn() - before) / n
	replayStatements := statements.take()
	t.Logf("WAL per first execution: %d bytes (payload %d bytes); per replay: %d bytes", perExecution, len(claim)+len(settle), perReplay)
	if executions != 3*n {
		t.Errorf("%d first executions sent %d statements, want 3 each", n, executions)
	}
	if replayStatements != 2*n {
		t.Errorf("%d replays sent %d statements, want 1 each", 2*n, replayStatements)
	}
	if perReplay > 0 {
		t.Errorf("a replay wrote %d bytes of WAL, want none", perReplay)
	}
}

// keyStatements counts the statements sent through a pool that name a key (their first argument
// is bytes), as a pgx tracer: the store's transitions, not the test's own queries.
type keyStatements struct{ n atomic.Int64 }

func (k *keyStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if len(data.Args) > 0 {
		if _, ok := data.Args[0].([]byte); ok {
			k.n.Add(1)
		}
	}
	return ctx
}

func (k *keyStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the count since the last take.
func (k *keyStatements) take() int64 { return k.n.Swap(0) }

// TestClaimMeetsAConcurrentInsert: a claim whose read finds no row while another transaction
// inserts the key (not yet committed) waits at its own insert for that transaction, finds the key
// taken once it commits, reads the row again and answers it: a duplicate of the other claim, not
// a second owner and not an error. The other transaction commits only once the claim waits on its
// lock (pg_stat_activity), so the interleaving is the one named, every run.
func TestClaimMeetsAConcurrentInsert(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pool := newPool(t, srv)
	s := newStore(t, pool)
	claimWhileHeld(t, pool, s, `INSERT INTO `+pgstore.Table(s)+` (key, state, owner, lease_until, expires_at, claim, watched)
VALUES ($1, 'in_progress', 'theirs', now() + interval '1 minute', now() + interval '1 hour', $2, false)`, []any{[]byte("k"), []byte("their claim")},
		"INSERT", record.StateInProgress, record.Payload{Claim: []byte("their claim")})
}

// TestClaimMeetsAConcurrentTakeover: a claim that reads an expired row while another transaction
// takes the key over (its UPDATE made, not yet committed) waits at its own UPDATE for that
// transaction; once it commits, the claim's guard (the row still expired) no longer holds, and the
// claim reads the row again and answers the other claim's record: one owner, never two. The other
// transaction commits only once the claim waits on its lock (pg_stat_activity).
func TestClaimMeetsAConcurrentTakeover(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pool := newPool(t, srv)
	s := newStore(t, pool)
	if _, err := pool.Exec(ctx, `INSERT INTO `+pgstore.Table(s)+` (key, state, owner, lease_until, expires_at, claim, settle, watched)
VALUES ($1, 'committed', 'old', now() - interval '2 hours', now() - interval '1 hour', $2, $3, false)`, []byte("k"), []byte("old claim"), []byte("old settle")); err != nil {
		t.Fatal(err)
	}
	claimWhileHeld(t, pool, s, `UPDATE `+pgstore.Table(s)+` SET state = 'in_progress', owner = 'theirs',
	lease_until = now() + interval '1 minute', expires_at = now() + interval '1 hour', claim = $2, settle = NULL
WHERE key = $1`, []any{[]byte("k"), []byte("their claim")},
		"UPDATE", record.StateInProgress, record.Payload{Claim: []byte("their claim")})
}

// claimWhileHeld runs held (with args) on key k's row in a transaction of its own and, while that
// transaction holds the row, claims k as "mine"; it commits the transaction once the claim's
// statement, starting with verb, waits on its lock (pg_stat_activity), and checks that the claim
// answers the record held left: not claimed, state, stored, no error.
func claimWhileHeld(t *testing.T, pool *pgxpool.Pool, s *pgstore.Store, held string, args []any, verb, state string, stored record.Payload) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, held, args...); err != nil {
		t.Fatal(err)
	}
	type result struct {
		claimed bool
		state   string
		stored  record.Payload
		err     error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.claimed, r.state, r.stored, r.err = s.Claim(ctx, "k", "mine", []byte("my claim"), time.Minute, time.Hour)
		done <- r
	}()
	eventually.True(t, "the claim's "+verb+" to wait for the other transaction", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`, verb+" %").Scan(&n)
		return err == nil && n > 0
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.claimed || r.state != state || string(r.stored.Claim) != string(stored.Claim) || string(r.stored.Settle) != string(stored.Settle) {
		t.Errorf("Claim = %v, %q, %q / %q, %v; want not claimed, %q, %q / %q, no error",
			r.claimed, r.state, r.stored.Claim, r.stored.Settle, r.err, state, stored.Claim, stored.Settle)
	}
}

// TestClaimMeetsACommitOfALapsedLease: a duplicate that reads a lapsed lease while its owner
// commits (the commit made, not yet committed) waits at its own guarded UPDATE; once the commit
// is, the lease's lapse no longer holds, and the duplicate reads again and answers the receipt:
// a replay, not an outcome_unknown that would send an operator after a committed call.
func TestClaimMeetsACommitOfALapsedLease(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pool := newPool(t, srv)
	s := newStore(t, pool)
	if _, err := pool.Exec(ctx, `INSERT INTO `+pgstore.Table(s)+` (key, state, owner, lease_until, expires_at, claim, watched)
VALUES ($1, 'in_progress', 'theirs', now() - interval '1 second', now() + interval '1 hour', $2, false)`, []byte("k"), []byte("their claim")); err != nil {
		t.Fatal(err)
	}
	claimWhileHeld(t, pool, s, `UPDATE `+pgstore.Table(s)+` SET state = 'committed', settle = $2 WHERE key = $1`,
		[]any{[]byte("k"), []byte("their receipt")},
		"UPDATE", record.StateCommitted, record.Payload{Settle: []byte("their receipt")})
}

// TestPrecreatedSchema (docs/deploy.md): a role without CREATE on the database opens a store in a
// schema created for it beforehand, on which it has USAGE and CREATE, and is refused one it would
// have to create; a schema name PostgreSQL keeps (pg_…) is refused before any connection.
func TestPrecreatedSchema(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	admin := newPool(t, srv)
	if _, err := admin.Exec(ctx, `CREATE ROLE gw LOGIN; CREATE SCHEMA pre; GRANT USAGE, CREATE ON SCHEMA pre TO gw`); err != nil {
		t.Fatal(err)
	}
	gw, err := pgxpool.New(ctx, strings.Replace(srv.URL(), "postgres://postgres@", "postgres://gw@", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	s, err := pgstore.New(ctx, gw, pgstore.Options{Schema: "pre"})
	if err != nil {
		t.Fatalf("New in the schema created for the role: %v", err)
	}
	defer s.Close()
	if claimed, _, _, err := s.Claim(ctx, "k", "o", []byte("p"), time.Minute, time.Hour); !claimed || err != nil {
		t.Errorf("Claim = %v, %v", claimed, err)
	}
	if _, err := pgstore.New(ctx, gw, pgstore.Options{Schema: "other"}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("New in a schema the role may not create = %v, want permission denied", err)
	}
	if _, err := pgstore.New(ctx, gw, pgstore.Options{Schema: "pg_temp"}); err == nil || !strings.Contains(err.Error(), "not starting with pg_") {
		t.Errorf("New in schema pg_temp = %v, want it refused", err)
	}
}

// TestParseConfig: the pool is 10 connections per CPU unless the connection string sets
// pool_max_conns; a string pgx cannot parse is an error that hides the password.
func TestParseConfig(t *testing.T) {
	t.Parallel()
	cfg, err := pgstore.ParseConfig("postgres://gw:pw@db:5432/agents")
	if err != nil || cfg.MaxConns != int32(10*runtime.GOMAXPROCS(0)) {
		t.Errorf("ParseConfig = %v, %v; want %d connections", cfg.MaxConns, err, 10*runtime.GOMAXPROCS(0))
	}
	if cfg, err = pgstore.ParseConfig("postgres://gw:pw@db:5432/agents?pool_max_conns=7"); err != nil || cfg.MaxConns != 7 {
		t.Errorf("with pool_max_conns=7: %v, %v", cfg.MaxConns, err)
	}
	if _, err := pgstore.ParseConfig("postgres://gw:s3cret@db:notaport/agents"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a bad port: %v, want an error without the password", err)
	}
}
