package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/record"
)

// indexKey is the sorted set of the keys of outcome_unknown records, all with score 0 so that
// they sort bytewise (ZRANGEBYLEX). It lives in a slot of its own on Redis Cluster, which is why
// the scripts cannot write it: the Go side adds a key after MarkUnknown, or after a Claim that
// observed a lapsed lease, in a second command (those paths are rare). Entries of records that
// were settled, reclaimed or expired since are dropped by ListUnknown when it meets them.
func (s *Store) indexKey() string {
	return s.prefix + "index:outcome_unknown"
}

// index adds key to the index. A failure is not the caller's: the record itself is written; it is
// listed once a later mark or lapse indexes it again.
func (s *Store) index(ctx context.Context, key string) {
	s.client.ZAdd(ctx, s.indexKey(), redis.Z{Member: key})
}

// ListUnknown implements record.Store.ListUnknown from the index: ZRANGEBYLEX for a batch of keys
// after cursor under prefix, then one pipelined read of those records (the get script, so that a
// lapsed in_progress record counts as unknown). Entries whose record is no longer outcome_unknown
// are removed from the index as they are met.
func (s *Store) ListUnknown(ctx context.Context, prefix, cursor string, limit int) (keys []string, stored []record.Payload, next string, err error) {
	if limit <= 0 {
		return nil, nil, "", errors.New("redisstore: list: limit must be positive")
	}
	lo, hi := "-", "+"
	if prefix != "" {
		lo, hi = "["+prefix, "["+prefix+"\xff"
	}
	if cursor != "" && cursor >= prefix {
		lo = "(" + cursor
	}
	for len(keys) < limit {
		batch, err := s.client.ZRangeByLex(ctx, s.indexKey(), &redis.ZRangeBy{Min: lo, Max: hi, Count: int64(limit - len(keys) + 1)}).Result()
		if err != nil {
			return nil, nil, "", fmt.Errorf("redisstore: list: %w", err)
		}
		more := len(batch) > limit-len(keys)
		if more {
			batch = batch[:limit-len(keys)]
		}
		if len(batch) == 0 {
			return keys, stored, "", nil
		}
		pipe := s.client.Pipeline()
		gets := make([]*redis.Cmd, len(batch))
		for i, k := range batch {
			gets[i] = getScript.Run(ctx, pipe, []string{s.redisKey(k)})
		}
		_, _ = pipe.Exec(ctx) // each command's result is read below
		var stale []any
		for i, k := range batch {
			res, err := gets[i].Slice()
			if redis.HasErrorPrefix(err, "NOSCRIPT") { // a pipeline cannot fall back to EVAL by itself
				res, err = getScript.Run(ctx, s.client, []string{s.redisKey(k)}).Slice()
			}
			switch {
			case err != nil && !redis.HasErrorPrefix(err, "CORRUPT"):
				return nil, nil, "", wrap("list", k, err)
			case err == nil && len(res) == 3 && res[0] == record.StateUnknown:
				_, p, _ := storedRecord(res)
				keys, stored = append(keys, k), append(stored, p)
			default: // gone, settled, reclaimed, or corrupt: not an unknown outcome any more
				stale = append(stale, k)
			}
		}
		if len(stale) > 0 {
			s.client.ZRem(ctx, s.indexKey(), stale...)
		}
		lo = "(" + batch[len(batch)-1]
		if !more {
			return keys, stored, "", nil
		}
	}
	return keys, stored, keys[len(keys)-1], nil
}
