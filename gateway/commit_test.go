package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// TestStoreFailsAtCommit (docs/guarantees.md, "Pending receipts"; docs/contract.md §8): the store
// goes down while the upstream acts, so the receipt cannot be stored at once. The commit is tried
// again with backoff while the client waits, up to the route's upstream timeout:
//
//   - back within the wait: the client's answer comes once the receipt is stored, with no
//     Idempotency-Receipt header;
//   - pending: the store is still down when the wait ends: the client gets the upstream's answer
//     with Idempotency-Receipt: pending, an error line names the key, and
//     idemgateway_receipts_pending{op="commit"} counts it; once the store is back the gateway
//     stores the receipt in the background, and a retry replays it;
//   - Redis refuses the write (out of memory: HSET is denied, DEL is not): meanwhile a retry gets
//     409 in_progress, never a freed key.
//
// Up×1 each, on the real embedded store (closed, opened again) and a real redis-server (stopped,
// restarted from its AOF).
func TestStoreFailsAtCommit(t *testing.T) {
	t.Parallel()
	const key, skey = "k", "default/create_ticket/k"
	// replays checks that a retry replays the first answer without calling the upstream again.
	replays := func(t *testing.T, url string, up *heldUpstream) {
		t.Helper()
		r, err := send(url, key, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if r.String() != "201 replay" || r.body != `{"id":"T-1"}` {
			t.Fatalf("a retry: %s %s, want the replay of 201 T-1", r, r.body)
		}
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
	}
	committed := func(store record.Store) func() bool {
		return func() bool {
			state, _, err := store.Get(context.Background(), skey)
			return err == nil && state == record.StateCommitted
		}
	}

	t.Run("back within the wait", func(t *testing.T) {
		t.Parallel()
		forEachOutage(t, func(t *testing.T, store record.Store, down, back func()) {
			up := newHeldUpstream(t, nil)
			reg := gateway.NewRegistry()
			srv, _, gw := newGatewayOn(t, store, settleYAML(up.URL, 20*time.Second, 10*time.Second), gateway.Options{Metrics: reg})
			gw.SetSettleRetry(10*time.Millisecond, 100*time.Millisecond)
			call := sendAsync(srv.URL, key, `{}`)
			up.awaitCalls(t, 1)
			down()
			up.releaseAll()
			eventually.True(t, "the commit to fail on the store", func() bool {
				return metricValue(t, reg, "idemgateway_store_duration_seconds", "op", "commit", "result", "error") >= 1
			})
			back()
			r := await(t, call, "the call")
			if r.String() != "201 execute" || r.body != `{"id":"T-1"}` || r.header.Get("Idempotency-Receipt") != "" {
				t.Fatalf("the client: %s %s, Idempotency-Receipt %q; want the upstream's 201 T-1, no Idempotency-Receipt",
					r, r.body, r.header.Get("Idempotency-Receipt"))
			}
			if !committed(store)() {
				t.Fatal("the record is not committed when the client gets its answer")
			}
			replays(t, srv.URL, up)
		})
	})

	t.Run("pending", func(t *testing.T) {
		t.Parallel()
		forEachOutage(t, func(t *testing.T, store record.Store, down, back func()) {
			up := newHeldUpstream(t, nil)
			reg := gateway.NewRegistry()
			logs := &testlog.Buffer{}
			srv, _, gw := newGatewayOn(t, store, settleYAML(up.URL, time.Second, 10*time.Second),
				gateway.Options{Metrics: reg, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			gw.SetSettleRetry(10*time.Millisecond, 100*time.Millisecond)
			call := sendAsync(srv.URL, key, `{}`)
			up.awaitCalls(t, 1)
			down()
			up.releaseAll()
			r := await(t, call, "the call")
			if r.String() != "201 execute" || r.body != `{"id":"T-1"}` || r.header.Get("Idempotency-Receipt") != "pending" {
				t.Fatalf("the client: %s %s, Idempotency-Receipt %q; want the upstream's 201 T-1, pending",
					r, r.body, r.header.Get("Idempotency-Receipt"))
			}
			if !hasLog(t, logs, "ERROR", "record not settled: store failed", key) {
				t.Errorf("no error line naming key %s:\n%s", key, logs.String())
			}
			if n := metricValue(t, reg, "idemgateway_receipts_pending", "op", "commit"); n != 1 {
				t.Errorf("idemgateway_receipts_pending{op=commit} = %v, want 1", n)
			}
			back()
			eventually.True(t, "the receipt to be committed", committed(store))
			eventually.True(t, "no receipt pending", func() bool { return metricValue(t, reg, "idemgateway_receipts_pending", "op", "commit") == 0 })
			// The failed commits told the store's safety check that Redis was out of reach: keyed
			// requests get 503 until a check finds it back, at most a second after it is asked for.
			eventually.True(t, "the store to be found fit again", func() bool { return metricValue(t, reg, "idemgateway_store_safe") == 1 })
			replays(t, srv.URL, up)
		})
	})

	t.Run("redis refuses the write", func(t *testing.T) {
		t.Parallel()
		store, redisSrv := openRedisServer(t, redistest.Options{})
		raw := rawRedis(t, redisSrv)
		ctx := context.Background()
		up := newHeldUpstream(t, nil)
		srv, _, gw := newGatewayOn(t, store, settleYAML(up.URL, time.Second, time.Minute), gateway.Options{})
		gw.SetSettleRetry(10*time.Millisecond, 100*time.Millisecond)
		call := sendAsync(srv.URL, key, `{}`)
		up.awaitCalls(t, 1)
		setMaxmemory(t, raw, "1")
		up.releaseAll()
		if r := await(t, call, "the call"); r.String() != "201 execute" || r.header.Get("Idempotency-Receipt") != "pending" {
			t.Fatalf("the client: %s, Idempotency-Receipt %q; want 201 execute, pending", r, r.header.Get("Idempotency-Receipt"))
		}
		if state, err := raw.HGet(ctx, redisRecordKey(skey), "state").Result(); err != nil || state != record.StateInProgress {
			t.Fatalf("record after the refused commit: %q, %v; want in_progress", state, err)
		}
		if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "409 in_progress" {
			t.Fatalf("a retry while the commit is pending: %s %v, want 409 in_progress", r, err)
		}
		setMaxmemory(t, raw, "0")
		eventually.True(t, "the receipt to be committed", committed(store))
		replays(t, srv.URL, up)
	})
}

// ttlRecorder is a real store that records the ttl of every Claim and Commit, and fails the
// first failCommits Commits without passing them on (a store that is down for them).
type ttlRecorder struct {
	record.Store
	mu          sync.Mutex
	claims      []time.Duration
	commits     []time.Duration
	failCommits int
}

func (s *ttlRecorder) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload, error) {
	s.mu.Lock()
	s.claims = append(s.claims, ttl)
	s.mu.Unlock()
	return s.Store.Claim(ctx, key, owner, payload, lease, ttl)
}

func (s *ttlRecorder) Commit(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	s.commits = append(s.commits, ttl)
	fail := len(s.commits) <= s.failCommits
	s.mu.Unlock()
	if fail {
		return false, errors.New("store down for the test")
	}
	return s.Store.Commit(ctx, key, owner, settle, ttl)
}

// TestCommitKeepsTheClaimsExpiry (docs/stores.md#redis): a claim gives its record the route's
// ttl plus the upstream timeout and one store call, so that the commit that follows within the
// upstream timeout keeps that expiry (ttl 0: no PEXPIRE in Redis) and the receipt still lives at
// least ttl after it. A commit sent again after a failure sets ttl from then: the first may have
// landed late. Where unknown outcomes block the key and unknown_ttl is longer than ttl (30 days by
// default), the claim keeps the record for unknown_ttl instead, since an executor that dies
// leaves it outcome_unknown (case C23), and the commit sets ttl.
func TestCommitKeepsTheClaimsExpiry(t *testing.T) {
	t.Parallel()
	const upTimeout, storeTimeout, ttl = 20 * time.Second, 3 * time.Second, 24 * time.Hour
	for _, tc := range []struct {
		name        string
		unknownTTL  string // the route's unknown_ttl; "": the default
		failCommits int
		claim       time.Duration   // the ttl of the Claim
		want        []time.Duration // the ttls of the Commits
	}{
		{"prompt commit", "24h", 0, ttl + upTimeout + storeTimeout, []time.Duration{0}},
		{"commit sent again", "24h", 1, ttl + upTimeout + storeTimeout, []time.Duration{0, ttl}},
		{"unknown_ttl by default", "", 0, routes.DefaultUnknownTTL + upTimeout + storeTimeout, []time.Duration{ttl}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newHeldUpstream(t, nil)
			up.releaseAll()
			store := &ttlRecorder{Store: openEmbedded(t), failCommits: tc.failCommits}
			defaults := fmt.Sprintf("defaults: {ttl: %s, ", ttl)
			if tc.unknownTTL != "" {
				defaults += "unknown_ttl: " + tc.unknownTTL + ", "
			}
			yaml := strings.Replace(settleYAML(up.URL, upTimeout, 10*time.Second), "defaults: {", defaults, 1)
			srv, _, gw := newGatewayOn(t, store, yaml, gateway.Options{StoreTimeout: storeTimeout})
			gw.SetSettleRetry(time.Millisecond, time.Millisecond)
			if r := await(t, sendAsync(srv.URL, "k", `{}`), "the call"); r.String() != "201 execute" {
				t.Fatalf("the call: %s %s", r, r.body)
			}
			store.mu.Lock()
			defer store.mu.Unlock()
			if want := []time.Duration{tc.claim}; !slices.Equal(store.claims, want) {
				t.Errorf("Claim ttls %v, want %v", store.claims, want)
			}
			if !slices.Equal(store.commits, tc.want) {
				t.Errorf("Commit ttls %v, want %v", store.commits, tc.want)
			}
		})
	}
}
