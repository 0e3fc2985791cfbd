package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpfront"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/pgtest"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testclock"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/internal/wiretap"
	"github.com/idemgateway/idemgateway/pgstore"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
	"github.com/idemgateway/idemgateway/routes"
)

// hangTimeout bounds what a test waits for an answer or a state that must come; it is never
// an assertion of speed, only a bound on a hang.
const hangTimeout = 30 * time.Second

// newGateway serves a gateway on a store of open in front of upstream, with one non_idempotent
// route POST /v1/tickets (receipt remote_id /id); defaults is the YAML flow mapping of the file's
// defaults block. It returns the server, the store and the gateway.
func newGateway(t *testing.T, open storeFactory, upstream string, opts gateway.Options, defaults ...string) (*httptest.Server, record.Store, *gateway.Gateway) {
	t.Helper()
	return newGatewayOn(t, open(t), ticketsYAML(upstream, defaults...), opts)
}

// ticketsYAML is the routes file of newGateway.
func ticketsYAML(upstream string, defaults ...string) string {
	if len(defaults) == 0 {
		defaults = []string{"{lock_lease: 2s}"}
	}
	return fmt.Sprintf(`
upstreams:
  tickets: {url: %q, timeout: 5s}
defaults: %s
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent, receipt: {remote_id: /id}}
`, upstream, defaults[0])
}

// newGatewayYAML serves a gateway on a store of open with the routes file yaml.
func newGatewayYAML(t *testing.T, open storeFactory, yaml string, opts gateway.Options) (*httptest.Server, record.Store, *gateway.Gateway) {
	t.Helper()
	return newGatewayOn(t, open(t), yaml, opts)
}

// fronts are the front ends the gateways of these tests serve kind: mcp routes with, as
// cmd/idemgateway's does.
var fronts = map[routes.Kind]gateway.NewFront{routes.KindMCP: mcpfront.New}

// newGatewayOn serves a gateway on store with the routes file yaml (with fronts, unless opts has
// its own).
func newGatewayOn(t *testing.T, store record.Store, yaml string, opts gateway.Options) (*httptest.Server, record.Store, *gateway.Gateway) {
	t.Helper()
	cfg, err := routes.Parse("routes.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Fronts == nil {
		opts.Fronts = fronts
	}
	gw, err := gateway.New(cfg, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv, store, gw
}

// storeFactory opens a new, empty store for the test t; the store is closed when t ends.
type storeFactory func(t *testing.T) record.Store

// storeKind is a store the gateway's tests run on, by name.
type storeKind struct {
	name string
	open storeFactory
}

// storeKinds are the stores the gateway's behaviour tests run on: the embedded store, and Redis (a
// redis-server of the test's own, started by internal/redistest), whose settle notices wake the
// waiters of other gateway processes.
var storeKinds = []storeKind{
	{"embedded", openEmbedded},
	{"redis", openRedis},
}

// everyStore is storeKinds and PostgreSQL: the stores the tests of the record's two parts run on
// (settlepart_test.go).
var everyStore = append(storeKinds[:len(storeKinds):len(storeKinds)], storeKind{"postgres", openPostgres})

// forEachStore runs test as a parallel subtest per store kind of storeKinds, named after it.
func forEachStore(t *testing.T, test func(t *testing.T, open storeFactory)) {
	t.Helper()
	forStores(t, storeKinds, test)
}

// forStores runs test as a parallel subtest per store kind of kinds, named after it.
func forStores(t *testing.T, kinds []storeKind, test func(t *testing.T, open storeFactory)) {
	t.Helper()
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			test(t, kind.open)
		})
	}
}

