package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// settledChannel is the Pub/Sub channel on which the scripts announce that the record at key was
// committed, released or marked unknown: "<prefix>settled:{<escaped key>}".
func (s *Store) settledChannel(key string) string {
	return s.prefix + "settled:" + strings.TrimPrefix(s.redisKey(key), s.prefix)
}

// subscribeTimeout bounds one SUBSCRIBE or UNSUBSCRIBE write of the notices' sender, a dial
// included. It holds up only the sender; WatchSettled waits as long as its caller's context says.
const subscribeTimeout = 5 * time.Second

// errClosed is returned by WatchSettled after Close.
var errClosed = errors.New("redisstore: store closed")

// WatchSettled implements record.SettleNotifier: settled is called, from a goroutine of the store,
// each time any client of this Redis (this gateway process or another) commits, releases or marks
// unknown the record at key, from the time WatchSettled returns with a nil error until stop is
// called. It may be called once more after stop returns, when a notice was being delivered.
// settled must not block: it holds up the delivery of every other notice of the store.
//
// The store subscribes one Pub/Sub connection, opened on the first watch and shared by all, to the
// key's channel while at least one watch of the key is running (SUBSCRIBE and UNSUBSCRIBE,
// reference-counted; the scripts PUBLISH on the settle of a record that a duplicate's claim found
// in progress, and on Redis Cluster a PUBLISH reaches the subscribers of every node).
// WatchSettled returns once Redis has confirmed that subscription, so that a settle after the
// caller's next claim of the key is announced. When ctx is done first, or the store is closed,
// it returns an error; the watch is kept until stop all the same, and starts to deliver once
// Redis confirms. Redis never confirms for a user without +subscribe (it answers NOPERM): every
// WatchSettled then ends with ctx's error, and the waiters must poll. stop does not block on the
// network: the UNSUBSCRIBE is sent in the background. It is never nil, and calls after the first
// do nothing.
//
// Notices are hints. One sent while the connection is down is lost (go-redis reconnects and
// subscribes again to the watched channels): the waiter that missed it finds the record settled at
// its next poll.
func (s *Store) WatchSettled(ctx context.Context, key string, settled func()) (stop func(), err error) {
	if key == "" || settled == nil {
		return func() {}, errors.New("redisstore: watch: empty key or nil function")
	}
	stop, ready, err := s.notices.watch(s.client, s.settledChannel(key), settled)
	if err != nil {
		return stop, err
	}
	select {
	case <-ready:
		return stop, nil
	case <-ctx.Done():
		return stop, fmt.Errorf("redisstore: watch %q: Redis did not confirm the subscription: %w", key, context.Cause(ctx))
	case <-s.notices.done:
		return stop, errClosed
	}
}

// notices are a Store's subscriptions to settle notices: one Pub/Sub connection, subscribed to the
// channels of the watched keys. Two goroutines serve it once the first watch opens it: receive
// reads the connection (confirmations and notices), send writes the SUBSCRIBE and UNSUBSCRIBE
// commands that watch and unwatch queue, in their order.
//
// A subscription ends with its last watch, confirmed or not: unwatch removes it and queues its
// UNSUBSCRIBE at once (Redis answers an UNSUBSCRIBE of a channel it does not hold, harmlessly).
// Waiting for the confirmation first would keep, for good, every subscription whose confirmation
// never comes: here, and in go-redis's channel set, which it subscribes again at every
// reconnection. It never comes when the Redis user lacks +subscribe (Redis answers NOPERM, which
// go-redis's receive loop drops) or the SUBSCRIBE was lost with its connection.
//
// The price: a "subscribe" confirmation that arrives after its subscription ended is taken for
// the confirmation of a newer subscription of the same channel, if one is waiting for its own.
// Redis has not subscribed the newer one yet (its SUBSCRIBE follows the UNSUBSCRIBE), so a settle
// published before it does is missed, and the newer watch's waiters find it at their next poll
// (the gateway's 500 ms). This is accepted: it takes a watch stopped before its confirmation (the
// gateway stops a watch only once WatchSettled has returned, so a confirmation slower than its
// 200 ms watch timeout) and new waiters of the same key before that confirmation arrives, when
// Redis is already so slow that waiters rely on the poll. Telling the confirmations apart would
// take a count per channel of the SUBSCRIBEs or UNSUBSCRIBEs not yet answered, and the answers
// that never come (NOPERM, a dropped connection) would leave counts behind that only a time limit
// could clear.
type notices struct {
	mu     sync.Mutex
	pubsub *redis.PubSub            // nil until the first watch
	subs   map[string]*subscription // by channel
	queue  []subscribeOp            // for send, in order
	wake   chan struct{}            // capacity 1: the queue has commands
	closed bool
	done   chan struct{} // closed by close
	wg     sync.WaitGroup
}

