package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
	"github.com/idemgateway/idemgateway/routes"
)

var _ record.SettleNotifier = (*redisstore.Store)(nil)

// subscribers returns PUBSUB NUMSUB of the settle channel of key in s: how many connections
// subscribe to it on the server.
func subscribers(t *testing.T, raw *redis.Client, s *redisstore.Store, key string) int64 {
	t.Helper()
	channel := redisstore.SettledChannel(s, key)
	n, err := raw.PubSubNumSub(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// settleChannels returns PUBSUB CHANNELS of every settle channel of prefix.
func settleChannels(t *testing.T, raw *redis.Client, prefix string) []string {
	t.Helper()
	channels, err := raw.PubSubChannels(ctx, prefix+"settled:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return channels
}

// TestWatchSettled: a Store hears every commit, release and mark-unknown that another Store on the
// same Redis (another gateway process) makes of a key it watches, with the key as the gateway
// wrote it (odd characters included), and nothing of the keys it does not watch: the server holds
// a subscription to the watched keys' channels only. Claims, renewals and refused writes are
// not announced.
func TestWatchSettled(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	listener := newStore(t, srv, redisstore.Options{})
	writer := newStore(t, srv, redisstore.Options{}) // another gateway process

	odd := "t%7D/tool/{k}%25"
	watched := map[string]notices{}
	for _, key := range []string{odd, "released", "unknown"} {
		watched[key], _ = watch(t, listener, key)
	}
	unwatched, _ := watch(t, writer, "unwatched") // heard by the writer's store only
	if got := settleChannels(t, raw, redisstore.DefaultPrefix); len(got) != 4 {
		t.Errorf("PUBSUB CHANNELS = %q, want the 4 watched keys' channels", got)
	}

	step := func(key string, write func() (bool, error)) {
		t.Helper()
		if _, _, _, err := writer.Claim(ctx, key, "o", []byte("p"), time.Minute, time.Hour); err != nil {
			t.Fatal(err)
		}
		if ok, err := writer.Renew(ctx, key, "o", time.Minute); !ok || err != nil {
			t.Fatal(ok, err)
		}
		duplicate(t, writer, key)
		if ok, err := write(); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	step(odd, func() (bool, error) { return writer.Commit(ctx, odd, "o", []byte("r"), time.Hour) })
	step("released", func() (bool, error) { return writer.Release(ctx, "released", "o") })
	step("unknown", func() (bool, error) { return writer.MarkUnknown(ctx, "unknown", "o", []byte("u"), time.Hour) })
	if ok, _ := writer.Commit(ctx, odd, "stale", []byte("r"), time.Hour); ok {
		t.Fatal("a stale owner committed")
	}
	for key, n := range watched {
		expectNotice(t, n, key)
	}
	settle(t, writer, "not watched by anyone")
	settle(t, listener, "unwatched")
	expectNotice(t, unwatched, "unwatched")
	for key, n := range watched {
		expectNoNotice(t, listener, raw, key+" without a settle of it", n)
	}
}

// TestSettleNoticeOnlyWhenWatched: a commit, mark-unknown or release PUBLISHes its notice only when a
// claim of another owner found the record in progress first (a duplicate that may wait for it); a
// settle that no duplicate saw sends nothing, saving a command per first execution. A subscriber
// of the key's channel hears the three watched settles first, in their order.
func TestSettleNoticeOnlyWhenWatched(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	s := newStore(t, srv, redisstore.Options{})
	sub := raw.Subscribe(ctx, redisstore.SettledChannel(s, "k"))
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	settles := []func() (bool, error){
		func() (bool, error) { return s.Commit(ctx, "k", "o", []byte("r"), time.Hour) },
		func() (bool, error) { return s.MarkUnknown(ctx, "k", "o", []byte("u"), time.Hour) },
		func() (bool, error) { return s.Release(ctx, "k", "o") },
	}
	for _, watched := range []bool{false, true} {
		if watched { // the other order: the notices of unwatched settles would read as these
			slices.Reverse(settles)
		}
		for _, write := range settles {
			if _, err := s.Delete(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if claimed, _, _, err := s.Claim(ctx, "k", "o", []byte("p"), time.Minute, time.Hour); !claimed || err != nil {
				t.Fatal(claimed, err)
			}
			if watched {
				duplicate(t, s, "k")
			}
			if ok, err := write(); !ok || err != nil {
				t.Fatal(ok, err)
			}
		}
	}
	var heard []string
	for range 3 {
		msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("after %q: %v", heard, err)
		}
		heard = append(heard, msg.(*redis.Message).Payload)
	}
	if want := []string{"released", "outcome_unknown", "committed"}; !slices.Equal(heard, want) {
		t.Errorf("notices = %q, want %q (the watched settles only)", heard, want)
	}
}

// TestWatchSettledListensOnReturn: when WatchSettled returns, the server already holds the
// subscription, so a settle right after it (the gateway reads the record again there) is heard.
func TestWatchSettledListensOnReturn(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	listener := newStore(t, srv, redisstore.Options{})
	writer := newStore(t, srv, redisstore.Options{})
	for i := range 50 {
		key := "k" + strings.Repeat("x", i)
		n, stop := watch(t, listener, key)
		if got := subscribers(t, raw, listener, key); got != 1 {
			t.Fatalf("watch %d: PUBSUB NUMSUB = %d right after WatchSettled, want 1", i, got)
		}
		settle(t, writer, key)
		expectNotice(t, n, key)
		stop()
	}
}

// TestWatchSettledUnwatch: watches of one key share one subscription, which lasts while one of
// them runs: a stopped watch hears nothing more, and once every watch stopped the server holds no
// subscription of the store.
func TestWatchSettledUnwatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	listener := newStore(t, srv, redisstore.Options{})
	writer := newStore(t, srv, redisstore.Options{})

	first, stopFirst := watch(t, listener, "k")
	second, stopSecond := watch(t, listener, "k")
	other, stopOther := watch(t, listener, "other")
	if got := subscribers(t, raw, listener, "k"); got != 1 {
		t.Fatalf("PUBSUB NUMSUB = %d for two watches of a key, want 1 (one shared connection)", got)
	}
	stopFirst()
	stopFirst() // a second call does nothing
	settle(t, writer, "k")
	expectNotice(t, second, "the watch still running")
	expectNoNotice(t, listener, raw, "a stopped watch", first)
	if got := subscribers(t, raw, listener, "k"); got != 1 {
		t.Fatalf("PUBSUB NUMSUB = %d with one watch left, want 1", got)
	}

	stopSecond()
	stopOther()
	eventually.True(t, "no settle channel subscribed", func() bool {
		return len(settleChannels(t, raw, redisstore.DefaultPrefix)) == 0
	})
	if _, err := writer.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	settle(t, writer, "k")
	settle(t, writer, "other")
	expectNoNotice(t, listener, raw, "k after its last watch stopped", second)
	expectNoNotice(t, listener, raw, "other after its watch stopped", other)

	// A key watched again is subscribed again.
	again, _ := watch(t, listener, "again")
	settle(t, writer, "again")
	expectNotice(t, again, "a key watched after every watch stopped")
}

// TestWatchSettledNotConfirmed: a watch that Redis does not confirm before its context ends (the
// server is paused) returns an error, and still holds its subscription until stopped: it hears
// settles once Redis confirms. Stopped before the confirmation, it is unsubscribed all the same.
func TestWatchSettledNotConfirmed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	s := newStore(t, srv, redisstore.Options{})
	_, stopOpen := watch(t, s, "open") // opens the Pub/Sub connection, so that watches below only wait for SUBSCRIBE
	// unconfirmed watches key while the server is paused, and stops the watch there if stopNow.
	unconfirmed := func(key string, n notices, stopNow bool) func() {
		t.Helper()
		srv.Pause()
		defer srv.Resume()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		stop, err := s.WatchSettled(ctx, key, n.settled)
		if err == nil {
			t.Fatalf("WatchSettled(%q) on a paused server: no error", key)
		}
		if stopNow {
			stop()
		}
		return stop
	}

	n := make(notices, 10)
	stop := unconfirmed("k", n, false)
	eventually.True(t, "the subscription", func() bool { return subscribers(t, raw, s, "k") == 1 })
	settle(t, s, "k")
	expectNotice(t, n, "a watch that returned before its confirmation")
	stop()
	eventually.True(t, "the unsubscription", func() bool { return subscribers(t, raw, s, "k") == 0 })

	early := make(notices, 10)
	unconfirmed("early", early, true)
	stopOpen()
	eventually.True(t, "no settle channel subscribed", func() bool {
		return len(settleChannels(t, raw, redisstore.DefaultPrefix)) == 0
	})
	settle(t, s, "early")
	expectNoNotice(t, s, raw, "a watch stopped before its confirmation", early)
}

// hourlyChecks are Options with an hour between safety checks: none runs scripts while a test
// counts the server's.
var hourlyChecks = redisstore.Options{CheckInterval: time.Hour}

// noSubscribeACL adds the user gw, password pw, allowed every command but SUBSCRIBE: Redis answers
// its SUBSCRIBEs with NOPERM, and never confirms a subscription.
var noSubscribeACL = []string{"--user", "gw", "on", ">pw", "~*", "&*", "+@all", "-subscribe"}

// TestWatchSettledWithoutSubscribeACL: no subscription leaks without SUBSCRIBE permission. For a
// Redis user without +subscribe, whose subscriptions are never confirmed, WatchSettled fails when
// its context ends, and the subscriptions end with their last watch all the same: none is left
// behind (to be subscribed again at every reconnection) however many watches come and go.
func TestWatchSettledWithoutSubscribeACL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{Args: noSubscribeACL})
	s := newStoreAs(t, srv, hourlyChecks, "gw")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	stop, err := s.WatchSettled(ctx, "first", func() {})
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WatchSettled without +subscribe = %v, want the context's deadline", err)
	}
	stop()
	if n := redisstore.Subscriptions(s); n != 0 {
		t.Fatalf("%d subscriptions after the watch stopped, want 0", n)
	}

	done, cancel := context.WithCancel(context.Background())
	cancel() // the watches below do not wait for a confirmation that never comes
	const watches = 300
	for i := range watches {
		key := fmt.Sprintf("k%d", i%100) // every key watched three times
		first, err := s.WatchSettled(done, key, func() {})
		if err == nil {
			t.Fatalf("WatchSettled(%q) with a done context: no error", key)
		}
		second, _ := s.WatchSettled(done, key, func() {})
		if n := redisstore.Subscriptions(s); n != 1 {
			t.Fatalf("watch %d: %d subscriptions with two watches of one key, want 1", i, n)
		}
		first()
		if n := redisstore.Subscriptions(s); n != 1 {
			t.Fatalf("watch %d: %d subscriptions with one watch left, want 1", i, n)
		}
		second()
		if n := redisstore.Subscriptions(s); n != 0 {
			t.Fatalf("watch %d: %d subscriptions after the last watch stopped, want 0", i, n)
		}
	}

	// The store still works, and its subscriptions still end with their watches.
	settle(t, s, "k1")
	stops := make([]func(), 0, 10)
	for i := range 10 {
		stop, _ := s.WatchSettled(done, fmt.Sprintf("k%d", i), func() {})
		stops = append(stops, stop)
	}
	if n := redisstore.Subscriptions(s); n != 10 {
		t.Fatalf("%d subscriptions for 10 running watches, want 10", n)
	}
	for _, stop := range stops {
		stop()
	}
	if n := redisstore.Subscriptions(s); n != 0 {
		t.Fatalf("%d subscriptions left after every watch stopped, want 0", n)
	}
}