// openEmbedded opens a boltstore in a temporary directory of t.
func openEmbedded(t *testing.T) record.Store {
	t.Helper()
	store, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// openRedis starts a redis-server for t and returns a store on it.
func openRedis(t *testing.T) record.Store {
	t.Helper()
	store, _ := openRedisServer(t, redistest.Options{})
	return store
}

// openPostgres starts a PostgreSQL server for t and returns a store on it.
func openPostgres(t *testing.T) record.Store {
	t.Helper()
	srv := pgtest.Start(t)
	pool, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(context.Background(), pool, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openRedisServer starts a redis-server for t with opts and returns a store on it, and the server.
func openRedisServer(t *testing.T, opts redistest.Options) (*redisstore.Store, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t, opts)
	return redisStoreOn(t, srv), srv
}

// redisStoreOn returns a store of its own (its own client and notice connection, as another
// gateway process has) on srv.
func redisStoreOn(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	copts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	store, err := redisstore.New(redis.NewClient(copts), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// rawRedis returns a plain client of srv, for a test to read or change the server directly;
// it is closed when t ends.
func rawRedis(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	copts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	raw := redis.NewClient(copts)
	t.Cleanup(func() { _ = raw.Close() })
	return raw
}

// redisRecordKey is the Redis key redisstore keeps the record at store key skey under, with the
// default prefix (redisstore/key.go; the test keys need no escaping).
func redisRecordKey(skey string) string {
	return redisstore.DefaultPrefix + "{" + skey + "}"
}

// setMaxmemory sets the server's maxmemory: "1" makes every write that grows memory fail with
// OOM (noeviction), "0" lifts the limit.
func setMaxmemory(t *testing.T, raw *redis.Client, v string) {
	t.Helper()
	if err := raw.ConfigSet(context.Background(), "maxmemory", v).Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory %s: %v", v, err)
	}
}

// claimCounter is a real store that counts the claims it has answered.
type claimCounter struct {
	record.Store
	claims atomic.Int32
}

func (c *claimCounter) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload, error) {
	claimed, state, stored, err := c.Store.Claim(ctx, key, owner, payload, lease, ttl)
	c.claims.Add(1)
	return claimed, state, stored, err
}

// openEmbeddedAt returns a factory of embedded stores whose leases and TTLs run on c.
func openEmbeddedAt(c *testclock.Clock) storeFactory {
	return func(t *testing.T) record.Store {
		t.Helper()
		store, err := boltstore.Open(t.TempDir(), boltstore.Options{Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		return store
	}
}

// Stores that go away and come back, for the tests of settles (settle_test.go, commit_test.go)
// and leases that hold (lease_test.go): the real embedded store closed and opened again, and a
// real redis-server stopped and restarted, or reached through a proxy that loses replies or
// stalls connections.

// settleYAML is the routes file of the settle tests: create_ticket on upstream, whose timeout
// upTimeout is also how long a client waits for its receipt to be stored, with lock_lease lease.
func settleYAML(upstream string, upTimeout, lease time.Duration) string {
	return fmt.Sprintf(`
upstreams:
  tickets: {url: %q, timeout: %s}
defaults: {lock_lease: %s}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent, receipt: {remote_id: /id}}
`, upstream, upTimeout, lease)
}

// outageKinds are the stores a test can take down (down) and bring back (up) with their records.
var outageKinds = []struct {
	name string
	open func(t *testing.T) (store record.Store, down, up func())
}{
	{"embedded", func(t *testing.T) (record.Store, func(), func()) {
		s := newReopenable(t)
		return s, s.down, s.up
	}},
	{"redis", func(t *testing.T) (record.Store, func(), func()) {
		// AOF: the claim survives the stop (SIGTERM writes it out).
		store, srv := openRedisServer(t, redistest.Options{AppendOnly: true})
		// Back means answering: go-redis's pool, after as many failed dials as it has
		// connections, answers its last dial error at once until a dial of its own, once a
		// second, succeeds.
		back := func() {
			srv.Restart()
			eventually.True(t, "the Redis store to answer again", func() bool { return store.Ping(context.Background()) == nil })
		}
		return store, srv.Stop, back
	}},
}

// forEachOutage runs test as a parallel subtest per kind of outageKinds.
func forEachOutage(t *testing.T, test func(t *testing.T, store record.Store, down, up func())) {
	t.Helper()
	for _, kind := range outageKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			store, down, up := kind.open(t)
			test(t, store, down, up)
		})
	}
}

// reopenable is the embedded store in one data directory, closed by down and opened again by up:
// while it is closed, every call fails as on a store that is gone. With loseClaimReply set, the
// next Claim lands, then the store closes before its reply: the claim's reply is lost.
type reopenable struct {
	t              *testing.T
	dir            string
	mu             sync.RWMutex
	s              *boltstore.Store
	loseClaimReply atomic.Bool
}

func newReopenable(t *testing.T) *reopenable {
	r := &reopenable{t: t, dir: t.TempDir()}
	r.up()
	t.Cleanup(r.down)
	return r
}

// up opens the store (again).
func (r *reopenable) up() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s != nil {
		return
	}
	s, err := boltstore.Open(r.dir, boltstore.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	r.s = s
}

// down closes the store; calls fail until up.
func (r *reopenable) down() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s != nil {
		_ = r.s.Close()
		r.s = nil
	}
}

