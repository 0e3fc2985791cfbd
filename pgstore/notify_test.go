package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/pgtest"
)

// TestSettleWakesWaitersOfAnotherStore: two stores on one database, as two gateways: a duplicate
// claimed through b finds the record in progress and watches it; the commit through a, and a
// release of another watched key, wake b's watchers; a key nobody watches sends no notice, and a
// stopped watch hears nothing.
func TestSettleWakesWaitersOfAnotherStore(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pool := newPool(t, srv)
	a, b := openStore(t, pool, "shared"), openStore(t, newPool(t, srv), "shared")

	woken := map[string]chan struct{}{}
	for _, key := range []string{"committed", "released", "stopped"} {
		if claimed, _, _, err := a.Claim(ctx, key, "first", []byte("p"), time.Minute, time.Hour); !claimed || err != nil {
			t.Fatalf("Claim(%s) = %v, %v", key, claimed, err)
		}
		if claimed, state, _, err := b.Claim(ctx, key, "duplicate", []byte("p"), time.Minute, time.Hour); claimed || state != "in_progress" || err != nil {
			t.Fatalf("duplicate Claim(%s) = %v, %q, %v", key, claimed, state, err)
		}
		ch := make(chan struct{}, 4)
		woken[key] = ch
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		stop, err := b.WatchSettled(wctx, key, func() { ch <- struct{}{} })
		cancel()
		if err != nil {
			t.Fatalf("WatchSettled(%s): %v", key, err)
		}
		if key == "stopped" {
			stop()
		} else {
			t.Cleanup(stop)
		}
	}
	var committedAt time.Time
	for _, key := range []string{"stopped", "committed"} {
		if ok, err := a.Commit(ctx, key, "first", []byte("receipt"), 0); !ok || err != nil {
			t.Fatalf("Commit(%s) = %v, %v", key, ok, err)
		}
		committedAt = time.Now()
	}
	if ok, err := a.Release(ctx, "released", "first"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	for _, key := range []string{"committed", "released"} {
		select {
		case <-woken[key]:
			if key == "committed" {
				t.Logf("the watcher on the other store woken %v after the commit returned", time.Since(committedAt))
			}
		case <-time.After(30 * time.Second): // bounds a hang, never a speed
			t.Errorf("the watcher of %s was not woken by the settle through the other store", key)
		}
	}
	// The stopped watch: the notices come in order on one connection and are passed on in turn,
	// so one for "stopped", settled first, would have been passed on before the others.
	select {
	case <-woken["stopped"]:
		t.Error("a stopped watch was called")
	default:
	}
}
