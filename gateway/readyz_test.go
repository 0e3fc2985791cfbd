package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/record"
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

func readyz(admin http.Handler) int {
	w := httptest.NewRecorder()
	admin.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return w.Code
}

// TestF14ReadyzSharesTheProbe (audit F14: a store claim and release per /readyz): concurrent
// /readyz callers share the one store probe under way, and get its result.
func TestF14ReadyzSharesTheProbe(t *testing.T) {
	t.Parallel()
	store := &probeCounter{Store: openEmbedded(t), gate: make(chan struct{})}
	_, _, gw := newGatewayOn(t, store, ticketsYAML("http://127.0.0.1:1"), gateway.Options{StoreTimeout: time.Minute})
	admin := gw.AdminHandler("")
	const n = 16
	codes := make(chan int, n)
	for range n {
		go func() { codes <- readyz(admin) }()
	}
	eventually.True(t, "every readiness probe to wait on the first", func() bool { return gw.ReadyzWaiting() == n-1 || store.probes.Load() > 1 })
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

// TestF14ReadyzProbesAtMostOnceASecond (audit F14): a probe's result is served for a second after
// it ends; the first call after that probes again.
func TestF14ReadyzProbesAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	store := &probeCounter{Store: openEmbedded(t), gate: make(chan struct{})}
	close(store.gate)
	_, _, gw := newGatewayOn(t, store, ticketsYAML("http://127.0.0.1:1"), gateway.Options{})
	c := newClock()
	gw.SetClock(c.now)
	admin := gw.AdminHandler("")
	for _, step := range []struct {
		advance time.Duration
		probes  int32
	}{{0, 1}, {0, 1}, {500 * time.Millisecond, 1}, {499 * time.Millisecond, 1}, {time.Millisecond, 2}, {0, 2}, {time.Hour, 3}} {
		c.advance(step.advance)
		if code := readyz(admin); code != http.StatusOK {
			t.Fatalf("readyz: %d, want 200", code)
		}
		if got := store.probes.Load(); got != step.probes {
			t.Fatalf("after %s more: %d store probes, want %d", step.advance, got, step.probes)
		}
	}
}
