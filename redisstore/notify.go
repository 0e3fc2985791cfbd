package redisstore

import (
	"context"
	"strings"
	"time"
)

// settledChannel is the Pub/Sub channel on which the scripts announce that the record at key was
// committed, released or marked unknown: "<prefix>settled:{<escaped key>}".
func (s *Store) settledChannel(key string) string {
	return s.prefix + "settled:" + strings.TrimPrefix(s.redisKey(key), s.prefix)
}

// NotifySettled calls fn with the key of every record that any gateway process sharing this Redis
// commits, releases or marks unknown, from now until Close (gateway.SettleNotifier: it wakes the
// duplicates that wait, under concurrency: wait, in every process). It subscribes one connection
// to the settle notices of this prefix (PSUBSCRIBE; on Redis Cluster a PUBLISH reaches every
// node's subscribers) and waits at most two seconds for the subscription to be confirmed. Notices
// are hints: one lost to a reconnection only makes a waiter poll. fn must not block.
func (s *Store) NotifySettled(fn func(key string)) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pattern := s.prefix + "settled:*"
	pubsub := s.client.PSubscribe(ctx, pattern)
	_, _ = pubsub.Receive(ctx) // the confirmation; without it, early notices are polled for instead
	s.closers = append(s.closers, pubsub.Close)
	go func() {
		for m := range pubsub.Channel() {
			escaped := strings.TrimSuffix(strings.TrimPrefix(m.Channel, s.prefix+"settled:{"), "}")
			fn(keyUnescaper.Replace(escaped))
		}
	}()
}
