package gateway_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
)

// TestStoreFailsAtCommit (docs/unknown-outcomes.md, "Executing a call"): the store fails while the upstream
// acts, so the receipt cannot be stored. The client still gets the upstream's answer, an error
// line names the key, and the record stays in_progress, then reads outcome_unknown once its
// lease lapses: never free, never committed, so no retry executes again.
func TestStoreFailsAtCommit(t *testing.T) {
	t.Parallel()
	const key, skey = "k", "default/create_ticket/k"
	// failAtCommit holds a call upstream, breaks the store, releases the call and checks the
	// client's answer and the log. It returns the upstream.
	failAtCommit := func(t *testing.T, store record.Store, lease time.Duration, breakStore func()) *heldUpstream {
		t.Helper()
		up := newHeldUpstream(t, nil)
		logs := &testlog.Buffer{}
		srv, _, _ := newGatewayOn(t, store, ticketsYAML(up.URL, "{lock_lease: "+lease.String()+"}"),
			gateway.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		call := sendAsync(srv.URL, key, `{}`)
		up.awaitCalls(t, 1)
		breakStore()
		up.releaseAll()
		if r := await(t, call, "the call"); r.String() != "201 execute" || r.body != `{"id":"T-1"}` {
			t.Fatalf("the client: %s %s; want the upstream's 201 T-1", r, r.body)
		}
		if !hasLog(t, logs, "ERROR", "record not settled: store failed", key) {
			t.Errorf("no error line naming key %s:\n%s", key, logs.String())
		}
		return up
	}
	// retry sends the call again to a gateway on store and returns its answer.
	retry := func(t *testing.T, url string) reply {
		t.Helper()
		r, err := send(url, key, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		const lease = time.Second
		c := newClock()
		dir := t.TempDir()
		open := func() *boltstore.Store {
			store, err := boltstore.Open(dir, boltstore.Options{Now: c.now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			return store
		}
		store := open()
		up := failAtCommit(t, store, lease, func() { _ = store.Close() })

		store = open() // the store is back
		srv, _, _ := newGatewayOn(t, store, ticketsYAML(up.URL, "{lock_lease: 1s}"), gateway.Options{})
		if state, _, err := store.Get(context.Background(), skey); err != nil || state != record.StateInProgress {
			t.Fatalf("record after the failed commit: %q, %v; want in_progress", state, err)
		}
		if r := retry(t, srv.URL); r.String() != "409 in_progress" {
			t.Fatalf("a retry within the lease: %s, want 409 in_progress", r)
		}
		c.advance(2 * lease)
		if r := retry(t, srv.URL); r.String() != "409 outcome_unknown" {
			t.Fatalf("a retry after the lease: %s, want 409 outcome_unknown", r)
		}
		if state, _, err := store.Get(context.Background(), skey); err != nil || state != record.StateUnknown {
			t.Fatalf("record after the lease: %q, %v; want outcome_unknown", state, err)
		}
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
	})

	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		const lease = 500 * time.Millisecond
		store, redisSrv := openRedisServer(t, redistest.Options{AppendOnly: true})
		up := failAtCommit(t, store, lease, redisSrv.Stop)

		redisSrv.Restart() // the store is back, with what it had written (AOF)
		raw := rawRedis(t, redisSrv)
		// The stored state, whatever the lease: Get would already report a lapsed lease.
		if state, err := raw.HGet(context.Background(), redisRecordKey(skey), "state").Result(); err != nil || state != record.StateInProgress {
			t.Fatalf("record after the failed commit: %q, %v; want in_progress", state, err)
		}
		srv, _, _ := newGatewayOn(t, redisStoreOn(t, redisSrv), ticketsYAML(up.URL, "{lock_lease: 500ms}"), gateway.Options{})
		// Retries are refused while the lease holds, then meet outcome_unknown once it lapsed
		// (on Redis's clock).
		waitFor(t, func() bool {
			r := retry(t, srv.URL)
			if r.String() != "409 in_progress" && r.String() != "409 outcome_unknown" {
				t.Fatalf("a retry: %s, want 409 in_progress or outcome_unknown", r)
			}
			return r.decision == gateway.DecisionOutcomeUnknown
		})
		if state, _, err := store.Get(context.Background(), skey); err != nil || state != record.StateUnknown {
			t.Fatalf("record after the lease: %q, %v; want outcome_unknown", state, err)
		}
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
	})

	// Redis reachable but refusing the commit's write (out of memory: HSET is denied, DEL is
	// not): the record must stay in_progress, never be freed because the write failed.
	t.Run("redis refuses the write", func(t *testing.T) {
		t.Parallel()
		store, redisSrv := openRedisServer(t, redistest.Options{})
		raw := rawRedis(t, redisSrv)
		ctx := context.Background()
		up := failAtCommit(t, store, time.Minute, func() { setMaxmemory(t, raw, "1") })
		setMaxmemory(t, raw, "0")
		if state, err := raw.HGet(ctx, redisRecordKey(skey), "state").Result(); err != nil || state != record.StateInProgress {
			t.Fatalf("record after the refused commit: %q, %v; want in_progress", state, err)
		}
		srv, _, _ := newGatewayOn(t, redisStoreOn(t, redisSrv), ticketsYAML(up.URL, "{lock_lease: 1m}"), gateway.Options{})
		if r := retry(t, srv.URL); r.String() != "409 in_progress" {
			t.Fatalf("a retry: %s, want 409 in_progress", r)
		}
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
	})
}
