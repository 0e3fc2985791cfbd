package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// storedKeysPattern matches the Redis keys of the Redis gateway's create_ticket records
// (redisstore's default prefix, tenant default): those of 1 KiB executions.
const storedKeysPattern = "idemgateway:{default/create_ticket/*"

// storedBytes returns what the Redis and the PostgreSQL store keep per key of a 1 KiB execution,
// in bytes: the mean MEMORY USAGE of the Redis gateway's create_ticket records, and the records
// table's size with its TOAST and indexes (pg_total_relation_size, dead rows and free space
// included, as the database keeps them) per row. Run it once the replay receipts are stored.
func (b *bench) storedBytes(ctx context.Context) (redisBytes, pgBytes float64, err error) {
	var keys []string
	iter := b.admin.Scan(ctx, 0, storedKeysPattern, 1000).Iterator()
	for iter.Next(ctx) && len(keys) < 200 {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, 0, fmt.Errorf("stored bytes: SCAN: %w", err)
	}
	if len(keys) == 0 {
		return 0, 0, fmt.Errorf("stored bytes: no Redis key matches %s", storedKeysPattern)
	}
	for _, k := range keys {
		n, err := b.admin.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("stored bytes: MEMORY USAGE: %w", err)
		}
		redisBytes += float64(n)
	}
	redisBytes /= float64(len(keys))
	conn, err := pgx.Connect(ctx, b.pg.URL())
	if err != nil {
		return 0, 0, fmt.Errorf("stored bytes: %w", err)
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT pg_total_relation_size('idemgateway.records')::float8 / greatest(count(*), 1) FROM idemgateway.records`).Scan(&pgBytes)
	if err != nil {
		return 0, 0, fmt.Errorf("stored bytes: PostgreSQL: %w", err)
	}
	return redisBytes, pgBytes, nil
}
