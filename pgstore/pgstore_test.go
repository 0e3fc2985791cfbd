package pgstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: fmt.Sprintf("t%d", schemas.Add(1))})
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
	a, err := pgstore.New(ctx, pool, pgstore.Options{Schema: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if claimed, _, _, err := a.Claim(ctx, "k", "o", []byte("p"), time.Minute, time.Hour); !claimed || err != nil {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	b, err := pgstore.New(ctx, pool, pgstore.Options{Schema: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if state, _, err := b.Get(ctx, "k"); state != record.StateInProgress || err != nil {
		t.Errorf("Get on the second store = %q, %v", state, err)
	}
	if _, err := pgstore.New(ctx, pool, pgstore.Options{Schema: "Bad-Name"}); err == nil {
		t.Error("New with schema Bad-Name: no error")
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
