package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

var _ record.SafetyReporter = (*redisstore.Store)(nil)

// safetyWorld is a gateway on a Redis store whose safety check runs every interval, in front of
// an upstream that counts its calls: POST /v1/tickets (non_idempotent, keyed) and GET
// /v1/tickets/{id} (read_only).
type safetyWorld struct {
	srv   *redistest.Server
	raw   *redis.Client // the default user, to change the server
	store *redisstore.Store
	url   string
	admin http.Handler
	reg   *prometheus.Registry
	calls atomic.Int32 // POSTs the upstream received
}

// newSafetyWorld starts it all on a redis-server started with args; aclRules, when set, is the ACL
// user the store runs as.
func newSafetyWorld(t *testing.T, args []string, aclRules string, interval time.Duration) *safetyWorld {
	t.Helper()
	w := &safetyWorld{srv: redistest.Start(t, redistest.Options{Args: args})}
	w.raw = rawRedis(t, w.srv)
	copts, err := redis.ParseURL(w.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if aclRules != "" {
		cmd := []any{"ACL", "SETUSER", "gw", "on", ">gw-password", "~*", "&*"}
		for _, r := range strings.Fields(aclRules) {
			cmd = append(cmd, r)
		}
		if err := w.raw.Do(context.Background(), cmd...).Err(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
		copts.Username, copts.Password = "gw", "gw-password"
	}
	w.store, err = redisstore.New(redis.NewClient(copts), redisstore.Options{CheckInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.store.Close() })
	var n atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			io.WriteString(rw, `{"id":"T-0"}`)
			return
		}
		w.calls.Add(1)
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprintf(rw, `{"id":"T-%d"}`, n.Add(1))
	}))
	t.Cleanup(up.Close)
	w.reg = gateway.NewRegistry()
	srv, _, gw := newGatewayOn(t, w.store, fmt.Sprintf(`
upstreams:
  tickets: {url: %q, timeout: 5s}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent, receipt: {remote_id: /id}}
  - {name: get_ticket, upstream: tickets, method: GET, path: "/v1/tickets/{id}", class: read_only}
`, up.URL), gateway.Options{Metrics: w.reg})
	w.url, w.admin = srv.URL, gw.AdminHandler("")
	return w
}

// waitSafe polls the store's verdict until cond holds of it: the background check's change.
func (w *safetyWorld) waitSafe(t *testing.T, what string, cond func(error) bool) {
	t.Helper()
	eventually.True(t, "Safe() to be "+what, func() bool { return cond(w.store.Safe()) })
}

// claims is how many claims the gateway asked the store for (idemgateway_store_duration_seconds).
func (w *safetyWorld) claims(t *testing.T) uint64 {
	t.Helper()
	families, err := w.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() != "idemgateway_store_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == "claim" {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// expectRefused checks a keyed request's answer while the store is unsafe: 503 store-unavailable,
// retryable, with Retry-After, and no upstream call.
func (w *safetyWorld) expectRefused(t *testing.T, key string, upBefore int32) {
	t.Helper()
	r, err := send(w.url, key, `{"title":"disk full"}`)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Type      string
		Retryable bool
	}
	_ = json.Unmarshal([]byte(r.body), &p)
	if r.status != http.StatusServiceUnavailable || p.Type != problem.TypePrefix+"store-unavailable" || !p.Retryable || r.retryAfter == "" {
		t.Errorf("key %q on an unsafe store: %d %s (Retry-After %q), want 503 store-unavailable, retryable, with Retry-After", key, r.status, r.body, r.retryAfter)
	}
	if n := w.calls.Load(); n != upBefore {
		t.Errorf("upstream called %d times, want %d: a keyed request on an unsafe store reached it", n, upBefore)
	}
}

// expectReadOnlyServed checks that a read_only route still works: it never touches the store.
func (w *safetyWorld) expectReadOnlyServed(t *testing.T) {
	t.Helper()
	resp, err := http.Get(w.url + "/v1/tickets/T-0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("read_only route on an unsafe store: %d, want 200", resp.StatusCode)
	}
}

// expectUnready checks that /readyz reports the verdict, naming want, and the gauge is 0.
func (w *safetyWorld) expectUnready(t *testing.T, want string) {
	t.Helper()
	code, body := adminDo(t, w.admin, "GET", "/readyz", "", "")
	if detail, _ := body["detail"].(string); code != http.StatusServiceUnavailable || !strings.Contains(detail, want) {
		t.Errorf("/readyz: %d %v, want 503 naming %q", code, body, want)
	}
	if err := testutil.GatherAndCompare(w.reg, strings.NewReader(`
# HELP idemgateway_store_safe 1 while the store is fit to keep records; 0 while its safety check finds it unfit (an evicting Redis policy, scripts refused, unreachable: keyed requests get 503) or refusing writes (out of memory: only replays work). The reason is logged at each change and served by /readyz.
# TYPE idemgateway_store_safe gauge
idemgateway_store_safe 0
`), "idemgateway_store_safe"); err != nil {
		t.Error(err)
	}
}