var errStoreDown = errors.New("the embedded store is closed")

// use runs f on the open store, or fails with errStoreDown.
func (r *reopenable) use(f func(s *boltstore.Store) error) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.s == nil {
		return errStoreDown
	}
	return f(r.s)
}

func (r *reopenable) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (claimed bool, state string, stored record.Payload, err error) {
	err = r.use(func(s *boltstore.Store) (err error) {
		claimed, state, stored, err = s.Claim(ctx, key, owner, payload, lease, ttl)
		return err
	})
	if err == nil && r.loseClaimReply.CompareAndSwap(true, false) {
		r.down()
		return false, "", record.Payload{}, errors.New("the store went away before the claim's reply")
	}
	return claimed, state, stored, err
}

func (r *reopenable) Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (ok bool, err error) {
	err = r.use(func(s *boltstore.Store) (err error) {
		ok, err = s.Reclaim(ctx, key, from, owner, payload, lease, ttl)
		return err
	})
	return ok, err
}

func (r *reopenable) Renew(ctx context.Context, key, owner string, lease time.Duration) (ok bool, err error) {
	err = r.use(func(s *boltstore.Store) (err error) { ok, err = s.Renew(ctx, key, owner, lease); return err })
	return ok, err
}

func (r *reopenable) Commit(ctx context.Context, key, owner string, payload []byte, ttl time.Duration) (ok bool, err error) {
	err = r.use(func(s *boltstore.Store) (err error) { ok, err = s.Commit(ctx, key, owner, payload, ttl); return err })
	return ok, err
}

func (r *reopenable) MarkUnknown(ctx context.Context, key, owner string, payload []byte, ttl time.Duration) (ok bool, err error) {
	err = r.use(func(s *boltstore.Store) (err error) {
		ok, err = s.MarkUnknown(ctx, key, owner, payload, ttl)
		return err
	})
	return ok, err
}

func (r *reopenable) Release(ctx context.Context, key, owner string) (ok bool, err error) {
	err = r.use(func(s *boltstore.Store) (err error) { ok, err = s.Release(ctx, key, owner); return err })
	return ok, err
}

func (r *reopenable) Get(ctx context.Context, key string) (state string, payload record.Payload, err error) {
	err = r.use(func(s *boltstore.Store) (err error) { state, payload, err = s.Get(ctx, key); return err })
	return state, payload, err
}

func (r *reopenable) ListUnknown(ctx context.Context, prefix, cursor string, limit int) (keys []string, payloads []record.Payload, next string, err error) {
	err = r.use(func(s *boltstore.Store) (err error) {
		keys, payloads, next, err = s.ListUnknown(ctx, prefix, cursor, limit)
		return err
	})
	return keys, payloads, next, err
}

func (r *reopenable) Delete(ctx context.Context, key string) (existed bool, err error) {
	err = r.use(func(s *boltstore.Store) (err error) { existed, err = s.Delete(ctx, key); return err })
	return existed, err
}

