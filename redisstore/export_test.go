package redisstore

// RedisKey exposes the key layout to the tests.
var RedisKey = (*Store).redisKey

// SettledChannel exposes the settle notices' channel of a key to the tests.
var SettledChannel = (*Store).settledChannel

// Subscriptions returns how many channels the settle notices of s hold: subscribed, or being
// subscribed, for running watches.
func Subscriptions(s *Store) int {
	s.notices.mu.Lock()
	defer s.notices.mu.Unlock()
	return len(s.notices.subs)
}
