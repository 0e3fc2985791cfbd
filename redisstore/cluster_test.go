package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/record/recordtest"
	"github.com/idemgateway/idemgateway/redisstore"
)

// newClusterStore returns a store on a new client of cluster, closed when the test ends.
func newClusterStore(t *testing.T, cluster *redistest.Cluster, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	s, err := redisstore.New(client, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestCluster runs the conformance suite, with and without WAIT, and a concurrent-claim test on a
// three-master Redis Cluster, through redis.ClusterClient.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-master Redis Cluster (about 3 s); skipped with -short")
	}
	t.Parallel()
	cluster := redistest.StartCluster(t, 3, redistest.Options{})

	raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = raw.Close() })

	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		recordtest.Run(t, func(t *testing.T) recordtest.Subject {
			return subject(newClusterStore(t, cluster, redisstore.Options{Prefix: subtestPrefix(t)}), raw)
		})
	})

	// With WAIT the settling writes go through the pipeline to the key's master; the cluster has
	// no replicas, so every one reports Acked 0.
	t.Run("ConformanceWithWait", func(t *testing.T) {
		t.Parallel()
		recordtest.Run(t, func(t *testing.T) recordtest.Subject {
			return subject(newClusterStore(t, cluster, redisstore.Options{Prefix: subtestPrefix(t), WaitReplicas: 1,
				WaitTimeout: time.Millisecond, OnUnreplicated: func(_ context.Context, u redisstore.Unreplicated) {
					if u.Acked != 0 || u.Err != nil {
						t.Errorf("OnUnreplicated(%+v), want Acked 0 and no error", u)
					}
				}}), raw)
		})
	})

	t.Run("KeysSpreadOverAllMasters", func(t *testing.T) {
		t.Parallel()
		s := newClusterStore(t, cluster, redisstore.Options{})
		raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { _ = raw.Close() })
		nodes := map[string]bool{}
		for i := range 30 {
			key := fmt.Sprintf("spread/%d", i)
			mustClaim(t, s, key, time.Minute, nil)
			node, err := raw.MasterForKey(ctx, redisstore.RedisKey(s, key))
			if err != nil {
				t.Fatal(err)
			}
			nodes[node.Options().Addr] = true
			if ok, err := s.Commit(ctx, key, "owner", []byte("r"), time.Minute); !ok || err != nil {
				t.Fatalf("Commit(%q) = %v, %v", key, ok, err)
			}
		}
		if len(nodes) != 3 {
			t.Errorf("30 keys landed on %d masters, want 3", len(nodes))
		}
	})

	// Classic Pub/Sub is cluster-wide: a PUBLISH on the master of any key's slot reaches the one
	// connection that a store subscribes, on whichever node it is.
	t.Run("SettleNotices", func(t *testing.T) {
		t.Parallel()
		listener := newClusterStore(t, cluster, redisstore.Options{Prefix: subtestPrefix(t)})
		writer := newClusterStore(t, cluster, redisstore.Options{Prefix: subtestPrefix(t)})
		for i := range 10 {
			key := fmt.Sprintf("notice/%d", i)
			n, stop := watch(t, listener, key)
			settle(t, writer, key)
			expectNotice(t, n, key)
			stop()
		}
		n, _ := watch(t, listener, "watched")
		settle(t, writer, "not watched")
		raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { _ = raw.Close() })
		node, err := raw.MasterForKey(ctx, redisstore.RedisKey(writer, "not watched"))
		if err != nil {
			t.Fatal(err)
		}
		expectNoNotice(t, listener, node, "another key", n)
	})

	t.Run("ConcurrentClaimsOnOneKey", func(t *testing.T) {
		t.Parallel()
		testConcurrentClaims(t, newClusterStore(t, cluster, redisstore.Options{}), 50)
	})

	// Not parallel, so it runs first: the parallel subtests start when this function returns. It
	// moves one slot to another master, which is harmless to them: their clients follow MOVED.
	t.Run("WaitAfterSlotMoved", func(t *testing.T) {
		testWaitAfterSlotMoved(t, cluster)
	})
}