func (r *reopenable) Ping(ctx context.Context) error {
	return r.use(func(s *boltstore.Store) error { return s.Ping(ctx) })
}

// faultProxy is a TCP proxy in front of a redis-server, for faults of the network between the
// gateway and Redis that stopping the server cannot make: a reply lost after Redis ran the
// command, a partition, a connection that stalls while new ones work.
type faultProxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	conns     []*proxiedConn
	loseReply bool   // the next reply is lost, and then the proxy partitions
	partition bool   // nothing passes, either way, on any connection
	stallNext []byte // the next connection to send a command that holds these bytes stalls; nil: none
	closed    chan struct{}
}

// proxiedConn is a client's connection and the proxy's connection to Redis for it.
type proxiedConn struct {
	client, server net.Conn
	stalled        atomic.Bool // nothing passes any more, either way
}

// newFaultProxy proxies to srv until t ends.
func newFaultProxy(t *testing.T, srv *redistest.Server) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: srv.Addr(), closed: make(chan struct{})}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, for a client of the Redis behind it.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// store returns a Redis store whose client reaches Redis through the proxy, with its context
// deadlines applied to the connection as the idemgateway command sets them (its client
// discards a connection whose call timed out), keeping minIdle connections open when idle.
func (p *faultProxy) store(t *testing.T, minIdle int) *redisstore.Store {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MinIdleConns: minIdle})
	store, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func (p *faultProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil { // Redis is down: the client sees its connection close
			client.Close()
			continue
		}
		c := &proxiedConn{client: client, server: server}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go p.pipe(c, client, server, false)
		go p.pipe(c, server, client, true)
	}
}

// pipe copies from one side of c to the other until either closes; replies is whether this is
// the direction from Redis.
func (p *faultProxy) pipe(c *proxiedConn, from, to net.Conn, replies bool) {
	defer c.client.Close()
	defer c.server.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && p.passes(c, replies, buf[:n]) {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// passes says whether bytes read on c in one direction go on; a stalled connection holds them
// until the proxy closes.
func (p *faultProxy) passes(c *proxiedConn, replies bool, sent []byte) bool {
	if c.stalled.Load() {
		<-p.closed
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.partition:
		return false
	case replies && p.loseReply:
		p.loseReply, p.partition = false, true
		return false
	case !replies && p.stallNext != nil && bytes.Contains(sent, p.stallNext):
		p.stallNext = nil
		c.stalled.Store(true)
		return false
	}
	return true
}

// loseNextReply makes the proxy drop the next reply from Redis, and partition from then on, until
// heal: Redis ran the command, and its client never hears of it.
func (p *faultProxy) loseNextReply() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseReply = true
}

// heal lets traffic pass again, on new connections (the ones that lost a reply are stalled for
// good, as after a partition).
func (p *faultProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.stalled.Store(true)
	}
	p.loseReply, p.partition = false, false
}

// stallNextCommandOn stalls the connection that carries the next command holding the bytes of
// rkey (a record's Redis key: a transition of that record), for good: the command never reaches
// Redis, no byte passes either way any more, and the connection stays open; the other connections,
// and the commands of other keys (the store's safety check), work. It returns whether a command
// has stalled.
func (p *faultProxy) stallNextCommandOn(rkey string) (stalled func() bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallNext = []byte(rkey)
	return func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stallNext == nil
	}
}

func (p *faultProxy) close() {
	close(p.closed)
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
}

// countingUpstream answers 201 {"id":"T-<n>"} to every request (502 when X-Fail is set) and counts.
func countingUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		i := n.Add(1)
		if r.Header.Get("X-Fail") != "" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-%d"}`, i)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// heldUpstream is an upstream that holds each call until the test releases it, then answers
// status(n) (201 when status is nil) with {"id":"T-<n>"}, n counting its calls from 1.
type heldUpstream struct {
	*httptest.Server
	calls  atomic.Int32
	status func(n int32) int
	mu     sync.Mutex
	gates  map[int32]chan struct{} // closed to release call n
	all    bool                    // every call released, present and future
}

