package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

// The warnings the gateway logs once per change of the Redis store's verdict
// (cmd/idemgateway/redis.go, logSafety).
const (
	logStoreUnsafe    = "the Redis store is unfit to keep records: keyed requests get 503 store-unavailable, without a claim or an upstream call, until a check passes"
	logWritesRefused  = "Redis refuses writes: new keys get 503 store-unavailable, committed keys still replay, until a check passes"
	logStoreSafeAgain = "the Redis store is fit to keep records again: keyed requests are served"
)

// storeSafe is the gauge of the store's verdict: 1 fit, 0 not.
const storeSafe = "idemgateway_store_safe"

// TestC15_UnsafeRedisFailsClosed (docs/cases.md C15): Redis turns unsafe under a running gateway
// whose safety check runs every 20 ms (IDEMGATEWAY_REDIS_CHECK_INTERVAL). The test polls the
// gateway's idemgateway_store_safe for the check's verdict, never a clock. While the verdict is
// unsafe, keyed requests get 503 store-unavailable (retryable, Retry-After) with Up×0, read_only
// routes keep working, /readyz says why, and the log says it once; under out of memory a committed
// key still replays. Once Redis is safe again, keyed requests execute.
func TestC15_UnsafeRedisFailsClosed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		redis        redistest.Options
		env          []string
		unsafe, safe []any  // the commands, sent as Redis's default user, that make Redis unsafe and safe again
		log          string // the warning of the change
		readyz       string // a part of /readyz's detail
		replays      bool   // a committed key still replays
	}{
		{name: "volatile-lru",
			unsafe: []any{"CONFIG", "SET", "maxmemory-policy", "volatile-lru"},
			safe:   []any{"CONFIG", "SET", "maxmemory-policy", "noeviction"},
			log:    logStoreUnsafe, readyz: `\"volatile-lru\"`},
		// A managed Redis: CONFIG is renamed, so the policy is read from INFO memory.
		{name: "CONFIG renamed, allkeys-lru", redis: redistest.Options{Args: []string{"--rename-command", "CONFIG", "c15-config"}},
			unsafe: []any{"c15-config", "SET", "maxmemory-policy", "allkeys-lru"},
			safe:   []any{"c15-config", "SET", "maxmemory-policy", "noeviction"},
			log:    logStoreUnsafe, readyz: `\"allkeys-lru\"`},
		{name: "out of memory",
			unsafe: []any{"CONFIG", "SET", "maxmemory", "1"},
			safe:   []any{"CONFIG", "SET", "maxmemory", "0"},
			log:    logWritesRefused, readyz: "OOM", replays: true},
		// The gateway's ACL user loses the right to run scripts.
		{name: "scripts refused", redis: redistest.Options{Args: []string{"--user", "gw", "on", ">gw-s3cret", "~*", "&*", "+@all"}},
			env:    []string{"IDEMGATEWAY_REDIS_USERNAME=gw", "IDEMGATEWAY_REDIS_PASSWORD=gw-s3cret"},
			unsafe: []any{"ACL", "SETUSER", "gw", "-evalsha", "-eval"},
			safe:   []any{"ACL", "SETUSER", "gw", "+evalsha", "+eval"},
			log:    logStoreUnsafe, readyz: "NOPERM"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, redisStore, envOptions{redis: tc.redis, env: append([]string{"IDEMGATEWAY_REDIS_CHECK_INTERVAL=20ms"}, tc.env...)})
			raw := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
			t.Cleanup(func() { _ = raw.Close() })
			createJiraIssue(t, e.sb)
			done := Request{Key: "c15-done", Body: ticketBody}
			first := e.gw.do(t, done)
			expectCreated(t, first)
			if v := e.gw.metric(t, storeSafe); v != 1 {
				t.Fatalf("%s = %v on a safe Redis, want 1", storeSafe, v)
			}

			redisDo(t, raw, tc.unsafe...)
			eventually.True(t, "the store's check to find Redis unsafe", func() bool { return e.gw.metric(t, storeSafe) == 0 })
			for _, key := range []string{"c15-new", "c15-new", "c15-other"} {
				r := e.gw.do(t, Request{Key: key, Body: ticketBody})
				expectProblem(t, r, http.StatusServiceUnavailable, "store-unavailable", "", true)
				expectRetryAfter(t, r)
			}
			if r := e.gw.do(t, done); tc.replays {
				expectReplayOf(t, r, first)
			} else { // its record may be evicted already: no claim at all
				expectProblem(t, r, http.StatusServiceUnavailable, "store-unavailable", "", true)
			}
			expectUp(t, e.sb, 1)
			expectAttempts(t, e.sb, 1)
			expectJiraRead(t, e.gw)
			if status, body := e.gw.adminDo(t, http.MethodGet, "/readyz", ""); status != http.StatusServiceUnavailable || !strings.Contains(string(body), tc.readyz) {
				t.Errorf("/readyz while Redis is unsafe: %d %s, want 503 naming %s", status, body, tc.readyz)
			}
			if n := e.gw.logCount(tc.log); n != 1 {
				t.Errorf("%d warnings %q, want 1 (once per change, however many checks ran)", n, tc.log)
			}

			redisDo(t, raw, tc.safe...)
			eventually.True(t, "the store's check to find Redis safe again", func() bool { return e.gw.metric(t, storeSafe) == 1 })
			expectCreated(t, e.gw.do(t, Request{Key: "c15-new", Body: ticketBody}))
			expectReplayOf(t, e.gw.do(t, done), first)
			expectUp(t, e.sb, 2)
			if n := e.gw.logCount(logStoreSafeAgain); n != 1 {
				t.Errorf("%d warnings %q, want 1", n, logStoreSafeAgain)
			}
		})
	}
}

