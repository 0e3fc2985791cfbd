package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/record"
)

// Seams for the tests of package gateway_test.

// CaseSafe is caseSafe: a scope key as forward_key sends it.
var CaseSafe = caseSafe

// AdminHandler is the admin API (package admin) over g's store, with g as its pipeline and
// bearer token token, as cmd/idemgateway serves it.
func (g *Gateway) AdminHandler(token string) http.Handler {
	return admin.Handler(admin.Options{Store: g.store, Pipeline: g, Token: token, Metrics: g.opts.Metrics})
}

// WakeUps reads idemgateway_wait_wakeups_total: how many waiting duplicates (concurrency: wait)
// this gateway has woken by a settle of its own, by the store's settle notice, and how many waits
// ended on the safety poll.
func (g *Gateway) WakeUps() (bySettle, byNotice, byPoll int64) {
	return int64(testutil.ToFloat64(g.waiters.bySettle)), int64(testutil.ToFloat64(g.waiters.byNotice)), int64(testutil.ToFloat64(g.waiters.byPoll))
}

// Waiting returns how many duplicates wait for the record at the store key skey to settle.
func (g *Gateway) Waiting(skey string) int {
	g.waiters.mu.Lock()
	defer g.waiters.mu.Unlock()
	if k := g.waiters.keys[skey]; k != nil {
		return len(k.chans)
	}
	return 0
}

// SetClock makes now the clock that records' started_at is stamped with, and that reconcile.after,
// the readiness probe's result and tool lists' ttl are measured on. Call it before the gateway serves; now must be safe for concurrent use.
func (g *Gateway) SetClock(now func() time.Time) {
	g.now = now
}

// SetWaitTimers sets the waiters' safety poll (waitPoll) and how long the first waiter of a key
// waits for the store to listen (watchTimeout). Call it before the gateway serves.
func (g *Gateway) SetWaitTimers(poll, watch time.Duration) {
	g.waiters.poll, g.waiters.watchTimeout = poll, watch
}

// storedRecordOf reads and decodes the record of tenant, tool and key from the gateway's store;
// nil when there is none.
func (g *Gateway) storedRecordOf(ctx context.Context, tenant, tool, key string) (state string, rec *record.Record, err error) {
	state, stored, err := g.store.Get(ctx, record.ScopeKey{Tenant: tenant, Tool: tool, Key: key}.String())
	if err != nil || state == "" {
		return state, nil, err
	}
	rec, err = record.Decode(state, stored)
	return state, rec, err
}

// RecordStartedAt reads the record of tenant, tool and key from the gateway's store: its state and
// when the call it records started (started_at, which the admin API does not show).
func (g *Gateway) RecordStartedAt(ctx context.Context, tenant, tool, key string) (state string, startedAt time.Time, err error) {
	state, rec, err := g.storedRecordOf(ctx, tenant, tool, key)
	if err != nil || rec == nil {
		return state, time.Time{}, err
	}
	return state, rec.StartedAt, nil
}

// ResponseIDSpan reads the record of tenant, tool and key from the gateway's store: its
// response body and where the commit found the body's JSON-RPC id in it (zero: not found).
func (g *Gateway) ResponseIDSpan(ctx context.Context, tenant, tool, key string) (body []byte, span [2]int, err error) {
	_, rec, err := g.storedRecordOf(ctx, tenant, tool, key)
	if err != nil || rec == nil || rec.Response == nil {
		return nil, span, err
	}
	return rec.Response.Body, rec.Response.IDSpan, nil
}

// InFlight returns how many upstream calls the gateway counts as under way: those CutOff would
// cut off.
func (g *Gateway) InFlight() int {
	n := 0
	g.inFlight.Range(func(_, _ any) bool {
		n++
		return true
	})
	return n
}

// SetSettleRetry sets the first and the longest pause between two attempts of a settle write that
// the store failed (settleRetryMin, settleRetryMax). Call it before the gateway serves.
func (g *Gateway) SetSettleRetry(first, longest time.Duration) {
	g.retryMin, g.retryMax = first, longest
}
