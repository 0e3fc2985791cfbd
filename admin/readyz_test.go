package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

// probeCounter is a real store that counts the claims of /readyz's write probe, each held until
// gate is closed.
type probeCounter struct {
	record.Store
	probes atomic.Int32
	gate   chan struct{}
}

func (p *probeCounter) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload, error) {
	if strings.HasPrefix(key, "readyz/") {
		p.probes.Add(1)
		select {
		case <-p.gate:
		case <-ctx.Done():
		}
	}
	return p.Store.Claim(ctx, key, owner, payload, lease, ttl)
}

func readyz(h http.Handler) int {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return w.Code
}

// TestReadyzSharesTheProbe: concurrent /readyz callers share the one store probe (a claim and a
// release) under way, and get its result, so that the unauthenticated endpoint does not write to
// the store per request.
func TestReadyzSharesTheProbe(t *testing.T) {
	t.Parallel()
	store := &probeCounter{Store: openEmbedded(t), gate: make(chan struct{})}
	h, waiting := admin.HandlerAt(admin.Options{Store: store, StoreTimeout: time.Minute}, time.Now)
	const n = 16
	codes := make(chan int, n)
	for range n {
		go func() { codes <- readyz(h) }()
	}
	eventually.True(t, "every readiness probe to wait on the first", func() bool { return waiting() == n-1 || store.probes.Load() > 1 })
	close(store.gate)
	for range n {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("readyz: %d, want 200", code)
		}
	}
	if got := store.probes.Load(); got != 1 {
		t.Fatalf("%d concurrent /readyz made %d store probes, want 1", n, got)
	}
}

// TestReadyzProbesAtMostOnceASecond: a probe's result is served for a second after it ends; the
// first call after that probes again.
func TestReadyzProbesAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	store := &probeCounter{Store: openEmbedded(t), gate: make(chan struct{})}
	close(store.gate)
	c := testclock.New(time.Now())
	h, _ := admin.HandlerAt(admin.Options{Store: store}, c.Now)
	for _, step := range []struct {
		advance time.Duration
		probes  int32
	}{{0, 1}, {0, 1}, {500 * time.Millisecond, 1}, {499 * time.Millisecond, 1}, {time.Millisecond, 2}, {0, 2}, {time.Hour, 3}} {
		c.Advance(step.advance)
		if code := readyz(h); code != http.StatusOK {
			t.Fatalf("readyz: %d, want 200", code)
		}
		if got := store.probes.Load(); got != step.probes {
			t.Fatalf("after %s more: %d store probes, want %d", step.advance, got, step.probes)
		}
	}
}

// TestReadyzRefusesWhenWritesFail: /readyz answers 503 while the store answers Ping but refuses
// writes (Redis out of memory under noeviction), and 200 again once it takes writes (and the
// store's safety check has seen it). The clock moves a second between the checks: a probe's
// result is kept that long.
func TestReadyzRefusesWhenWritesFail(t *testing.T) {
	t.Parallel()
	store, raw := openRedis(t)
	c := testclock.New(time.Now())
	h, _ := admin.HandlerAt(admin.Options{Store: store}, c.Now)
	ctx := context.Background()
	if code := readyz(h); code != http.StatusOK {
		t.Fatalf("readyz: %d, want 200", code)
	}
	setMaxmemory := func(v string) {
		t.Helper()
		if err := raw.ConfigSet(ctx, "maxmemory", v).Err(); err != nil {
			t.Fatalf("CONFIG SET maxmemory %s: %v", v, err)
		}
	}
	setMaxmemory("1")
	if err := store.Ping(ctx); err != nil {
		t.Fatalf("Ping with writes refused: %v; the test needs a store that still answers Ping", err)
	}
	c.Advance(time.Second)
	if code := readyz(h); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz while Redis refuses writes: %d, want 503", code)
	}
	setMaxmemory("0")
	c.Advance(time.Second)
	// The failed write may have woken the store's safety check, whose verdict /readyz reports
	// until the next check passes: poll, moving the clock past each kept probe result.
	eventually.True(t, "/readyz to be ready again", func() bool {
		c.Advance(time.Second)
		return readyz(h) == http.StatusOK
	})
}

// openRedis starts a redis-server of the test's and opens a store on it; raw is a plain client
// of the server, for the test to change it.
func openRedis(t *testing.T) (store *redisstore.Store, raw *redis.Client) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	store, err = redisstore.New(redis.NewClient(opts), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	raw = redis.NewClient(opts)
	t.Cleanup(func() { _ = raw.Close() })
	return store, raw
}

// TestReadyzFailsOnceStopping: once the process begins to shut down (Options.Stopping closed),
// /readyz answers 503 shutting-down, the store still fit, so that a load balancer stops sending it
// requests while its calls in flight drain (docs/operations.md#shutdown).
func TestReadyzFailsOnceStopping(t *testing.T) {
	t.Parallel()
	store, _ := openRedis(t)
	stopping := make(chan struct{})
	h := admin.Handler(admin.Options{Store: store, Stopping: stopping})
	if code := readyz(h); code != http.StatusOK {
		t.Fatalf("readyz before stopping: %d, want 200", code)
	}
	close(stopping)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"urn:idemgateway:problem:shutting-down"`) {
		t.Errorf("readyz once stopping: %d %s, want 503 shutting-down", w.Code, w.Body)
	}
}