func newHeldUpstream(t *testing.T, status func(n int32) int) *heldUpstream {
	t.Helper()
	h := &heldUpstream{status: status, gates: map[int32]chan struct{}{}}
	ending := t.Context() // done before the cleanups, which wait for the calls to end
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := h.calls.Add(1)
		select {
		case <-h.gate(n):
		case <-r.Context().Done():
			return
		case <-ending.Done(): // the test ended (or failed) with the call held: break it off
			panic(http.ErrAbortHandler)
		}
		code := http.StatusCreated
		if h.status != nil {
			code = h.status(n)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"id":"T-%d"}`, n)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *heldUpstream) gate(n int32) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.gates[n]
	if g == nil {
		g = make(chan struct{})
		h.gates[n] = g
		if h.all {
			close(g)
		}
	}
	return g
}

// release lets call n answer.
func (h *heldUpstream) release(n int32) {
	g := h.gate(n)
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-g:
	default:
		close(g)
	}
}

// releaseAll lets every call answer, those to come included.
func (h *heldUpstream) releaseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.all = true
	for _, g := range h.gates {
		select {
		case <-g:
		default:
			close(g)
		}
	}
}

// awaitCalls waits until the upstream has received n calls.
func (h *heldUpstream) awaitCalls(t *testing.T, n int32) {
	t.Helper()
	eventually.True(t, "the upstream calls", func() bool { return h.calls.Load() >= n })
}

// reply is the gateway's answer as send and do read it: the problem decoded when the body is one.
type reply struct {
	status     int
	decision   string // Idempotency-Decision
	retryAfter string
	header     http.Header
	body       string
	problem    map[string]any // the body decoded, when it is application/problem+json
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.decision) }

// send posts body to url's /v1/tickets with key (none when empty) and reads the whole answer. It
// reports failures as errors, so that goroutines other than the test's can call it.
func send(url, key, body string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/tickets", strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return roundTrip(req)
}

// roundTrip sends req and reads the whole answer, for send and do.
func roundTrip(req *http.Request) (reply, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: reading the answer (%d): %w", req.Method, req.URL, resp.StatusCode, err)
	}
	r := reply{status: resp.StatusCode, decision: resp.Header.Get("Idempotency-Decision"),
		retryAfter: resp.Header.Get("Retry-After"), header: resp.Header, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		_ = json.Unmarshal(b, &r.problem)
	}
	return r, nil
}

// sendAsync sends the request from a goroutine of its own; the channel receives its answer.
func sendAsync(url, key, body string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := send(url, key, body)
		ch <- result{r, err}
	}()
	return ch
}

// result is an answer of sendAsync, or why there is none.
type result struct {
	reply
	err error
}

// await receives an answer of sendAsync, failing the test when the request failed or no answer
// comes within the deadline that only bounds a hang.
func await(t *testing.T, ch <-chan result, what string) reply {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.reply
	case <-time.After(hangTimeout):
		t.Fatalf("%s: no answer within %s", what, hangTimeout)
		return reply{}
	}
}

// regressionRoutes is the routes file of the regression and bounds tests, the upstream's URL at %s.
const regressionRoutes = `
upstreams:
  up: {url: %s}
defaults: {max_body_bytes: 64}
routes:
  - {name: create, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent,
     fingerprint: {query: [dry_run]}, receipt: {remote_id: /id}}
  - {name: comment, upstream: up, method: POST, path: "/t/{id}/comment", class: non_idempotent, opaque_path_params: [id]}
  - {name: put, upstream: up, method: PUT, path: /v1/tickets, class: idempotent, on_unknown_outcome: release}
  - {name: read, upstream: up, method: GET, path: "/v1/tickets/{id}", class: read_only}
`

// do sends method url with header and body, and reads the whole answer.
func do(t *testing.T, method, url string, header http.Header, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	r, err := roundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// problemType is the name of a's problem type, "" when a is no problem.
func problemType(a reply) string {
	s, _ := a.problem["type"].(string)
	return strings.TrimPrefix(s, problem.TypePrefix)
}

// keyHash is the routes file's spelling of an API key: sha256:<hex>.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// adminDo sends method path (with body as application/json when not "") to admin, with the
// bearer token when not "", and returns the status and the JSON answer, decoded when there is one.
func adminDo(t *testing.T, admin http.Handler, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	admin.ServeHTTP(w, req)
	var m map[string]any
	if w.Body.Len() > 0 && strings.Contains(w.Header().Get("Content-Type"), "json") {
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, w.Body)
		}
	}
	return w.Code, m
}

// metricValue returns the value of the counter or gauge, or the sample count of the histogram, name with
// the label pairs labels (name, value, ...); 0 when there is no such series.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	v, err := gatherValue(reg, name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// gatherValue is metricValue for any goroutine: it returns the error of the gathering.
func gatherValue(reg *prometheus.Registry, name string, labels ...string) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount()), nil
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue(), nil
			}
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}

// logLines returns the JSON log lines in logs.
func logLines(t *testing.T, logs *testlog.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// hasLog reports whether logs hold a line at level whose message contains msg and whose key is key.
func hasLog(t *testing.T, logs *testlog.Buffer, level, msg, key string) bool {
	t.Helper()
	for _, l := range logLines(t, logs) {
		if l["level"] == level && strings.Contains(fmt.Sprint(l["msg"]), msg) && l["key"] == key {
			return true
		}
	}
	return false
}

// metaKey is the params._meta member the tests' routes read keys from.
const metaKey = "io.github.idemgateway/idempotencyKey"

// mcpUpstream is a real MCP server (go-sdk) behind the gateway, with tools that count their
// calls: create_ticket (structuredContent {id}), search_tickets (readOnlyHint), failing_create
// (an isError result), broken_create (acts, then answers JSON-RPC error -32603),
// progress_create (a progress notification, then waits for the client to have it before it
// answers), slow_create (sleeps arguments.ms, or without it waits for the test to close finish,
// whatever the client does).
type mcpUpstream struct {
	url      string
	requests atomic.Int32 // HTTP requests the server got
	mu       sync.Mutex
	calls    map[string]int // tool calls by tool
	finished map[string]int // slow_create calls that slept to the end, and were not cancelled
	progress chan struct{}  // closed by the test once the client got progress_create's notification
	started  chan struct{}  // gets a value when a slow_create call starts, if one is waited for
	finish   chan struct{}  // closed by the test to end a slow_create call without arguments.ms
	server   *mcp.Server
}

// newMCPUpstream serves a go-sdk MCP server with opts (nil: sessions, SSE answers).
func newMCPUpstream(t *testing.T, opts *mcp.StreamableHTTPOptions) *mcpUpstream {
	t.Helper()
	u := &mcpUpstream{calls: map[string]int{}, finished: map[string]int{}, progress: make(chan struct{}), started: make(chan struct{}, 1), finish: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object"}`)
	add := func(name string, ann *mcp.ToolAnnotations, h func(ctx context.Context, req *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error)) {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: schema, Annotations: ann}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.calls[name]++
			n := u.calls[name]
			u.mu.Unlock()
			return h(ctx, req, n)
		})
	}
	created := func(n int) *mcp.CallToolResult {
		id := fmt.Sprintf("T-%d", n)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created " + id}}, StructuredContent: map[string]any{"id": id}}
	}
	add("create_ticket", nil, func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		return created(n), nil
	})
	add("search_tickets", &mcp.ToolAnnotations{ReadOnlyHint: true}, func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("search %d", n)}}}, nil
	})
	add("failing_create", nil, func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the title is taken"}}}, nil
	})
	add("broken_create", nil, func(_ context.Context, _ *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32603, Message: "the ticket was created, then the server broke"}
	})
	add("progress_create", nil, func(ctx context.Context, req *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2}); err != nil {
			return nil, err
		}
		select { // the final answer waits for the client to have seen the progress: it was streamed live
		case <-u.progress:
		case <-time.After(hangTimeout):
			return nil, errors.New("the client never got the progress notification")
		}
		return created(n), nil
	})
	add("slow_create", nil, func(ctx context.Context, req *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error) {
		var args struct{ MS int }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		select {
		case u.started <- struct{}{}:
		default:
		}
		done := u.finish
		if args.MS > 0 {
			done = make(chan struct{})
			time.AfterFunc(time.Duration(args.MS)*time.Millisecond, func() { close(done) })
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err() // cancelled mid-effect: what the gateway must prevent
		}
		u.mu.Lock()
		u.finished["slow_create"]++
		u.mu.Unlock()
		return created(n), nil
	})
	u.server = server
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// awaitStarted returns once a slow_create call has started, and fails the test when none does
// within hangTimeout.
func (u *mcpUpstream) awaitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-u.started:
	case <-time.After(hangTimeout):
		t.Fatal("no slow_create call started")
	}
}

