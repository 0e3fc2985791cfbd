package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

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
