package redisstore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/record/recordtest"
	"github.com/idemgateway/idemgateway/redisstore"
)

// roundTrips counts the round trips a client makes: one per command, one per pipeline.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

func TestNewWaitOptions(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Second})
	t.Cleanup(func() { _ = client.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = cluster.Close() })
	cases := []struct {
		name    string
		client  redis.UniversalClient
		opts    redisstore.Options
		wantErr string
	}{
		{"default timeout", client, redisstore.Options{WaitReplicas: 1}, ""},
		{"timeout below the read timeout", client, redisstore.Options{WaitReplicas: 1, WaitTimeout: 900 * time.Millisecond}, ""},
		{"negative replicas", client, redisstore.Options{WaitReplicas: -1}, "wait replicas -1 is negative"},
		{"negative timeout", client, redisstore.Options{WaitReplicas: 1, WaitTimeout: -time.Second}, "wait timeout -1s is negative"},
		{"timeout as long as the read timeout", client, redisstore.Options{WaitReplicas: 1, WaitTimeout: time.Second}, "not shorter than the client's read timeout 1s"},
		{"cluster: timeout beyond the read timeout", cluster, redisstore.Options{WaitReplicas: 1, WaitTimeout: 2 * time.Second}, "not shorter than the client's read timeout 1s"},
		{"long timeout without WAIT", client, redisstore.Options{WaitTimeout: time.Minute}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redisstore.New(tc.client, tc.opts)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("New() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestWaitReplicas runs Commit and MarkUnknown with WAIT against a primary with one replica.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t, redistest.Options{})
	replica := redistest.Start(t, redistest.Options{ReplicaOf: primary.Addr()})
	raw := newClient(t, primary)

	// waitTimeout is long enough for a loaded CI machine's replica to acknowledge (200 ms was
	// not), and below the client's read timeout (3 s).
	const waitTimeout = 900 * time.Millisecond
	// newWaitStore returns a store that waits for want replicas and counts its round trips.
	newWaitStore := func(t *testing.T, want int) (*redisstore.Store, *unreplicatedLog, *roundTrips) {
		t.Helper()
		log, hook := &unreplicatedLog{}, &roundTrips{}
		client := redis.NewClient(&redis.Options{Addr: primary.Addr()})
		client.AddHook(hook)
		s, err := redisstore.New(client, redisstore.Options{Prefix: t.Name() + ":", WaitReplicas: want,
			WaitTimeout: waitTimeout, OnUnreplicated: log.record})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, log, hook
	}
	commit := func(t *testing.T, s *redisstore.Store, key string) time.Duration {
		t.Helper()
		mustClaim(t, s, key, time.Minute, []byte("claim"))
		start := time.Now()
		ok, err := s.Commit(ctx, key, "owner", []byte("receipt"), time.Minute)
		if err != nil || !ok {
			t.Fatalf("Commit(%q) = %v, %v; want ok", key, ok, err)
		}
		return time.Since(start)
	}

	t.Run("acknowledged by the replica", func(t *testing.T) {
		s, log, hook := newWaitStore(t, 1)
		commit(t, s, "warm-up") // loads the scripts
		before := hook.n.Load()
		commit(t, s, "k")
		if rt := hook.n.Load() - before; rt != 2 {
			t.Errorf("claim + commit with WAIT took %d round trips, want 2 (the commit's EVALSHA and WAIT share one)", rt)
		}
		if got := log.take(); len(got) != 0 {
			t.Errorf("OnUnreplicated called: %+v", got)
		}
		if state, _, err := s.Get(ctx, "k"); err != nil || state != record.StateCommitted {
			t.Errorf("Get = %q, %v", state, err)
		}
	})

	t.Run("more replicas wanted than exist", func(t *testing.T) {
		s, log, _ := newWaitStore(t, 2)
		took := commit(t, s, "k")
		got := log.take()
		if len(got) != 1 || got[0] != (redisstore.Unreplicated{Op: redisstore.OpCommit, Key: "k", Acked: 1, Want: 2}) {
			t.Fatalf("OnUnreplicated got %+v, want one commit of k acknowledged by 1 of 2", got)
		}
		if took < waitTimeout {
			t.Errorf("Commit returned after %s, before the WAIT timeout of %s", took, waitTimeout)
		}
		// The write stands on the primary: the receipt replays.
		if _, state, stored, err := s.Claim(ctx, "k", "other", nil, time.Minute, time.Minute); err != nil || state != record.StateCommitted || string(stored.Settle) != "receipt" {
			t.Errorf("Claim after the unreplicated commit = %q, %q, %v; want the committed receipt", state, stored, err)
		}
	})

	t.Run("refused writes do not report", func(t *testing.T) {
		s, log, _ := newWaitStore(t, 2)
		mustClaim(t, s, "k", time.Minute, nil)
		if ok, err := s.Commit(ctx, "k", "someone else", []byte("r"), time.Minute); ok || err != nil {
			t.Errorf("Commit by another owner = %v, %v; want refused", ok, err)
		}
		if got := log.take(); len(got) != 0 {
			t.Errorf("OnUnreplicated called for a refused write: %+v", got)
		}
	})

	t.Run("script unknown to the server", func(t *testing.T) {
		s, log, hook := newWaitStore(t, 1)
		commit(t, s, "warm-up") // dials the connections (their setup runs through the hooks too)
		mustClaim(t, s, "k", time.Minute, nil)
		if err := raw.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		before := hook.n.Load()
		ok, err := s.MarkUnknown(ctx, "k", "owner", []byte("unknown"), time.Minute)
		if err != nil || !ok {
			t.Fatalf("MarkUnknown after SCRIPT FLUSH = %v, %v", ok, err)
		}
		if rt := hook.n.Load() - before; rt != 3 {
			t.Errorf("MarkUnknown of an unknown script took %d round trips, want 3 (EVALSHA+WAIT, EVAL+WAIT, the index's ZADD)", rt)
		}
		if got := log.take(); len(got) != 0 {
			t.Errorf("OnUnreplicated called: %+v", got)
		}
		if state, payload, err := s.Get(ctx, "k"); err != nil || state != record.StateUnknown || string(payload.Settle) != "unknown" {
			t.Errorf("Get = %q, %q, %v", state, payload, err)
		}
	})

	// Last, since it stops the replica. A paused replica is still connected, so a WAIT sent on a
	// connection that wrote nothing would count it at once; WAIT counts 0 only because it follows
	// the write on the connection that made it.
	t.Run("replica paused", func(t *testing.T) {
		s, log, _ := newWaitStore(t, 1)
		mustClaim(t, s, "k", time.Minute, nil)
		mustClaim(t, s, "m", time.Minute, nil)
		replica.Pause()
		defer replica.Resume()
		if ok, err := s.Commit(ctx, "k", "owner", []byte("r"), time.Minute); !ok || err != nil {
			t.Fatalf("Commit = %v, %v", ok, err)
		}
		if ok, err := s.MarkUnknown(ctx, "m", "owner", []byte("u"), time.Minute); !ok || err != nil {
			t.Fatalf("MarkUnknown = %v, %v", ok, err)
		}
		want := []redisstore.Unreplicated{
			{Op: redisstore.OpCommit, Key: "k", Acked: 0, Want: 1},
			{Op: redisstore.OpMarkUnknown, Key: "m", Acked: 0, Want: 1},
		}
		if got := log.take(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("OnUnreplicated got %+v, want %+v", got, want)
		}
	})
}

// TestConformanceWithWait runs the conformance suite with WAIT on a server without replicas: every
// settled write reports Acked 0 and the store behaves exactly as without WAIT.
func TestConformanceWithWait(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		return subject(newStore(t, srv, redisstore.Options{Prefix: subtestPrefix(t), WaitReplicas: 1, WaitTimeout: time.Millisecond,
			OnUnreplicated: func(_ context.Context, u redisstore.Unreplicated) {
				if u.Acked != 0 || u.Err != nil {
					t.Errorf("OnUnreplicated(%+v), want Acked 0 and no error", u)
				}
			}}), raw)
	})
}
