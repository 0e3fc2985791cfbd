package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
)

// TestOrphanedClaimReleased (docs/cases.md C14, docs/contract.md §8): a claim lands in the store,
// and its reply is lost as the store goes away. The client gets 503 store-unavailable and the
// upstream is not called; the claim's owner releases it in the background, retrying while the
// store is down, so once the store is back the key is free well within the claim's lease (a
// minute: without the release a retry would get 409 in_progress for that long, then
// outcome_unknown). The retry executes: Up×1 for the key.
//
// Embedded: the store closes right after the claim's transaction. Redis: a proxy loses the
// claim's reply after Redis ran it, then partitions; Redis is stopped and restarted from its AOF
// while the release is retried.
func TestOrphanedClaimReleased(t *testing.T) {
	t.Parallel()
	const key, skey = "k", "default/create_ticket/k"
	for _, kind := range []struct {
		name string
		// open returns the gateway's store, the timeout of its calls, and loseReply, which makes
		// the next claim's reply be lost and returns the steps that bring the store back, each
		// taken once the release has failed again.
		open func(t *testing.T) (store record.Store, timeout time.Duration, loseReply func() (back []func()), landed func() bool)
	}{
		{"embedded", func(t *testing.T) (record.Store, time.Duration, func() []func(), func() bool) {
			s := newReopenable(t)
			loseReply := func() []func() {
				s.loseClaimReply.Store(true)
				return []func(){s.up}
			}
			return s, 0, loseReply, func() bool { // read the file while the gateway's store is closed
				direct, err := boltstore.Open(s.dir, boltstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer direct.Close()
				state, _, err := direct.Get(context.Background(), skey)
				return err == nil && state == record.StateInProgress
			}
		}},
		{"redis", func(t *testing.T) (record.Store, time.Duration, func() []func(), func() bool) {
			srv := redistest.Start(t, redistest.Options{AppendOnly: true})
			proxy := newFaultProxy(t, srv)
			raw := rawRedis(t, srv)
			loseReply := func() []func() {
				proxy.loseNextReply()
				return []func(){srv.Stop, proxy.heal, srv.Restart}
			}
			// The default store timeout (2 s): the lost reply costs that much, and a call whose
			// reply does come is not taken for lost on a loaded machine.
			return proxy.store(t, 0), 0, loseReply, func() bool {
				state, err := raw.HGet(context.Background(), redisRecordKey(skey), "state").Result()
				return err == nil && state == record.StateInProgress
			}
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			store, timeout, loseReply, landed := kind.open(t)
			up, calls := countingUpstream(t)
			reg := gateway.NewRegistry()
			srv, _, gw := newGatewayOn(t, store, settleYAML(up.URL, 5*time.Second, time.Minute), gateway.Options{Metrics: reg, StoreTimeout: timeout})
			gw.SetSettleRetry(10*time.Millisecond, 100*time.Millisecond)
			// A first call loads the store's scripts: the lost reply is then the claim's own, not
			// that of an EVALSHA that Redis did not run.
			if r, err := send(srv.URL, "warm", `{}`); err != nil || r.String() != "201 execute" {
				t.Fatalf("the first call: %s %v, want 201 execute", r, err)
			}
			back := loseReply()
			r, err := send(srv.URL, key, `{}`)
			if err != nil || r.status != http.StatusServiceUnavailable {
				t.Fatalf("the request whose claim's reply was lost: %s %v, want 503", r, err)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d upstream calls after a lost claim reply, want 1 (the first call's)", n)
			}
			failures := 0.0
			for _, step := range back {
				failures++
				eventually.True(t, "the release to fail on the store", func() bool {
					return metricValue(t, reg, "idemgateway_store_duration_seconds", "op", "release", "result", "error") >= failures
				})
				if failures == 1 && !landed() {
					t.Fatal("the claim did not land in the store: nothing shows it is released")
				}
				step()
			}
			eventually.True(t, "the record to be released", func() bool {
				state, _, err := store.Get(context.Background(), skey)
				return err == nil && state == ""
			})
			eventually.True(t, "no release pending", func() bool { return metricValue(t, reg, "idemgateway_receipts_pending", "op", "release") == 0 })
			// A retry while the store's safety check still finds it unreachable gets a retryable
			// 503: the check runs on its own schedule.
			eventually.True(t, "the store's safety check to find it fit", func() bool { return record.Safety(store) == nil })
			if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "201 execute" {
				t.Fatalf("the retry: %s %v, want 201 execute", r, err)
			}
			if n := calls.Load(); n != 2 {
				t.Fatalf("%d upstream calls, want 2 (the first call's and the retry's)", n)
			}
		})
	}
}

// failingCommits is a real store whose commits fail while failing is set, as on a store that
// refuses that one write; renewals and claims work.
type failingCommits struct {
	record.Store
	failing atomic.Bool
}

func (s *failingCommits) Commit(ctx context.Context, key, owner string, payload []byte, ttl time.Duration) (bool, error) {
	if s.failing.Load() {
		return false, errors.New("commit failed (the test)")
	}
	return s.Store.Commit(ctx, key, owner, payload, ttl)
}

// TestPendingSettleHoldsLease (docs/guarantees.md, "Pending receipts"): while a receipt is
// pending, the gateway keeps renewing the record's lease, so duplicates sent more than two
// leases later still get 409 in_progress, never outcome_unknown; once the store takes the commit,
// a retry replays it. Up×1. Each duplicate comes right after a renewal: the lease (1.5 s) has a
// second left then, which no stall of a loaded machine eats.
func TestPendingSettleHoldsLease(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		const key = "k"
		store := &failingCommits{Store: open(t)}
		store.failing.Store(true)
		up := newHeldUpstream(t, nil)
		up.releaseAll()
		reg := gateway.NewRegistry()
		srv, _, gw := newGatewayOn(t, store, settleYAML(up.URL, 10*time.Second, 1500*time.Millisecond), gateway.Options{Metrics: reg})
		gw.SetSettleRetry(10*time.Millisecond, 50*time.Millisecond)
		if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "201 execute" || r.header.Get("Idempotency-Receipt") != "pending" {
			t.Fatalf("the call: %s %v; want 201 execute, Idempotency-Receipt: pending", r, err)
		}
		// Seven renewals after the answer, a third of a lease apart at least: over two leases.
		renewed := metricValue(t, reg, "idemgateway_lease_renewals_total", "result", "ok")
		for n := renewed + 1; n <= renewed+7; n++ {
			eventually.True(t, "the next lease renewal", func() bool {
				return metricValue(t, reg, "idemgateway_lease_renewals_total", "result", "ok") >= n
			})
			if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "409 in_progress" {
				t.Fatalf("a duplicate while the receipt is pending: %s %v, want 409 in_progress", r, err)
			}
		}
		store.failing.Store(false)
		eventually.True(t, "no receipt pending", func() bool { return metricValue(t, reg, "idemgateway_receipts_pending", "op", "commit") == 0 })
		if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "201 replay" || r.body != `{"id":"T-1"}` {
			t.Fatalf("a retry: %s %v, want the replay of 201 T-1", r, err)
		}
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
	})
}

