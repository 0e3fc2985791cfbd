package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

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
		return store, srv.Stop, srv.Restart
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
