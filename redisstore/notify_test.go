package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/redisstore"
)

var _ gateway.SettleNotifier = (*redisstore.Store)(nil)

// TestNotifySettled: every commit, release and mark-unknown of any client of the Redis reaches
// NotifySettled of every Store, with the key as the gateway wrote it (odd characters included);
// claims, renewals and refused writes do not.
func TestNotifySettled(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	listener := newStore(t, srv, redisstore.Options{})
	writer := newStore(t, srv, redisstore.Options{}) // another gateway process
	keys := make(chan string, 10)
	listener.NotifySettled(func(key string) { keys <- key })

	ctx := context.Background()
	step := func(key string, write func() (bool, error)) {
		t.Helper()
		if _, _, _, err := writer.Claim(ctx, key, "o", []byte("p"), time.Minute, time.Hour); err != nil {
			t.Fatal(err)
		}
		if ok, err := write(); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	odd := "t%7D/tool/{k}%25"
	step(odd, func() (bool, error) { return writer.Commit(ctx, odd, "o", []byte("r"), time.Hour) })
	step("released", func() (bool, error) { return writer.Release(ctx, "released", "o") })
	step("unknown", func() (bool, error) { return writer.MarkUnknown(ctx, "unknown", "o", []byte("u"), time.Hour) })
	if ok, _ := writer.Commit(ctx, odd, "stale", []byte("r"), time.Hour); ok {
		t.Fatal("a stale owner committed")
	}
	for _, want := range []string{odd, "released", "unknown"} {
		select {
		case got := <-keys:
			if got != want {
				t.Fatalf("notice for %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no notice for %q", want)
		}
	}
	select {
	case extra := <-keys:
		t.Fatalf("a notice for %q without a settle", extra)
	case <-time.After(100 * time.Millisecond):
	}
}
