package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/routes"
)

// expiresWithin parses r's Idempotency-Expires and checks that it is ttl after a moment between
// from and to (the HTTP-date has whole seconds).
func expiresWithin(t *testing.T, what string, r reply, from, to time.Time, ttl time.Duration) time.Time {
	t.Helper()
	v := r.header.Get("Idempotency-Expires")
	at, err := http.ParseTime(v)
	if err != nil {
		t.Fatalf("%s: Idempotency-Expires %q: %v", what, v, err)
	}
	if lo, hi := from.Add(ttl).Truncate(time.Second), to.Add(ttl); at.Before(lo) || at.After(hi) {
		t.Errorf("%s: Idempotency-Expires %s, want %s after the call (between %s and %s)", what, v, ttl, lo.Format(http.TimeFormat), hi.Format(http.TimeFormat))
	}
	return at
}

// TestIdempotencyExpires (docs/cases.md C23): every answer the store decided says when the key's
// record expires. A committed call and its replays and conflicts say the receipt's ttl from the
// commit; a call whose outcome is unknown, under block, says unknown_ttl (30 days by default)
// from its marking, and so do its refused retries; a call in flight says unknown_ttl from its
// claim (an executor that dies leaves the record outcome_unknown that long). A call that did not
// commit frees its key, and says nothing. On both stores.
func TestIdempotencyExpires(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		const ttl = time.Hour
		up := newHeldUpstream(t, func(n int32) int {
			switch n {
			case 2:
				return http.StatusInternalServerError
			case 3:
				return http.StatusBadRequest
			}
			return http.StatusCreated
		})
		srv, _, _ := newGateway(t, open, up.URL, gateway.Options{}, "{ttl: 1h}")
		sent := func(key, body string, n int32) (reply, time.Time, time.Time) {
			t.Helper()
			from := time.Now()
			if n > 0 {
				up.release(n)
			}
			r := await(t, sendAsync(srv.URL, key, body), key)
			return r, from, time.Now()
		}

		r, from, to := sent("done", `{"a":1}`, 1)
		if r.String() != "201 execute" {
			t.Fatalf("first call: %s %s", r, r.body)
		}
		committed := expiresWithin(t, "the execution", r, from, to, ttl)
		for _, body := range []string{`{"a":1}`, `{"a":2}`} {
			r, _, _ := sent("done", body, 0)
			if r.status != http.StatusCreated && r.status != http.StatusUnprocessableEntity {
				t.Fatalf("retry with %s: %s %s", body, r, r.body)
			}
			if got := r.header.Get("Idempotency-Expires"); got != committed.Format(http.TimeFormat) {
				t.Errorf("%s of the committed key: Idempotency-Expires %q, want the receipt's %q", r.decision, got, committed.Format(http.TimeFormat))
			}
		}

		r, from, to = sent("unknown", `{}`, 2)
		if r.String() != "500 execute" {
			t.Fatalf("the call answered 500: %s %s", r, r.body)
		}
		marked := expiresWithin(t, "the execution of unknown outcome", r, from, to, routes.DefaultUnknownTTL)
		if r, _, _ = sent("unknown", `{}`, 0); r.decision != "outcome_unknown" || r.header.Get("Idempotency-Expires") != marked.Format(http.TimeFormat) {
			t.Errorf("retry of the unknown outcome: %s, Idempotency-Expires %q; want outcome_unknown, %q", r, r.header.Get("Idempotency-Expires"), marked.Format(http.TimeFormat))
		}

		if r, _, _ = sent("refused", `{}`, 3); r.String() != "400 execute" || r.header.Get("Idempotency-Expires") != "" {
			t.Errorf("a call that did not commit: %s, Idempotency-Expires %q; want 400 execute and none (the key is free)", r, r.header.Get("Idempotency-Expires"))
		}

		from = time.Now()
		first := sendAsync(srv.URL, "held", `{}`)
		up.awaitCalls(t, 4)
		to = time.Now()
		if r, _, _ = sent("held", `{}`, 0); r.decision != "in_progress" {
			t.Errorf("duplicate in flight: %s", r)
		} else {
			expiresWithin(t, "a duplicate in flight", r, from, to, routes.DefaultUnknownTTL)
		}
		up.release(4)
		await(t, first, "the held call")
	})
}

// TestStoreOutcomeUnknownMetrics (docs/cases.md C23): the gateway's metrics count the store's
// outcome_unknown records and say when the first expires, read from the store's index at a scrape
// at most every 30 s (on a clock the test moves); with none, the count is 0 and the expiry series
// is absent. The records are real ones, left by calls the upstream answered 502.
func TestStoreOutcomeUnknownMetrics(t *testing.T) {
	t.Parallel()
	const count, expiry = "idemgateway_store_outcome_unknown_records", "idemgateway_store_outcome_unknown_next_expiry_timestamp_seconds"
	up, _ := countingUpstream(t)
	reg := gateway.NewRegistry()
	clock := testclock.New(time.Now())
	store := openEmbedded(t)
	srv, _, gw := newGatewayOn(t, store, ticketsYAML(up.URL), gateway.Options{Metrics: reg})
	gw.SetClock(clock.Now)
	if n, err := gatherValue(reg, count); err != nil || n != 0 {
		t.Fatalf("%s = %v, %v with no record; want 0", count, n, err)
	}
	if families, err := reg.Gather(); err != nil || slices.ContainsFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == expiry }) {
		t.Errorf("%s present with no record (%v)", expiry, err)
	}

	var first time.Time
	for _, key := range []string{"k1", "k2", "k3"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("X-Fail", "1")
		r, err := roundTrip(req)
		if err != nil || r.String() != "502 execute" {
			t.Fatalf("%s: %v %v, want 502 execute", key, r, err)
		}
		if key == "k1" {
			first, _ = http.ParseTime(r.header.Get("Idempotency-Expires"))
		}
	}
	if n, _ := gatherValue(reg, count); n != 0 {
		t.Errorf("%s = %v within 30 s of the last scan, want the count it found (0)", count, n)
	}
	clock.Advance(30 * time.Second)
	if n, err := gatherValue(reg, count); err != nil || n != 3 {
		t.Errorf("%s = %v, %v; want 3", count, n, err)
	}
	at, err := gatherValue(reg, expiry)
	if err != nil || at < float64(first.Unix()) || at >= float64(first.Unix()+1) {
		t.Errorf("%s = %v, %v; want the first record's expiry %d (its Idempotency-Expires)", expiry, at, err, first.Unix())
	}
}