// testConcurrentClaims has n goroutines claim one key at once, each with its own owner and
// payload: exactly one claims it, and every other sees it in_progress with the winner's payload.
// Then the winner commits, and n goroutines claim again: every one gets the receipt (the settle
// part alone, record.Store.Claim).
func testConcurrentClaims(t *testing.T, s record.Store, n int) {
	t.Helper()
	type result struct {
		claimed bool
		state   string
		stored  record.Payload
		err     error
	}
	claimAll := func(round string) []result {
		results := make([]result, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				owner := round + strconv.Itoa(i)
				claimed, state, stored, err := s.Claim(ctx, "contended", owner, []byte("payload of "+owner), time.Minute, time.Minute)
				results[i] = result{claimed, state, stored, err}
			})
		}
		close(start)
		wg.Wait()
		return results
	}
	results := claimAll("first-")
	winner := -1
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("claim %d: %v", i, r.err)
		}
		if r.claimed {
			if winner >= 0 {
				t.Fatalf("claims %d and %d both claimed the key", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no claim won")
	}
	want := "payload of first-" + strconv.Itoa(winner)
	for i, r := range results {
		if r.state != record.StateInProgress || string(r.stored.Claim) != want || r.stored.Settle != nil {
			t.Errorf("claim %d = %q, %q; want in_progress, %q", i, r.state, r.stored, want)
		}
	}
	if ok, err := s.Commit(ctx, "contended", "first-"+strconv.Itoa(winner), []byte("receipt"), time.Minute); !ok || err != nil {
		t.Fatalf("Commit by the winner = %v, %v", ok, err)
	}
	for i, r := range claimAll("second-") {
		if r.err != nil || r.claimed || r.state != record.StateCommitted || r.stored.Claim != nil || string(r.stored.Settle) != "receipt" {
			t.Errorf("claim %d after the commit = %+v; want the committed receipt, its settle part alone", i, r)
		}
	}
}

// testWaitAfterSlotMoved moves the slot of a claimed record to another master behind the store's
// back (the resharding steps of redis-cli --cluster reshard: IMPORTING, MIGRATING, MIGRATE, NODE),
// then commits with WAIT. The store's slot map still names the old master, which answers MOVED; the
// store runs the script again through the cluster client and reports the write with Acked -1.
func testWaitAfterSlotMoved(t *testing.T, cluster *redistest.Cluster) {
	log := &unreplicatedLog{}
	s := newClusterStore(t, cluster, redisstore.Options{Prefix: "moved:", WaitReplicas: 1, WaitTimeout: time.Millisecond, OnUnreplicated: log.record})
	mustClaim(t, s, "k", time.Minute, []byte("claim")) // also loads the store's slot map
	rkey := redisstore.RedisKey(s, "k")

	nodes := map[string]*redis.Client{} // by address
	ids := map[string]string{}          // node id by address
	for _, addr := range cluster.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		nodes[addr], ids[addr] = c, id
	}
	slot, err := nodes[cluster.Addrs()[0]].ClusterKeySlot(ctx, rkey).Result()
	if err != nil {
		t.Fatal(err)
	}
	var from, to string
	for _, addr := range cluster.Addrs() {
		if nodes[addr].Exists(ctx, rkey).Val() == 1 {
			from = addr
		} else if to == "" {
			to = addr
		}
	}
	if from == "" || to == "" {
		t.Fatalf("record %s not found on exactly one master", rkey)
	}
	_, toPort, _ := strings.Cut(to, ":")
	must := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must(nodes[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
	must(nodes[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
	must(nodes[from], "MIGRATE", "127.0.0.1", toPort, rkey, 0, 5000)
	for _, addr := range []string{to, from} {
		must(nodes[addr], "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
	}
	for _, addr := range cluster.Addrs() {
		if addr != to && addr != from {
			must(nodes[addr], "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
		}
	}

	ok, err := s.Commit(ctx, "k", "owner", []byte("receipt"), time.Minute)
	if !ok || err != nil {
		t.Fatalf("Commit after the slot moved = %v, %v", ok, err)
	}
	if got := log.take(); len(got) != 1 || got[0] != (redisstore.Unreplicated{Op: redisstore.OpCommit, Key: "k", Acked: -1, Want: 1}) {
		t.Errorf("OnUnreplicated got %+v, want one commit of k with Acked -1", got)
	}
	if state, payload, err := s.Get(ctx, "k"); err != nil || state != record.StateCommitted || string(payload.Settle) != "receipt" {
		t.Errorf("Get = %q, %q, %v; want the receipt", state, payload, err)
	}
	if nodes[to].Exists(ctx, rkey).Val() != 1 {
		t.Errorf("record not on the new master %s", to)
	}
}
