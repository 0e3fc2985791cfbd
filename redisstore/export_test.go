package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

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

// ScriptSHA returns the SHA1 that EVALSHA names the script of op by: "claim", "reclaim", "renew",
// "settle" (a commit's and a mark-unknown's), "release" or "get".
func ScriptSHA(op string) string {
	return map[string]*redis.Script{"claim": claimScript, "reclaim": reclaimScript, "renew": renewScript, "settle": settleScript,
		"release": releaseScript, "get": getScript}[op].Hash()
}

// LoadScripts loads every script into the Redis of c (every master, for a cluster client), so that
// the store's next calls are EVALSHAs.
func LoadScripts(ctx context.Context, c redis.Scripter) error {
	for _, s := range []*redis.Script{claimScript, reclaimScript, renewScript, settleScript, releaseScript, getScript} {
		if err := s.Load(ctx, c).Err(); err != nil {
			return err
		}
	}
	return nil
}

// CheckGap returns the least time between the last safety check and one that a request asks for.
func CheckGap(s *Store) time.Duration { return s.safety.gap() }
