package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrEvictionPolicy is wrapped by Ping's error when Redis's maxmemory-policy could evict records.
var ErrEvictionPolicy = errors.New("redis may evict idempotency records")

// Ping implements gateway.Store.Ping: it sends PING and then, unless Options.AllowEviction is set,
// reads maxmemory-policy with CONFIG GET and returns an error wrapping ErrEvictionPolicy when it is
// anything but noeviction, since an evicted record lets a retry execute twice.
//
// Managed Redis services often refuse CONFIG (renamed command, ACL NOPERM). Ping then cannot know the
// policy and reports the store fit: the operator must make sure the policy is noeviction. On Redis
// Cluster the policy is read from one node only.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	if s.allowEviction {
		return nil
	}
	cfg, err := s.client.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		var refused redis.Error
		if errors.As(err, &refused) {
			return nil // the server answered but refused CONFIG: the policy is unknown, see above
		}
		return fmt.Errorf("redisstore: read maxmemory-policy: %w", err)
	}
	policy, ok := cfg["maxmemory-policy"]
	if !ok || policy == "noeviction" {
		return nil
	}
	return fmt.Errorf("redisstore: maxmemory-policy is %q, not noeviction: %w (set it to noeviction, or allow eviction explicitly)", policy, ErrEvictionPolicy)
}
