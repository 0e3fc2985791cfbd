package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/gateway"
)

// floor is a reference point, not a gateway: the bare proxy plus the store round trips that the
// contract needs and nothing else, to show how close to the budget any gateway can get on this
// machine with that store. A request's body is read whole; the store claims the key (storing the
// request body) or reads what it holds; a first execution is proxied and its response body stored
// before the client gets it; a known key is answered from the store (a replay). No fingerprint,
// record encoding, fencing, lease, logging, metrics or tracing.
type floor struct {
	proxy *httputil.ReverseProxy
	store floorStore
}

// floorStore keeps a floor's keys.
type floorStore interface {
	// claim stores body under key unless key is known, and returns what a known key holds.
	claim(ctx context.Context, key string, body []byte) (stored []byte, known bool, err error)
	// commit stores the response body under a key claim stored.
	commit(ctx context.Context, key string, body []byte) error
}

// floorKey is the context key of the key of a request being executed.
type floorKey struct{}

func newFloor(target *url.URL, store floorStore) *floor {
	f := &floor{store: store}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:      gateway.NewTransport(),
		ModifyResponse: f.commit,
	}
	return f
}

func (f *floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := "floor:" + r.Header.Get("Idempotency-Key")
	stored, known, err := f.store.claim(r.Context(), key, body)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case !known: // claimed: execute
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		w.Header().Set("Idempotency-Decision", "execute")
		f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), floorKey{}, key)))
	default: // known: replay what it holds
		h := w.Header()
		h.Set("Idempotency-Decision", "replay")
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(stored)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(stored)
	}
}

// commit stores the response body before the client gets it.
func (f *floor) commit(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	key, _ := resp.Request.Context().Value(floorKey{}).(string)
	if err := f.store.commit(resp.Request.Context(), key, body); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// floorTTL is how long the Redis floor keeps a key.
const floorTTL = time.Hour

// redisFloor is the floor on Redis: one SET … NX GET claims the key or reads what it holds, one
// SET commits.
type redisFloor struct{ rdb *redis.Client }

func (s redisFloor) claim(ctx context.Context, key string, body []byte) ([]byte, bool, error) {
	stored, err := s.rdb.SetArgs(ctx, key, body, redis.SetArgs{Mode: "NX", Get: true, TTL: floorTTL}).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	return stored, err == nil, err
}

func (s redisFloor) commit(ctx context.Context, key string, body []byte) error {
	return s.rdb.Set(ctx, key, body, floorTTL).Err()
}

// postgresFloor is the floor on PostgreSQL, with the statements pgstore sends on a table of its
// own: a read (a replay is this statement alone), an insert of a new key (a commit), and an
// update with the answer (a commit), each one round trip, under the server's synchronous_commit.
// No expiry, lease or owner: the rows are the key, the request body and the answer, stored as the
// records table stores them (whole in the row up to a page: pgstore's schema version 2), so that
// PostgreSQL does not compress the harness's padding away where the store would write it out.
type postgresFloor struct{ pool *pgxpool.Pool }

// postgresFloorTable is the floor's table, in the idembench schema, made anew at start.
const postgresFloorTable = `idembench.floor`

func newPostgresFloor(ctx context.Context, pool *pgxpool.Pool) (postgresFloor, error) {
	_, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS idembench;
DROP TABLE IF EXISTS `+postgresFloorTable+`;
CREATE TABLE `+postgresFloorTable+` (key text PRIMARY KEY, claim bytea NOT NULL, answer bytea) WITH (toast_tuple_target = 8160)`)
	return postgresFloor{pool: pool}, err
}

func (s postgresFloor) claim(ctx context.Context, key string, body []byte) ([]byte, bool, error) {
	for {
		var stored []byte
		err := s.pool.QueryRow(ctx, `SELECT coalesce(answer, claim) FROM `+postgresFloorTable+` WHERE key = $1`, key).Scan(&stored)
		if !errors.Is(err, pgx.ErrNoRows) {
			return stored, err == nil, err
		}
		tag, err := s.pool.Exec(ctx, `INSERT INTO `+postgresFloorTable+` (key, claim) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, body)
		if err != nil || tag.RowsAffected() == 1 {
			return nil, false, err
		}
		// Another request inserted the key meanwhile: read it again.
	}
}

func (s postgresFloor) commit(ctx context.Context, key string, body []byte) error {
	_, err := s.pool.Exec(ctx, `UPDATE `+postgresFloorTable+` SET answer = $2 WHERE key = $1`, key, body)
	return err
}
