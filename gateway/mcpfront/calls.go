package mcpfront

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
)

// The MCP exchanges the front end keeps track of: guarded tool calls in flight (their cancels
// and session ends, docs/contract.md §7 Client gone) and GET streams to end at shutdown.

// calls are the guarded tools/calls in flight on this gateway: the calls whose
// notifications/cancelled it absorbs, and whose session's DELETE waits for them. A call is kept
// by its *mcpTool (its session id, "" without sessions, and JSON-RPC id), so that adding and
// removing one, on every guarded call, allocates nothing; a cancel, which is rare, looks through
// the calls of its session.
type calls struct {
	mu       sync.Mutex
	calls    map[*mcpTool]struct{}
	sessions map[string]int // calls in flight by session id
	ended    chan struct{}  // closed, and replaced, when a call ends
}

// add counts m's call in flight until remove(m).
func (c *calls) add(m *mcpTool) {
	c.mu.Lock()
	if c.calls == nil {
		c.calls, c.sessions = map[*mcpTool]struct{}{}, map[string]int{}
	}
	c.calls[m] = struct{}{}
	c.sessions[m.session]++
	c.mu.Unlock()
}

// remove ends what add(m) began.
func (c *calls) remove(m *mcpTool) {
	c.mu.Lock()
	delete(c.calls, m)
	if c.sessions[m.session]--; c.sessions[m.session] <= 0 {
		delete(c.sessions, m.session)
	}
	if c.ended != nil {
		close(c.ended)
		c.ended = nil
	}
	c.mu.Unlock()
}

// has reports whether a call of session and id is in flight. Ids are compared by value
// (mcpwire.SameID), so that a cancel that spells the id otherwise (5.0 for 5), which the server
// reads as the same id, is absorbed.
func (c *calls) has(session string, id []byte) bool {
	key, ok := mcpwire.IDKey(id)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[session] == 0 {
		return false
	}
	for m := range c.calls {
		if m.session != session {
			continue
		}
		if k, _ := mcpwire.IDKey(m.msg.ID); k == key {
			return true
		}
	}
	return false
}

// wait returns once no call of session is in flight, or ctx ends. Each call is bounded by its
// upstream's timeout.
func (c *calls) wait(ctx context.Context, session string) {
	for {
		c.mu.Lock()
		if c.sessions[session] == 0 {
			c.mu.Unlock()
			return
		}
		if c.ended == nil {
			c.ended = make(chan struct{})
		}
		ended := c.ended
		c.mu.Unlock()
		select {
		case <-ended:
		case <-ctx.Done():
			return
		}
	}
}

// streams ends the GET streams of kind: mcp routes when the server shuts down (EndStreams), once
// the POSTs in flight on them have ended. A GET stream carries only the server's own messages and
// lasts as long as the client keeps it, so http.Server.Shutdown would wait for it until its
// deadline; ended before the calls in flight, it would end a go-sdk client's session with them.
type streams struct {
	posts  atomic.Int64 // POSTs in flight
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

// context is what ends the GET streams.
func (s *streams) context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	return s.ctx
}

// post counts a POST in flight until the returned func is called.
func (s *streams) post() (done func()) {
	s.posts.Add(1)
	return func() { s.posts.Add(-1) }
}

// get makes x's request, a GET, end with the GET streams, until the returned func is called.
func (s *streams) get(x *gateway.Exchange) (stop func()) {
	ctx, cancel := context.WithCancel(x.Request().Context())
	x.SetRequest(x.Request().WithContext(ctx))
	unhook := context.AfterFunc(s.context(), cancel)
	return func() {
		unhook()
		cancel()
	}
}

// end ends the GET streams, and those that start from now on, once no POST has been in flight for
// endQuiet (each is bounded by its upstream's timeout): a POST's handler returns before its answer
// has reached the client, and a go-sdk client whose GET stream ends first fails the calls it still
// waits for. It polls: it runs once, at shutdown, and keeps the POSTs' path free of locks.
func (s *streams) end() {
	const tick = 10 * time.Millisecond
	for quiet := time.Duration(0); quiet < endQuiet; time.Sleep(tick) {
		if s.posts.Load() > 0 {
			quiet = 0
		} else {
			quiet += tick
		}
	}
	s.context()
	s.cancel()
}

// endQuiet is how long no MCP POST must be in flight before shutdown ends the GET streams.
const endQuiet = 200 * time.Millisecond