// TestC15_EvictingPolicyRefusesClaims: while Redis runs an evicting maxmemory-policy (volatile-lru
// too: every record has a TTL), keyed requests get 503 without a claim, so no upstream call and no
// record Redis may drop; a committed key does not replay either (its record may be gone already).
// read_only routes keep working. Once the policy is noeviction again, the next check lets keyed
// requests through (the test polls the store's verdict: nothing is timed).
func TestC15_EvictingPolicyRefusesClaims(t *testing.T) {
	t.Parallel()
	w := newSafetyWorld(t, nil, "", 10*time.Millisecond)
	if r, err := send(w.url, "done", `{"title":"a"}`); err != nil || r.status != http.StatusCreated {
		t.Fatalf("on noeviction: %v %v, want 201", r, err)
	}
	if err := w.raw.ConfigSet(context.Background(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	w.waitSafe(t, "ErrEvictionPolicy", func(err error) bool { return errors.Is(err, redisstore.ErrEvictionPolicy) })
	claims := w.claims(t)
	w.expectRefused(t, "new", 1)
	w.expectRefused(t, "done", 1)
	if n := w.claims(t); n != claims {
		t.Errorf("%d claims on an evicting Redis, want none", n-claims)
	}
	w.expectReadOnlyServed(t)
	w.expectUnready(t, `"volatile-lru"`)

	if err := w.raw.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	w.waitSafe(t, "nil", func(err error) bool { return err == nil })
	if r, err := send(w.url, "new", `{"title":"disk full"}`); err != nil || r.status != http.StatusCreated || r.decision != "execute" {
		t.Fatalf("on noeviction again: %v %v, want 201 execute", r, err)
	}
	if n := w.calls.Load(); n != 2 {
		t.Errorf("upstream called %d times, want 2", n)
	}
}

// TestC15_ConfigRenamedPolicyFromInfo: a managed Redis with CONFIG renamed away and an evicting
// policy: the policy is read from INFO memory and keyed requests get 503 from the first one on.
func TestC15_ConfigRenamedPolicyFromInfo(t *testing.T) {
	t.Parallel()
	w := newSafetyWorld(t, []string{"--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""}, "", 0)
	w.expectRefused(t, "k", 0)
	if n := w.claims(t); n != 0 {
		t.Errorf("%d claims on an evicting Redis, want none", n)
	}
	w.expectReadOnlyServed(t)
	w.expectUnready(t, `"allkeys-lru"`)
}

// TestC15_OutOfMemoryStillReplays: Redis out of memory (maxmemory reached under noeviction)
// refuses writes, not reads. A new key's claim fails with OOM (503, no upstream call) and wakes the
// store's check at once (the interval is an hour here); a committed key still replays, since its
// claim only reads. Once Redis has memory again and a check passes, new keys execute.
func TestC15_OutOfMemoryStillReplays(t *testing.T) {
	t.Parallel()
	w := newSafetyWorld(t, nil, "", time.Hour)
	first, err := send(w.url, "done", `{"title":"a"}`)
	if err != nil || first.status != http.StatusCreated {
		t.Fatalf("before OOM: %v %v, want 201", first, err)
	}
	setMaxmemory(t, w.raw, "1")
	w.expectRefused(t, "new", 1)
	w.waitSafe(t, "ErrWritesRefused", func(err error) bool { return errors.Is(err, record.ErrWritesRefused) })
	w.expectRefused(t, "new", 1)
	r, err := send(w.url, "done", `{"title":"a"}`)
	if err != nil || r.status != http.StatusCreated || r.decision != "replay" || r.body != first.body {
		t.Errorf("committed key out of memory: %v %q %v, want the replay of %q", r, r.body, err, first.body)
	}
	w.expectReadOnlyServed(t)
	w.expectUnready(t, "OOM")

	setMaxmemory(t, w.raw, "0")
	if err := w.store.Check(context.Background()); err != nil {
		t.Fatalf("Check() with memory again: %v", err)
	}
	if r, err := send(w.url, "new", `{"title":"disk full"}`); err != nil || r.status != http.StatusCreated || r.decision != "execute" {
		t.Fatalf("with memory again: %v %v, want 201 execute", r, err)
	}
	if n := w.calls.Load(); n != 2 {
		t.Errorf("upstream called %d times, want 2", n)
	}
}

// TestC15_ScriptsRefused: an ACL user that may not run scripts (no +evalsha, +eval): the check
// finds it, and keyed requests get 503 without a claim.
func TestC15_ScriptsRefused(t *testing.T) {
	t.Parallel()
	w := newSafetyWorld(t, nil, "+@all -evalsha -eval", 0)
	w.expectRefused(t, "k", 0)
	if n := w.claims(t); n != 0 {
		t.Errorf("%d claims while Redis refuses the scripts, want none", n)
	}
	w.expectReadOnlyServed(t)
	w.expectUnready(t, "NOPERM")
}

// TestC15_ReadyzAgreesWithClaims: /readyz reports the verdict keyed requests are served by, not
// only what its own probe finds at that moment: between Redis turning safe again and the store's
// next check (an hour here, so that only Check moves it), keyed requests still get 503 and /readyz
// says 503 too, so an orchestrator never sends traffic to a gateway that refuses it.
func TestC15_ReadyzAgreesWithClaims(t *testing.T) {
	t.Parallel()
	w := newSafetyWorld(t, nil, "", time.Hour)
	ctx := context.Background()
	if err := w.raw.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if err := w.store.Check(ctx); !errors.Is(err, redisstore.ErrEvictionPolicy) {
		t.Fatalf("Check() on volatile-lru = %v", err)
	}
	if err := w.raw.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	w.expectRefused(t, "k", 0)
	w.expectUnready(t, `"volatile-lru"`)
	if err := w.store.Check(ctx); err != nil {
		t.Fatalf("Check() on noeviction = %v", err)
	}
	if code, body := adminDo(t, w.admin, "GET", "/readyz", "", ""); code != http.StatusOK {
		t.Fatalf("/readyz after a passing check: %d %v, want 200", code, body)
	}
	if r, err := send(w.url, "k", `{"title":"disk full"}`); err != nil || r.status != http.StatusCreated {
		t.Fatalf("after a passing check: %v %v, want 201", r, err)
	}
}
