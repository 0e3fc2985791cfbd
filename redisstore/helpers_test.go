package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/record/recordtest"
	"github.com/idemgateway/idemgateway/redisstore"
)

var ctx = context.Background()

// newClient returns a client of srv, closed when the test ends.
func newClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatalf("parse %s: %v", srv.URL(), err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore returns a store on srv with its own client and prefix.
func newStore(t *testing.T, srv *redistest.Server, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	return newStoreAs(t, srv, opts, "")
}

// newStoreAs is newStore connected as user, whose password is "pw" ("": the default user).
func newStoreAs(t *testing.T, srv *redistest.Server, opts redisstore.Options, user string) *redisstore.Store {
	t.Helper()
	opts2, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		opts2.Username, opts2.Password = user, "pw"
	}
	s, err := redisstore.New(redis.NewClient(opts2), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// subject is the conformance suite's view of s: the TTL of a record is its key's PTTL, read
// through raw. Redis keeps time by its server's TIME, which no test can move: no Advance.
func subject(s *redisstore.Store, raw redis.Cmdable) recordtest.Subject {
	return recordtest.Subject{Store: s, TTL: func(key string) (time.Duration, error) {
		left, err := raw.PTTL(ctx, redisstore.RedisKey(s, key)).Result()
		if err == nil && left == -2 { // go-redis passes PTTL's -2 (no key) and -1 (no expiry) as they are
			err = fmt.Errorf("no record at %q", key)
		}
		return left, err
	}}
}

// subtestPrefix is a key prefix of its own for each subtest of the conformance suite.
func subtestPrefix(t *testing.T) string {
	return "test:" + strings.NewReplacer("{", "_", "}", "_").Replace(t.Name()) + ":"
}

// mustClaim claims key in s as owner "owner" for a minute with a record TTL of ttl, and fails
// the test unless the claim is granted.
func mustClaim(t *testing.T, s *redisstore.Store, key string, ttl time.Duration, payload []byte) {
	t.Helper()
	claimed, _, _, err := s.Claim(ctx, key, "owner", payload, time.Minute, ttl)
	if err != nil || !claimed {
		t.Fatalf("Claim(%q) = %v, %v; want claimed", key, claimed, err)
	}
}

// commandCalls returns the calls per command from INFO commandstats.
func commandCalls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		// cmdstat_evalsha:calls=3,usec=...
		name, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		calls[name] = n
	}
	return calls
}

// watchTimeout bounds the tests' waits for a subscription to be confirmed.
const watchTimeout = 5 * time.Second

// notices is a key's settle notices, as a WatchSettled function sends them.
type notices chan struct{}

func (n notices) settled() {
	select {
	case n <- struct{}{}:
	default: // one is enough to wake; the tests count them with a buffer larger than they need
	}
}

// watch watches key in s, failing the test unless the subscription is confirmed in watchTimeout.
func watch(t *testing.T, s *redisstore.Store, key string) (notices, func()) {
	t.Helper()
	n := make(notices, 10)
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	stop, err := s.WatchSettled(ctx, key, n.settled)
	if err != nil {
		stop()
		t.Fatalf("WatchSettled(%q): %v", key, err)
	}
	t.Cleanup(stop)
	return n, stop
}

// expectNotice fails the test unless n receives a notice within five seconds.
func expectNotice(t *testing.T, n notices, what string) {
	t.Helper()
	select {
	case <-n:
	case <-time.After(5 * time.Second):
		t.Fatalf("no notice for %s", what)
	}
}

// markers numbers the marker keys of expectNoNotice.
var markers atomic.Int64

// expectNoNotice fails the test if any of ns, watches of listener, has received a notice by the
// time a marker notice published after the settles they must not hear has reached listener: it
// watches a marker key of its own, PUBLISHes on its settle channel through pub (a client of the
// node that ran those settles' scripts: on Redis Cluster, the master of their slot), waits for
// the marker, and then requires ns empty. Redis delivers the messages of one node to a subscribed
// connection in the order it ran the PUBLISHes, and the store delivers a connection's notices in
// order from one goroutine, so an unwanted notice would have been delivered before the marker:
// no time window.
func expectNoNotice(t *testing.T, listener *redisstore.Store, pub redis.Cmdable, what string, ns ...notices) {
	t.Helper()
	key := fmt.Sprintf("marker/%d", markers.Add(1))
	marker, stop := watch(t, listener, key)
	defer stop()
	if err := pub.Publish(ctx, redisstore.SettledChannel(listener, key), "marker").Err(); err != nil {
		t.Fatalf("PUBLISH the marker %s: %v", key, err)
	}
	expectNotice(t, marker, "the marker "+key)
	for _, n := range ns {
		select {
		case <-n:
			t.Errorf("a notice for %s", what)
		default:
		}
	}
}

// settle claims key in s as owner "o", has a duplicate find it in progress (as a waiting duplicate
// does before and after it watches the key: only then does a settle PUBLISH), and commits it.
func settle(t *testing.T, s *redisstore.Store, key string) {
	t.Helper()
	if claimed, _, _, err := s.Claim(ctx, key, "o", []byte("p"), time.Minute, time.Hour); !claimed || err != nil {
		t.Fatalf("Claim(%q) = %v, %v", key, claimed, err)
	}
	duplicate(t, s, key)
	if ok, err := s.Commit(ctx, key, "o", []byte("r"), time.Hour); !ok || err != nil {
		t.Fatalf("Commit(%q) = %v, %v", key, ok, err)
	}
}

// duplicate claims key in s as another owner than "o", and expects to find it in progress.
func duplicate(t *testing.T, s *redisstore.Store, key string) {
	t.Helper()
	if claimed, state, _, err := s.Claim(ctx, key, "dup", []byte("p"), time.Minute, time.Hour); claimed || state != record.StateInProgress || err != nil {
		t.Fatalf("duplicate Claim(%q) = %v, %q, %v; want in progress", key, claimed, state, err)
	}
}

// unreplicatedLog collects the reports of Options.OnUnreplicated.
type unreplicatedLog struct {
	mu  sync.Mutex
	got []redisstore.Unreplicated
}

func (l *unreplicatedLog) record(_ context.Context, u redisstore.Unreplicated) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, u)
}

// take returns the reports since the last take.
func (l *unreplicatedLog) take() []redisstore.Unreplicated {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	return got
}
