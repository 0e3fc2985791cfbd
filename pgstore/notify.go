package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Settle notices (record.SettleNotifier), as the Redis store's pub/sub gives them: a settle of a
// record that a duplicate marked watched (Claim) sends pg_notify(channel, key) in its statement,
// delivered when it commits to every session that LISTENs on the channel, on every gateway that
// shares the database (the key hex-encoded: a notice is text). Each store keeps one connection of its own that listens, outside the pool,
// and passes each notice to the waiters of its key. A notice lost with the connection costs a
// waiter a poll; the connection is made again, with a pause that grows to 5 s.

// listener is the LISTEN connection of a store and the watches of its keys.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string

	mu        sync.Mutex
	watches   map[string]map[*watch]struct{}
	listening chan struct{} // closed while the connection listens; a new one once it is lost
	done      chan struct{} // closed when the loop has ended
}

// watch is one caller of WatchSettled.
type watch struct{ settled func() }

func newListener(ctx context.Context, cfg *pgx.ConnConfig, channel string) *listener {
	l := &listener{cfg: cfg.Copy(), channel: channel, watches: map[string]map[*watch]struct{}{},
		listening: make(chan struct{}), done: make(chan struct{})}
	go l.run(ctx)
	return l
}

// wait waits for the loop to end (its context cancelled).
func (l *listener) wait() { <-l.done }

// run connects, listens and dispatches notices until ctx ends, connecting again after a failure.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	pause := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		_ = err // the waiters poll meanwhile
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// listen runs one connection: LISTEN, then each notice to its key's watches, until the
// connection fails or ctx ends.
func (l *listener) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return err
	}
	l.mu.Lock()
	close(l.listening)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.listening = make(chan struct{})
		l.mu.Unlock()
	}()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		key, err := hex.DecodeString(n.Payload) // the key, hex-encoded: a key may hold any byte
		if err != nil {
			continue
		}
		l.mu.Lock()
		var fire []func()
		for w := range l.watches[string(key)] {
			fire = append(fire, w.settled)
		}
		l.mu.Unlock()
		for _, f := range fire {
			f()
		}
	}
}

// errNotListening is a WatchSettled whose context ended before the store listened.
var errNotListening = errors.New("pgstore: not listening for settle notices")

// WatchSettled implements record.SettleNotifier: settled is called on each notice of key from the
// time it returns nil until stop. It waits, within ctx, for the store's connection to listen.
func (s *Store) WatchSettled(ctx context.Context, key string, settled func()) (stop func(), err error) {
	l := s.notify
	w := &watch{settled: settled}
	l.mu.Lock()
	if l.watches[key] == nil {
		l.watches[key] = map[*watch]struct{}{}
	}
	l.watches[key][w] = struct{}{}
	listening := l.listening
	l.mu.Unlock()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.watches[key], w)
			if len(l.watches[key]) == 0 {
				delete(l.watches, key)
			}
		})
	}
	select {
	case <-listening:
		return stop, nil
	case <-ctx.Done():
		return stop, errNotListening
	}
}
