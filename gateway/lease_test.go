package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
)

// renewalGate is a real store whose renewals of the first owner that claims a key fail while
// prevented is set: that executor's lease lapses as it does when its store calls stall.
type renewalGate struct {
	record.Store
	prevented atomic.Bool
	mu        sync.Mutex
	first     string // the owner of the first successful claim
}

func (s *renewalGate) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload, error) {
	claimed, state, stored, err := s.Store.Claim(ctx, key, owner, payload, lease, ttl)
	if claimed {
		s.mu.Lock()
		if s.first == "" {
			s.first = owner
		}
		s.mu.Unlock()
	}
	return claimed, state, stored, err
}

func (s *renewalGate) Renew(ctx context.Context, key, owner string, lease time.Duration) (bool, error) {
	s.mu.Lock()
	first := s.first
	s.mu.Unlock()
	if owner == first && s.prevented.Load() {
		return false, errors.New("renewal prevented by the test")
	}
	return s.Store.Renew(ctx, key, owner, lease)
}

// TestCommitAfterTakeoverIsRefused: an executor whose lease lapsed while its upstream call was
// held, and whose key another request took over (on_unknown_outcome: release), has its commit
// refused by the store's owner check: counted in idemgateway_store_duration_seconds
// {op="commit",result="refused"} and logged, and the successor's record is not overwritten. Its
// next renewal is refused too: idemgateway_lease_renewals_total{result="lost"}. The client still
// gets the upstream's answer, which it acted on.
func TestCommitAfterTakeoverIsRefused(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	c := testclock.New(time.Now())
	for _, kind := range []struct {
		name  string
		open  storeFactory
		lapse func() // makes the lease lapse; nothing on Redis, where it lapses on Redis's clock
	}{
		{"embedded", openEmbeddedAt(c), func() { c.Advance(2 * lease) }},
		{"redis", openRedis, func() {}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			up := newHeldUpstream(t, nil)
			reg := gateway.NewRegistry()
			logs := &testlog.Buffer{}
			store := &renewalGate{Store: kind.open(t)}
			store.prevented.Store(true)
			srv, _, gw := newGatewayOn(t, store, fmt.Sprintf(`
upstreams:
  tickets: {url: %q}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent,
     receipt: {remote_id: /id}, lock_lease: %s, on_unknown_outcome: release}
`, up.URL, lease), gateway.Options{Metrics: reg, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			admin := gw.AdminHandler("")

			a := sendAsync(srv.URL, "k", `{}`)
			up.awaitCalls(t, 1)
			kind.lapse()
			// A duplicate is refused while A's lease holds; the first one after it lapsed takes the
			// key over (its claim marks the record outcome_unknown, the release policy reclaims it)
			// and is held upstream.
			var b <-chan result
			eventually.True(t, "a duplicate to take the key over", func() bool {
				b = sendAsync(srv.URL, "k", `{}`)
				var refused *result
				eventually.True(t, "the duplicate to be answered, or held upstream", func() bool {
					select {
					case r := <-b:
						refused = &r
						return true
					default:
						return up.calls.Load() == 2
					}
				})
				if refused != nil && (refused.err != nil || refused.String() != "409 in_progress") {
					t.Fatalf("a duplicate before the takeover: %s %v, want 409 in_progress", refused, refused.err)
				}
				return refused == nil
			})
			// A's renewals reach the store again: the store refuses them, B owns the key.
			store.prevented.Store(false)
			eventually.True(t, "the stale executor to see its lease lost", func() bool {
				return metricValue(t, reg, "idemgateway_lease_renewals_total", "result", "lost") == 1
			})

			up.release(1)
			if r := await(t, a, "the stale executor's client"); r.String() != "201 execute" || r.body != `{"id":"T-1"}` {
				t.Fatalf("the stale executor's client: %s %s; want the upstream's 201 T-1", r, r.body)
			}
			if n := metricValue(t, reg, "idemgateway_store_duration_seconds", "op", "commit", "result", "refused"); n != 1 {
				t.Errorf("refused commits counted: %v, want 1", n)
			}
			if !hasLog(t, logs, "ERROR", "record not settled: the store refused it", "k") {
				t.Errorf("no error line for the refused commit of key k:\n%s", logs.String())
			}
			if code, rec := adminDo(t, admin, "GET", "/v1/records/default/create_ticket/k", "", ""); code != 200 ||
				rec["state"] != record.StateInProgress || rec["executions"] != float64(2) {
				t.Fatalf("after the refused commit: %d %v; want B's record (in_progress, executions 2)", code, rec)
			}

			up.release(2)
			if r := await(t, b, "the successor"); r.String() != "201 execute" || r.body != `{"id":"T-2"}` {
				t.Fatalf("the successor: %s %s, want 201 execute T-2", r, r.body)
			}
			if code, rec := adminDo(t, admin, "GET", "/v1/records/default/create_ticket/k", "", ""); code != 200 ||
				rec["state"] != record.StateCommitted || rec["remote_id"] != "T-2" {
				t.Fatalf("final record: %d %v; want committed with T-2", code, rec)
			}
		})
	}
}

// clockedRenewals is a store on the test clock c that notes, in at, the clock read before each
// renewal it grants: the renewal's transaction read that time or a later one.
type clockedRenewals struct {
	record.Store
	c  *testclock.Clock
	at *atomic.Int64
}

func (s *clockedRenewals) Renew(ctx context.Context, key, owner string, lease time.Duration) (bool, error) {
	before := s.c.Now().UnixNano()
	ok, err := s.Store.Renew(ctx, key, owner, lease)
	if ok && err == nil {
		s.at.Store(before)
	}
	return ok, err
}

// TestLeaseRenewedWhileCallHeld: an upstream call held for several lease periods keeps its lease:
// idemgateway_lease_renewals_total{result="ok"} grows, a duplicate during the call gets 409
// in_progress (never outcome_unknown), and the record ends committed. The test waits on the
// renewals, never on time: on the embedded store the lease runs on a clock that the test advances
// only after a renewal made at the clock's present time (renewals may come in pairs: one that goes
// unanswered for a sixth of the lease is sent again); on Redis, on Redis's clock, so the duplicate
// is sent right after a renewal, a whole lease (two seconds, which no stall of a loaded machine
// eats) before the next could be missed.
func TestLeaseRenewedWhileCallHeld(t *testing.T) {
	t.Parallel()
	c := testclock.New(time.Now())
	var renewedAt atomic.Int64 // the test clock before the embedded store's last renewal
	for _, kind := range []struct {
		name  string
		open  storeFactory
		lease time.Duration
		// await waits for the n-th renewal (embedded: for one made at the clock's present time,
		// and then moves the clock on)
		await func(t *testing.T, reg *prometheus.Registry, n float64)
	}{
		{"embedded", func(t *testing.T) record.Store {
			return &clockedRenewals{Store: openEmbeddedAt(c)(t), c: c, at: &renewedAt}
		}, 300 * time.Millisecond, func(t *testing.T, _ *prometheus.Registry, _ float64) {
			eventually.True(t, "the renewal at the clock time", func() bool { return renewedAt.Load() == c.Now().UnixNano() })
			c.Advance(200 * time.Millisecond)
		}},
		{"redis", openRedis, 2 * time.Second, func(t *testing.T, reg *prometheus.Registry, n float64) {
			eventually.True(t, "the lease renewals", func() bool {
				return metricValue(t, reg, "idemgateway_lease_renewals_total", "result", "ok") >= n
			})
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			up := newHeldUpstream(t, nil)
			reg := gateway.NewRegistry()
			// The call is held for over two leases: its upstream timeout is far longer.
			srv, store, _ := newGatewayOn(t, kind.open(t), settleYAML(up.URL, time.Minute, kind.lease), gateway.Options{Metrics: reg})
			call := sendAsync(srv.URL, "long", `{}`)
			up.awaitCalls(t, 1)
			// Seven renewals, a third of a lease apart at least: the call has been held over two
			// leases (on the embedded store's clock, 1.4 s against a 300 ms lease).
			for n := 1.0; n <= 7; n++ {
				kind.await(t, reg, n)
			}
			r, err := send(srv.URL, "long", `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != "409 in_progress" {
				t.Fatalf("a duplicate during the held call: %s %s; want 409 in_progress", r, r.body)
			}
			up.releaseAll()
			if r := await(t, call, "the held call"); r.String() != "201 execute" {
				t.Fatalf("the held call: %s", r)
			}
			if state, _, err := store.Get(context.Background(), "default/create_ticket/long"); err != nil || state != record.StateCommitted {
				t.Fatalf("record: %q, %v; want committed", state, err)
			}
			if n := metricValue(t, reg, "idemgateway_lease_renewals_total", "result", "lost"); n != 0 {
				t.Errorf("%v renewals lost, want 0", n)
			}
		})
	}
}

// firstByteCheck is a ResponseWriter that runs check once, before the first byte of the
// response (its header) is written.
type firstByteCheck struct {
	http.ResponseWriter
	once  sync.Once
	check func()
}

func (w *firstByteCheck) WriteHeader(code int) {
	w.once.Do(w.check)
	w.ResponseWriter.WriteHeader(code)
}

func (w *firstByteCheck) Write(p []byte) (int, error) {
	w.once.Do(w.check)
	return w.ResponseWriter.Write(p)
}

func (w *firstByteCheck) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestReceiptStoredBeforeResponse: the receipt of a committed call is in the store before the
// first byte of the response leaves the gateway, so a client that has any of the answer (and a
// retry after a cut connection) finds the record committed.
func TestReceiptStoredBeforeResponse(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up := newHeldUpstream(t, nil)
		up.releaseAll()
		_, store, gw := newGateway(t, open, up.URL, gateway.Options{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := "default/create_ticket/" + r.Header.Get("Idempotency-Key")
			gw.ServeHTTP(&firstByteCheck{ResponseWriter: w, check: func() {
				state, _, err := store.Get(context.Background(), key)
				if err != nil || state != record.StateCommitted {
					t.Errorf("%s at the first byte of the response: state %q, %v; want committed", key, state, err)
				}
			}}, r)
		}))
		t.Cleanup(srv.Close)
		for i := range 5 {
			r, err := send(srv.URL, fmt.Sprint("k", i), `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != "201 execute" {
				t.Fatalf("call %d: %s", i, r)
			}
		}
	})
}

// stallingRenewals is a real store whose next renewal, once armed, hangs until the test ends,
// whatever its context says: a store call stuck on a dead connection or a slow disk.
type stallingRenewals struct {
	record.Store
	armed atomic.Bool
	end   <-chan struct{}
}

func (s *stallingRenewals) Renew(ctx context.Context, key, owner string, lease time.Duration) (bool, error) {
	if s.armed.CompareAndSwap(true, false) {
		<-s.end
		return false, errors.New("renewal stalled until the test ended")
	}
	return s.Store.Renew(ctx, key, owner, lease)
}

// TestLeaseHoldsThroughStalledRenewal (docs/guarantees.md, "Lease timing"): with lock_lease 2s
// and the default store timeout of 2 s, four renewals stall, one after another: on Redis, the
// connection that carries the renewal stops passing bytes (a proxy holds it; other connections
// work); on the embedded store, the renewal call hangs, deaf to its context. Each renewal gives up
// after a sixth of the lease and is sent again (on Redis, on another connection: go-redis
// discards the one that timed out), so the lease holds: a duplicate that claims the key all along,
// directly on the store, always finds it in_progress, never turning it outcome_unknown; the call
// commits and a retry replays it. Up×1. (A renewal that waited up to the store timeout would let
// the lease lapse under it.)
//
// A stalled renewal leaves the lease half of itself (a second). A renewal crosses about five
// points where a loaded machine can make it wait (the lease's timer, the Redis client, the proxy
// each way, the store), so a machine that wakes goroutines a fifth of that margin late can lapse
// the lease whatever the gateway does. Such a run is not evidence either way: the test measures
// how late its own goroutines were woken (lagMeter), runs the scenario again when a run that lost
// the lease saw a lag over 200 ms, and fails when a run without such a lag lost it, or when five
// runs in a row were stalled.
func TestLeaseHoldsThroughStalledRenewal(t *testing.T) {
	t.Parallel()
	const stalls, runs, tolerated = 4, 5, 200 * time.Millisecond
	for _, kind := range []struct {
		name string
		// open returns the gateway's store, the store the duplicate claims on, and stall, which
		// makes the gateway's next renewal of the record at the store key skey stall and returns
		// whether it has stalled.
		open func(t *testing.T) (gwStore, direct record.Store, stall func(skey string) (stalled func() bool))
	}{
		{"embedded", func(t *testing.T) (record.Store, record.Store, func(string) func() bool) {
			direct := openEmbedded(t)
			s := &stallingRenewals{Store: direct, end: t.Context().Done()}
			return s, direct, func(string) func() bool {
				s.armed.Store(true)
				return func() bool { return !s.armed.Load() }
			}
		}},
		{"redis", func(t *testing.T) (record.Store, record.Store, func(string) func() bool) {
			srv := redistest.Start(t, redistest.Options{})
			proxy := newFaultProxy(t, srv)
			// Two idle connections kept open: a renewal sent again need not dial. Only the
			// record's commands stall: the store's safety check goes on.
			return proxy.store(t, 2), redisStoreOn(t, srv), func(skey string) func() bool {
				return proxy.stallNextCommandOn(redisRecordKey(skey))
			}
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			gwStore, direct, stall := kind.open(t)
			for run := 1; ; run++ {
				lag := startLagMeter()
				lost := stalledRenewalsRun(t, gwStore, direct, stall, fmt.Sprint("k", run), stalls)
				worst := lag.stop()
				switch {
				case lost == "":
					return
				case worst <= tolerated:
					t.Fatalf("run %d: the lease lapsed (%s), and the test's goroutines were never late by more than %s (at worst %s)", run, lost, tolerated, worst)
				case run == runs:
					t.Fatalf("%d runs in a row lost the lease while the machine stalled the test for more than %s (the last one %s, %s): no evidence either way", runs, tolerated, worst, lost)
				}
				t.Logf("run %d: the lease lapsed (%s) while the machine stalled the test for %s: running it again", run, lost, worst)
			}
		})
	}
}

// stalledRenewalsRun runs the scenario of TestLeaseHoldsThroughStalledRenewal once, on key, with
// a gateway of its own on gwStore. It returns how the lease was lost, or "" when it held.
func stalledRenewalsRun(t *testing.T, gwStore, direct record.Store, stall func(skey string) func() bool, key string, stalls int) (lost string) {
	t.Helper()
	skey := "default/create_ticket/" + key
	up := newHeldUpstream(t, nil)
	reg := gateway.NewRegistry()
	srv, _, _ := newGatewayOn(t, gwStore, settleYAML(up.URL, 20*time.Second, 2*time.Second), gateway.Options{Metrics: reg})
	renewals := func(result string) float64 {
		return metricValue(t, reg, "idemgateway_lease_renewals_total", "result", result)
	}
	call := sendAsync(srv.URL, key, `{}`)
	up.awaitCalls(t, 1)
	defer func() {
		up.releaseAll()
		r := await(t, call, "the call")
		if lost != "" {
			return
		}
		if r.String() != "201 execute" || r.header.Get("Idempotency-Receipt") != "" {
			t.Fatalf("the call: %s, Idempotency-Receipt %q; want 201 execute, stored", r, r.header.Get("Idempotency-Receipt"))
		}
		if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "201 replay" {
			t.Fatalf("a retry: %s %v, want 201 replay", r, err)
		}
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("%d upstream calls, want 1", n)
		}
	}()

	// The duplicate: a claim of the key every few milliseconds, as retries from elsewhere.
	var seen atomic.Value // the first state other than in_progress it met, or an error
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			claimed, state, _, err := direct.Claim(context.Background(), skey, "duplicate", []byte("duplicate"), time.Minute, time.Minute)
			if err != nil || claimed || state != record.StateInProgress {
				seen.CompareAndSwap(nil, fmt.Sprintf("a duplicate's claim: claimed %v, state %q, err %v", claimed, state, err))
			}
		}
	}()
	defer func() {
		close(done)
		<-stopped
		if v := seen.Load(); v != nil && lost == "" {
			lost = v.(string)
		}
	}()
	// renewed waits for a renewal the store took after the ok-th, or for the lease to be lost.
	renewed := func(ok float64) bool {
		eventually.True(t, "a renewal, or its stall", func() bool { return renewals("ok") > ok || renewals("lost") > 0 || seen.Load() != nil })
		return renewals("ok") > ok
	}
	notTaken := func(when string) string {
		return fmt.Sprintf("no renewal taken %s (renewals lost %v, failed %v; a duplicate's claim: %v)", when, renewals("lost"), renewals("error"), seen.Load())
	}
	for range stalls {
		if !renewed(renewals("ok")) {
			return notTaken("between stalls")
		}
		eventually.True(t, "the renewal to stall", stall(skey))
	}
	if !renewed(renewals("ok")) {
		return notTaken("after the last stall")
	}
	return ""
}

// lagMeter measures how late this process's goroutines are woken: a goroutine sleeps 5 ms at a
// time and keeps the longest overshoot.
type lagMeter struct {
	worst atomic.Int64
	done  chan struct{}
	ended chan struct{}
}

func startLagMeter() *lagMeter {
	m := &lagMeter{done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(m.ended)
		const tick = 5 * time.Millisecond
		for {
			start := time.Now()
			select {
			case <-m.done:
				return
			case <-time.After(tick):
			}
			if late := int64(time.Since(start) - tick); late > m.worst.Load() {
				m.worst.Store(late)
			}
		}
	}()
	return m
}

// stop ends the measure and returns the longest lateness seen.
func (m *lagMeter) stop() time.Duration {
	close(m.done)
	<-m.ended
	return time.Duration(m.worst.Load())
}