// count returns how many calls of tool the server ran.
func (u *mcpUpstream) count(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}

// mcpRoutes is a routes file with one kind: mcp route "tickets" at /mcp in front of upstream;
// route is extra YAML of the route (indented four spaces), e.g. "    refusal: jsonrpc_error\n".
func mcpRoutes(upstream, route string) string {
	return fmt.Sprintf(`
upstreams:
  mcp: {url: %q, timeout: 10s}
defaults: {lock_lease: 2s}
routes:
  - name: tickets
    kind: mcp
    upstream: mcp
    path: /mcp
    key: {meta: %s}
    tools:
      create_ticket: {receipt: {remote_id: /result/structuredContent/id}}
      progress_create: {receipt: {remote_id: /result/structuredContent/id}}
      slow_create: {receipt: {remote_id: /result/structuredContent/id}}
      search_tickets: {class: read_only}
%s`, upstream, metaKey, route)
}

// connectMCP connects a go-sdk client to the gateway's /mcp, speaking version ("" : the client's
// latest), and returns its session and the tap on its HTTP answers (decisions, lastDecision).
func connectMCP(t *testing.T, gw, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, *wiretap.Tap) {
	t.Helper()
	tap := wiretap.New(nil)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw + "/mcp", HTTPClient: &http.Client{Transport: tap}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, tap
}