// redisDo sends one command to Redis as its default user.
func redisDo(t *testing.T, raw *redis.Client, args ...any) {
	t.Helper()
	if err := raw.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

// createJiraIssue creates OPS-1 on the sandbox directly, for the read_only route to read.
func createJiraIssue(t *testing.T, sb *Sandbox) {
	t.Helper()
	resp, err := Client.Post(sb.URL+"/rest/api/3/issue", "application/json",
		strings.NewReader(`{"fields":{"project":{"key":"OPS"},"summary":"Disk full","issuetype":{"name":"Task"}}}`))
	if err != nil {
		t.Fatalf("creating a Jira issue on the sandbox: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating a Jira issue on the sandbox: %d", resp.StatusCode)
	}
}

// expectJiraRead checks that the read_only route serves OPS-1: it never touches the store.
func expectJiraRead(t *testing.T, g *Gateway) {
	t.Helper()
	read := g.do(t, Request{Method: http.MethodGet, Path: "/rest/api/3/issue/OPS-1", NoKey: true})
	if read.Status != http.StatusOK || !strings.Contains(string(read.Body), `"OPS-1"`) {
		t.Errorf("read_only route while Redis is unsafe: %d %.300s, want 200 with the issue", read.Status, read.Body)
	}
}

// TestC27_StoreBack (docs/cases.md C27): Redis stops under a gateway whose timed safety check runs
// once an hour, and comes back with its data (AOF) or empty. While it is away keyed requests get
// 503 store-unavailable; once it is back they execute and /readyz is ready, though no timed check
// has run since: the keyed request that meets the store unfit asks for a check at once (at most
// every 100 ms while Redis cannot be reached), so recovery takes well under a second after Redis's
// return rather than the interval.
// The wait is polled (eventually); the time it took is logged, not asserted.
func TestC27_StoreBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		keepData bool
	}{{"with its data", true}, {"empty", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, redisStore, envOptions{redis: redistest.Options{AppendOnly: tc.keepData}, env: []string{"IDEMGATEWAY_REDIS_CHECK_INTERVAL=1h"}})
			done := Request{Key: "c27-done", Body: ticketBody}
			first := e.gw.do(t, done)
			expectCreated(t, first)

			e.redis.Stop()
			for range 2 {
				r := e.gw.do(t, Request{Key: "c27-new", Body: ticketBody})
				expectProblem(t, r, http.StatusServiceUnavailable, "store-unavailable", "", true)
			}
			eventually.True(t, "the store's check to find Redis unreachable", func() bool { return e.gw.metric(t, storeSafe) == 0 })

			e.redis.Restart()
			back := time.Now()
			var r Response
			eventually.True(t, "a keyed request to be served after Redis's return", func() bool {
				r = e.gw.do(t, Request{Key: "c27-new", Body: ticketBody})
				return r.Status != http.StatusServiceUnavailable
			})
			t.Logf("keyed requests served %v after Redis answered again", time.Since(back).Round(time.Millisecond))
			expectCreated(t, r)
			e.gw.waitReady(t)
			if tc.keepData {
				expectReplayOf(t, e.gw.do(t, done), first)
				expectUp(t, e.sb, 2)
			} else { // the record went with the data: the key is new to the store
				expectCreated(t, e.gw.do(t, done))
				expectUp(t, e.sb, 3)
			}
		})
	}
}