// subscription is a channel subscribed (or being subscribed) for the watches of its key, which are
// never none: it ends with the last.
type subscription struct {
	watches   map[*watch]struct{}
	confirmed bool
	ready     chan struct{} // closed once confirmed
}

// watch is one WatchSettled call's function.
type watch struct{ settled func() }

// subscribeOp is a SUBSCRIBE or UNSUBSCRIBE of a channel, queued for send.
type subscribeOp struct {
	subscribe bool
	channel   string
}

func newNotices() *notices {
	return &notices{subs: map[string]*subscription{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// watch adds fn to the watches of channel, subscribing it if it is new, and returns the function
// that removes it and a channel closed once the subscription is confirmed.
func (n *notices) watch(client redis.UniversalClient, channel string, fn func()) (stop func(), ready <-chan struct{}, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return func() {}, nil, errClosed
	}
	if n.pubsub == nil {
		n.open(client)
	}
	sub := n.subs[channel]
	if sub == nil {
		sub = &subscription{watches: map[*watch]struct{}{}, ready: make(chan struct{})}
		n.subs[channel] = sub
		n.enqueue(subscribeOp{subscribe: true, channel: channel})
	}
	w := &watch{settled: fn}
	sub.watches[w] = struct{}{}
	var once sync.Once
	return func() { once.Do(func() { n.unwatch(channel, sub, w) }) }, sub.ready, nil
}

// unwatch removes w, and when it was the last watch of sub, removes sub and queues the UNSUBSCRIBE
// of channel, whether Redis has confirmed the subscription or not.
func (n *notices) unwatch(channel string, sub *subscription, w *watch) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(sub.watches, w)
	if len(sub.watches) == 0 && n.subs[channel] == sub {
		delete(n.subs, channel)
		n.enqueue(subscribeOp{subscribe: false, channel: channel})
	}
}

// open creates the Pub/Sub connection (go-redis dials it in the background) and starts receive
// and send. n.mu is held.
func (n *notices) open(client redis.UniversalClient) {
	n.pubsub = client.Subscribe(context.Background()) // no channel yet: nothing is sent
	msgs := n.pubsub.ChannelWithSubscriptions()
	n.wg.Add(2)
	go n.receive(msgs)
	go n.send(n.pubsub)
}

// enqueue queues op for send. n.mu is held.
func (n *notices) enqueue(op subscribeOp) {
	n.queue = append(n.queue, op)
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// send writes the queued commands in their order, consecutive ones of a kind in one command,
// until close. A command that fails is not retried: go-redis subscribes again to the channels it
// holds (those subscribed and not unsubscribed since) when it reconnects, and a dropped
// connection drops its subscriptions.
func (n *notices) send(pubsub *redis.PubSub) {
	defer n.wg.Done()
	for {
		select {
		case <-n.wake:
		case <-n.done:
			return
		}
		n.mu.Lock()
		ops := n.queue
		n.queue = nil
		n.mu.Unlock()
		for len(ops) > 0 {
			run := 1
			for run < len(ops) && ops[run].subscribe == ops[0].subscribe {
				run++
			}
			channels := make([]string, run)
			for i, op := range ops[:run] {
				channels[i] = op.channel
			}
			ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
			if ops[0].subscribe {
				_ = pubsub.Subscribe(ctx, channels...)
			} else {
				_ = pubsub.Unsubscribe(ctx, channels...) // never without channels: that is all of them
			}
			cancel()
			ops = ops[run:]
		}
	}
}

// receive handles what the connection delivers until it is closed: a "subscribe" confirmation
// confirms its channel's subscription, and a notice calls the watches of its channel.
func (n *notices) receive(msgs <-chan any) {
	defer n.wg.Done()
	var fns []func()
	for msg := range msgs {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirmed(m.Channel)
			}
		case *redis.Message:
			fns = fns[:0]
			n.mu.Lock()
			if sub := n.subs[m.Channel]; sub != nil {
				for w := range sub.watches {
					fns = append(fns, w.settled)
				}
			}
			n.mu.Unlock()
			for _, fn := range fns { // outside the lock: fn may stop its watch
				fn()
			}
		}
	}
}

// confirmed marks the subscription of channel confirmed. The confirmation may also be a
// resubscription after a reconnection (the subscription is confirmed already), or late, its
// subscription ended: it is then dropped, or taken for that of a newer subscription of the channel
// (see notices).
func (n *notices) confirmed(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.subs[channel]
	if sub == nil || sub.confirmed {
		return
	}
	sub.confirmed = true
	close(sub.ready)
}

// close closes the connection and waits for receive and send to return. Later watches fail with
// errClosed.
func (n *notices) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.done)
	pubsub := n.pubsub
	n.mu.Unlock()
	if pubsub != nil {
		_ = pubsub.Close()
	}
	n.wg.Wait()
}
