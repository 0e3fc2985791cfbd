package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

// TestLogSafety: each verdict of the Redis store's safety check is one warning that says what
// keyed requests get, with the reason; a recovery is a warning too, so that it is seen wherever
// the change was.
func TestLogSafety(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err      error
		msg, why string
	}{
		{fmt.Errorf("redisstore: maxmemory-policy is %q: %w", "volatile-lru", redisstore.ErrEvictionPolicy), msgStoreUnsafe, "volatile-lru"},
		{fmt.Errorf("redisstore: %w: NOPERM", redisstore.ErrScriptsRefused), msgStoreUnsafe, "NOPERM"},
		{fmt.Errorf("redisstore: Redis refuses writes: %w: OOM", record.ErrWritesRefused), msgWritesRefused, "OOM"},
		{errors.New("redisstore: safety check: ping: connection refused"), msgStoreUnsafe, "connection refused"},
		{nil, msgStoreSafeAgain, ""},
	} {
		var out bytes.Buffer
		logSafety(slog.New(slog.NewJSONHandler(&out, nil)), tc.err)
		var line struct{ Level, Msg, Err string }
		if err := json.Unmarshal(out.Bytes(), &line); err != nil || strings.Count(out.String(), "\n") != 1 {
			t.Fatalf("%v: not one JSON line: %q", tc.err, out.String())
		}
		if line.Level != "WARN" || line.Msg != tc.msg || !strings.Contains(line.Err, tc.why) {
			t.Errorf("%v: logged %+v, want a WARN %q with an err naming %q", tc.err, line, tc.msg, tc.why)
		}
	}
}

// TestUnreachableRedisSaidAtStart: a Redis store that cannot be reached is said in the log as
// soon as the store is opened, not at the first keyed request: the first safety check starts at
// once, in the background.
func TestUnreachableRedisSaidAtStart(t *testing.T) {
	t.Parallel()
	var out testlog.Buffer
	s := &settings{RedisURL: "redis://127.0.0.1:1/0", RedisDialTimeout: 100 * time.Millisecond, RedisReadTimeout: time.Second, RedisWriteTimeout: time.Second}
	_, closeStore, err := s.openRedisStore(slog.New(slog.NewJSONHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	eventually.True(t, "the start to log that the store is unfit", func() bool {
		return strings.Contains(out.String(), msgStoreUnsafe) && strings.Contains(out.String(), "127.0.0.1:1")
	})
}