// TestSettlePendingAtShutdown (docs/operations.md, "Shutdown"): SettlePending, which a graceful
// shutdown calls once the calls in flight are done, tries every pending receipt once more. One
// whose store is back is stored (and a retry replays it); one whose store is still down is given
// up, logged, and no longer retried (it reads outcome_unknown once its lease lapses). The
// background retries are held off, so only SettlePending can have stored the receipt.
func TestSettlePendingAtShutdown(t *testing.T) {
	t.Parallel()
	forEachOutage(t, func(t *testing.T, store record.Store, down, back func()) {
		up := newHeldUpstream(t, nil)
		reg := gateway.NewRegistry()
		logs := &testlog.Buffer{}
		srv, _, gw := newGatewayOn(t, store, settleYAML(up.URL, 5*time.Second, 10*time.Second),
			gateway.Options{Metrics: reg, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		gw.SetSettleRetry(time.Hour, time.Hour)
		// pending sends a call with key, takes the store down while it is held, and checks that
		// its answer says the receipt is pending.
		pending := func(key string) {
			t.Helper()
			n := up.calls.Load()
			call := sendAsync(srv.URL, key, `{}`)
			up.awaitCalls(t, n+1)
			down()
			up.release(n + 1)
			if r := await(t, call, key); r.String() != "201 execute" || r.header.Get("Idempotency-Receipt") != "pending" {
				t.Fatalf("%s: %s, Idempotency-Receipt %q; want 201 execute, pending", key, r, r.header.Get("Idempotency-Receipt"))
			}
		}

		pending("stored")
		back()
		if stored, left := gw.SettlePending(context.Background()); stored != 1 || left != 0 {
			t.Fatalf("SettlePending with the store back = %d stored, %d left; want 1, 0", stored, left)
		}
		if state, _, err := store.Get(context.Background(), "default/create_ticket/stored"); err != nil || state != record.StateCommitted {
			t.Fatalf("after SettlePending: %q, %v; want committed", state, err)
		}
		if r, err := send(srv.URL, "stored", `{}`); err != nil || r.String() != "201 replay" || r.body != `{"id":"T-1"}` {
			t.Fatalf("a retry: %s %v, want the replay of 201 T-1", r, err)
		}

		pending("left")
		if stored, left := gw.SettlePending(context.Background()); stored != 0 || left != 1 {
			t.Fatalf("SettlePending with the store down = %d stored, %d left; want 0, 1", stored, left)
		}
		if n := metricValue(t, reg, "idemgateway_receipts_pending", "op", "commit"); n != 0 {
			t.Errorf("idemgateway_receipts_pending{op=commit} = %v after SettlePending, want 0", n)
		}
		if !hasLog(t, logs, "ERROR", "record not settled: the gateway shut down", "left") {
			t.Errorf("no error line for the receipt left pending:\n%s", logs.String())
		}
		back()
		if state, _, err := store.Get(context.Background(), "default/create_ticket/left"); err != nil || state != record.StateInProgress {
			t.Fatalf("the receipt left pending: %q, %v; want in_progress (outcome_unknown once its lease lapses)", state, err)
		}
		if n := up.calls.Load(); n != 2 {
			t.Fatalf("%d upstream calls, want 2", n)
		}
	})
}