// decisions are the decisions the gateway answered a client's tools/call requests with, in order:
// each Idempotency-Decision, with " replayed" when Idempotent-Replayed was true and
// " with-session-id" when a replay carried an Mcp-Session-Id. A call the gateway passed through
// unguarded has no decision, and no entry.
func decisions(tap *wiretap.Tap) []string {
	var out []string
	for _, a := range tap.Answers() {
		if a.Decision == "" {
			continue
		}
		d := a.Decision
		if a.Replayed == "true" {
			d += " replayed"
		}
		if a.SessionID != "" && strings.Contains(d, "replay") {
			d += " with-session-id"
		}
		out = append(out, d)
	}
	return out
}

// callTool calls tool with args under key (none when empty), bounded by hangTimeout.
func callTool(t *testing.T, cs *mcp.ClientSession, tool, key string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, toolParams(tool, key, args))
	if err != nil {
		t.Fatalf("%s with key %q: %v", tool, key, err)
	}
	return res
}

// toolParams are the parameters of a call of tool with args, under key when not empty.
func toolParams(tool, key string, args map[string]any) *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if key != "" {
		p.Meta = mcp.Meta{metaKey: key}
	}
	return p
}

// structuredID is the id of a create tool's structuredContent.
func structuredID(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("no structuredContent object in %s", resultText(res))
	}
	id, _ := m["id"].(string)
	return id
}

// resultText is the text of a tool result's content.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// postRaw posts body to url with the headers of a Streamable HTTP client and extra (name, value,
// ...), and reads the whole answer.
func postRaw(t *testing.T, url, body string, extra ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}