// TestWaitWithoutSubscribeACL: with a Redis user without +subscribe, duplicates waiting under
// concurrency: wait still get the replay, by polling the store, and the gateway warns once (per
// minute, whatever the keys) that the settle notices do not work, naming the poll and the likely
// cause.
func TestWaitWithoutSubscribeACL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{Args: noSubscribeACL})
	var logs testlog.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))

	release := make(chan struct{}, 2)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	cfg, err := routes.Parse("routes.yaml", []byte(`
upstreams:
  tickets: {url: `+upstream.URL+`}
defaults: {concurrency: wait, wait_timeout: 10s}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	gatewayOn := func(s record.Store) string {
		gw, err := gateway.New(cfg, s, gateway.Options{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(gw)
		t.Cleanup(hs.Close)
		return hs.URL
	}
	raw := newClient(t, srv)
	executing, waiting := newStoreAs(t, srv, hourlyChecks, "gw"), newStoreAs(t, srv, hourlyChecks, "gw")
	first, duplicate := gatewayOn(executing), gatewayOn(waiting)
	t.Cleanup(func() { close(release) }) // before the gateways' servers close, which wait for their requests
	send := func(url, key string, decisions chan<- string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/tickets", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			decisions <- err.Error()
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		decisions <- resp.Header.Get("Idempotency-Decision")
	}

	for _, s := range []*redisstore.Store{executing, waiting} {
		if err := s.Safe(); err != nil { // the first safety check, which the gateway's first claim would wait for
			t.Fatal(err)
		}
	}
	for _, key := range []string{"one", "two"} {
		firstDecision, duplicateDecision := make(chan string, 1), make(chan string, 1)
		go send(first, key, firstDecision)
		eventually.True(t, "the first request's claim", func() bool {
			state, _, _ := executing.Get(ctx, "default/create_ticket/"+key)
			return state == record.StateInProgress
		})
		reads := scriptCalls(t, raw)
		go send(duplicate, key, duplicateDecision)
		// Its claim, then its read once WatchSettled has failed: it now sleeps until its next poll.
		eventually.True(t, "the duplicate's second read", func() bool { return scriptCalls(t, raw) >= reads+2 })
		if n := redisstore.Subscriptions(waiting); n != 1 {
			t.Errorf("%s: %d subscriptions while the duplicate waits, want 1 (its watch, unconfirmed)", key, n)
		}
		release <- struct{}{}
		if d := <-firstDecision; d != "execute" {
			t.Fatalf("%s: first decision %q, want execute", key, d)
		}
		select {
		case d := <-duplicateDecision:
			if d != "replay" {
				t.Fatalf("%s: duplicate's decision %q, want replay", key, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the duplicate still waits 5 s after the commit: it does not poll", key)
		}
		eventually.True(t, "the end of the duplicate's watch", func() bool { return redisstore.Subscriptions(waiting) == 0 })
	}

	const msg = `"msg":"settle notices not working: waiting duplicates poll the store instead of being woken"`
	out := logs.String()
	if n := strings.Count(out, msg); n != 1 {
		t.Fatalf("%d warnings that the settle notices do not work, want 1 (at most one a minute):\n%s", n, out)
	}
	for _, want := range []string{`"poll_every":"500ms"`, `+subscribe`, `Redis is slow`, `"key":"default/create_ticket/one"`, `did not confirm the subscription`} {
		if !strings.Contains(out, want) {
			t.Errorf("the warning does not say %s:\n%s", want, out)
		}
	}
}

// scriptCalls returns how many EVALSHA commands the server has run (INFO commandstats).
func scriptCalls(t *testing.T, raw *redis.Client) int {
	t.Helper()
	info, err := raw.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if stats, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			calls, _, _ := strings.Cut(stats, ",")
			n, err := strconv.Atoi(calls)
			if err != nil {
				t.Fatalf("INFO commandstats: %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// TestWatchSettledAfterReconnect: when the Pub/Sub connection drops, go-redis reconnects and
// subscribes again to the watched keys, which are heard again; new watches work too.
func TestWatchSettledAfterReconnect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	listener := newStore(t, srv, redisstore.Options{})
	writer := newStore(t, srv, redisstore.Options{})
	n, _ := watch(t, listener, "k")
	if killed, err := raw.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); killed != 1 || err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want 1", killed, err)
	}
	eventually.True(t, "the resubscription", func() bool { return subscribers(t, raw, listener, "k") == 1 })
	settle(t, writer, "k")
	expectNotice(t, n, "a key watched before the reconnection")
	after, _ := watch(t, listener, "after")
	settle(t, writer, "after")
	expectNotice(t, after, "a key watched after the reconnection")
}

// TestWatchSettledClose: Close ends the watches and closes the Pub/Sub connection; a watch after
// Close fails at once.
func TestWatchSettledClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	s := newStore(t, srv, redisstore.Options{})
	_, stop := watch(t, s, "k")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stop()
	eventually.True(t, "no settle channel subscribed", func() bool {
		return len(settleChannels(t, raw, redisstore.DefaultPrefix)) == 0
	})
	stop, err := s.WatchSettled(context.Background(), "k", func() {})
	if err == nil {
		t.Fatal("WatchSettled after Close: no error")
	}
	stop()
}

// countingStore is a Redis store that counts, for TestWaitAcrossGateways, the claims of each
// actor (found in the claim's payload, which records the request's actor), the watches the gateway
// starts and stops, and the notices the store delivers to them. Its WatchSettled waits for Redis's
// confirmation as long as the tests do (watchTimeout), not the gateway's 200 ms, so that a slow
// confirmation on a loaded machine cannot turn into a missed notice and a poll.
type countingStore struct {
	*redisstore.Store
	actors []string

	mu                      sync.Mutex
	claims                  map[string]int // by actor
	watches, stops, notices int
	watchErrs               []error
}

func (c *countingStore) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload, error) {
	claimed, state, stored, err := c.Store.Claim(ctx, key, owner, payload, lease, ttl)
	c.mu.Lock()
	for _, a := range c.actors {
		if bytes.Contains(payload, []byte(a)) {
			c.claims[a]++
		}
	}
	c.mu.Unlock()
	return claimed, state, stored, err
}

func (c *countingStore) WatchSettled(ctx context.Context, key string, settled func()) (func(), error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), watchTimeout)
	defer cancel()
	stop, err := c.Store.WatchSettled(ctx, key, func() {
		c.mu.Lock()
		c.notices++
		c.mu.Unlock()
		settled()
	})
	c.mu.Lock()
	c.watches++
	if err != nil {
		c.watchErrs = append(c.watchErrs, err)
	}
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.stops++
			c.mu.Unlock()
		})
		stop()
	}, err
}

// counts returns the claims of each actor, and the watches, stops and notices so far.
func (c *countingStore) counts() (claims map[string]int, watches, stops, notices int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.claims), c.watches, c.stops, c.notices
}

// TestWaitAcrossGateways: two gateway processes share one Redis; duplicates waiting under
// concurrency: wait in one are woken by a settle notice, not by the 500 ms poll, and get the
// replay. The waiting process subscribes to the key once, while they wait.
//
// Nothing is timed. The test waits until every duplicate waits (it has read the record a second
// time, after the watch started), then PUBLISHes a notice on the key's channel without a settle: a
// notice wakes every waiter of the key, and each reads the record again and watches afresh, which
// the poll never does, so the second watch shows the wake-up. Then the first request commits, and
// its notice (the second one delivered) wakes them for the replay.
func TestWaitAcrossGateways(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	cfg, err := routes.Parse("routes.yaml", []byte(`
upstreams:
  tickets: {url: `+upstream.URL+`}
defaults: {concurrency: wait, wait_timeout: 1h}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	gatewayOn := func(s record.Store) string {
		gw, err := gateway.New(cfg, s, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(gw)
		t.Cleanup(hs.Close)
		return hs.URL
	}
	const duplicates = 3
	actors := make([]string, duplicates)
	for i := range actors {
		actors[i] = fmt.Sprintf("duplicate-%d-of-TestWaitAcrossGateways", i)
	}
	executing := newStore(t, srv, redisstore.Options{})
	waiting := &countingStore{Store: newStore(t, srv, redisstore.Options{}), actors: actors, claims: map[string]int{}}
	first, duplicate := gatewayOn(executing), gatewayOn(waiting)
	// Registered after the gateways, so it runs before their Close, which waits for the requests:
	// when the test fails early, the first request commits and the duplicates are answered.
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	send := func(url, actor string, decisions chan<- string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/tickets", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "slow")
		req.Header.Set("X-Actor-ID", actor)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			decisions <- err.Error()
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		decisions <- resp.Header.Get("Idempotency-Decision")
	}
	const key = "default/create_ticket/slow"
	firstDecision, duplicateDecisions := make(chan string, 1), make(chan string, duplicates)
	go send(first, "first", firstDecision)
	eventually.True(t, "the first request's claim", func() bool {
		state, _, _ := executing.Get(ctx, key)
		return state == record.StateInProgress
	})
	for _, actor := range actors {
		go send(duplicate, actor, duplicateDecisions)
	}
	// everyRead reports whether each duplicate has read the record at least n times more than in
	// since, and the watches are as many as want.
	everyRead := func(since map[string]int, n, watches int) func() bool {
		return func() bool {
			claims, w, _, _ := waiting.counts()
			for _, a := range actors {
				if claims[a] < since[a]+n {
					return false
				}
			}
			return w == watches
		}
	}
	// A duplicate reads the record, watches the key (the first of them starts the one watch,
	// the others wait until it listens), reads it again, and waits.
	eventually.True(t, "every duplicate waiting: two reads each, one watch", everyRead(nil, 2, 1))
	if got := subscribers(t, raw, waiting.Store, key); got != 1 {
		t.Fatalf("PUBSUB NUMSUB = %d for %d waiting duplicates, want 1", got, duplicates)
	}

	// A notice without a settle: every waiter wakes, finds the record still in progress, and
	// waits again under a new watch.
	before, _, _, _ := waiting.counts()
	if err := raw.Publish(ctx, redisstore.SettledChannel(waiting.Store, key), "spurious").Err(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "every duplicate woken by the notice: two more reads each, a second watch", everyRead(before, 2, 2))

	close(release)
	if d := <-firstDecision; d != "execute" {
		t.Fatalf("first decision %q, want execute", d)
	}
	for range duplicates {
		if d := <-duplicateDecisions; d != "replay" {
			t.Errorf("duplicate's decision %q, want replay", d)
		}
	}
	// Each notice woke the waiters and ended their watch.
	if _, watches, stops, notices := waiting.counts(); watches != 2 || stops != 2 || notices != 2 {
		t.Errorf("%d watches, %d stopped, %d notices delivered; want 2 of each (the spurious notice, then the commit's)", watches, stops, notices)
	}
	waiting.mu.Lock()
	if len(waiting.watchErrs) > 0 {
		t.Errorf("WatchSettled failed: %v", waiting.watchErrs)
	}
	waiting.mu.Unlock()
	eventually.True(t, "the duplicates' unwatch", func() bool { return subscribers(t, raw, waiting.Store, key) == 0 })
}
