package redisstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrEvictionPolicy is wrapped by Ping's error when Redis's maxmemory-policy could evict records,
// or when Ping cannot read the policy at all.
var ErrEvictionPolicy = errors.New("redis may evict idempotency records")

// Ping implements record.Store.Ping: it sends PING and then, unless Options.AllowEviction is set,
// reads maxmemory-policy and returns an error wrapping ErrEvictionPolicy when it is anything but
// noeviction, since an evicted record lets a retry execute twice.
//
// The policy is read with CONFIG GET maxmemory-policy. Managed Redis services often refuse CONFIG
// (a renamed command, ACL NOPERM); Ping then reads the maxmemory_policy field of INFO memory, which
// reports the same setting. When Redis refuses both, the policy is unknown and Ping fails closed:
// the error wraps ErrEvictionPolicy, and the store is not ready until CONFIG GET or INFO is
// allowed, or eviction is allowed explicitly (Options.AllowEviction). On Redis Cluster the policy
// is read from one node only.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return s.checkPolicy(ctx)
}

// checkPolicy returns nil when eviction is allowed or maxmemory-policy is noeviction, else an
// error that wraps ErrEvictionPolicy when the policy could evict records or cannot be read, or
// Redis's error when it could not be asked.
func (s *Store) checkPolicy(ctx context.Context) error {
	if s.allowEviction {
		return nil
	}
	policy, err := s.evictionPolicy(ctx)
	if err != nil {
		return err
	}
	if policy == "noeviction" {
		return nil
	}
	return fmt.Errorf("redisstore: maxmemory-policy is %q, not noeviction: %w (set it to noeviction, or allow eviction explicitly: IDEMGATEWAY_REDIS_ALLOW_EVICTION=true, Options.AllowEviction)", policy, ErrEvictionPolicy)
}

// evictionPolicy returns Redis's maxmemory-policy, read with CONFIG GET or, when Redis refuses
// CONFIG, from INFO memory.
func (s *Store) evictionPolicy(ctx context.Context) (string, error) {
	cfg, err := s.client.ConfigGet(ctx, "maxmemory-policy").Result()
	var refused redis.Error
	switch {
	case err == nil && cfg["maxmemory-policy"] != "":
		return cfg["maxmemory-policy"], nil
	case err != nil && !errors.As(err, &refused):
		return "", fmt.Errorf("redisstore: read maxmemory-policy: %w", err)
	}
	// CONFIG refused (or silent about the policy): ask INFO, which a renamed CONFIG leaves alone.
	configNote := "CONFIG GET: no maxmemory-policy"
	if err != nil {
		configNote = "CONFIG GET: " + err.Error()
	}
	info, err := s.client.Info(ctx, "memory").Result()
	switch {
	case err != nil && !errors.As(err, &refused):
		return "", fmt.Errorf("redisstore: read maxmemory_policy from INFO memory: %w", err)
	case err != nil:
		return "", fmt.Errorf("redisstore: cannot read maxmemory-policy (%s; INFO memory: %v): %w (allow CONFIG GET or INFO, or allow eviction explicitly: IDEMGATEWAY_REDIS_ALLOW_EVICTION=true, Options.AllowEviction)", configNote, err, ErrEvictionPolicy)
	}
	if policy := infoField(info, "maxmemory_policy"); policy != "" {
		return policy, nil
	}
	return "", fmt.Errorf("redisstore: cannot read maxmemory-policy (%s; INFO memory: no maxmemory_policy): %w (allow eviction explicitly: IDEMGATEWAY_REDIS_ALLOW_EVICTION=true, Options.AllowEviction)", configNote, ErrEvictionPolicy)
}

// infoField returns the value of field in the text of an INFO reply ("name:value" lines), or "".
func infoField(info, field string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok && name == field {
			return value
		}
	}
	return ""
}
