package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/record/recordtest"
	"github.com/idemgateway/idemgateway/redisstore"
)

var _ record.Store = (*redisstore.Store)(nil)

func TestConformance(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		// One server for the whole suite; a prefix per subtest keeps their records apart.
		return subject(newStore(t, srv, redisstore.Options{Prefix: subtestPrefix(t)}), raw)
	})
}

// withoutHGETALL is redistest.Options for a server whose user gw (password "pw") may run every
// command but HGETALL, as a least-privilege user of an earlier build (docs/deploy.md) may not.
var withoutHGETALL = redistest.Options{Args: []string{"--user", "gw", "on", ">pw", "~*", "&*", "+@all", "-hgetall"}}

// TestConformanceWithoutHGETALL: the same suite as a user without HGETALL, whose scripts read
// records with HMGET and EXISTS (record.lua's load_by_fields).
func TestConformanceWithoutHGETALL(t *testing.T) {
	srv := redistest.Start(t, withoutHGETALL)
	raw := newClient(t, srv)
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		return subject(newStoreAs(t, srv, redisstore.Options{Prefix: subtestPrefix(t)}, "gw"), raw)
	})
}

// TestConformanceAutoPipelined: the same suite with Options.AutoPipeline, whose Claim, Commit and Get
// go out in batches shared with the concurrent calls (the suite's ConcurrentClaimsOneWins has
// many).
func TestConformanceAutoPipelined(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	recordtest.Run(t, func(t *testing.T) recordtest.Subject {
		return subject(newStore(t, srv, redisstore.Options{Prefix: subtestPrefix(t), AutoPipeline: true}), raw)
	})
}

// TestAutoPipelineBatches: with Options.AutoPipeline, the claims of concurrent requests share
// pipelines (a batch of more than one script); without it, each is a round trip of its own.
func TestAutoPipelineBatches(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	for _, auto := range []bool{false, true} {
		opts, err := redis.ParseURL(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		client := redis.NewClient(opts)
		batches := &batchSizes{}
		client.AddHook(batches)
		s, err := redisstore.New(client, redisstore.Options{Prefix: fmt.Sprintf("batches-%v:", auto), AutoPipeline: auto, CheckInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		mustClaim(t, s, "warm-up", time.Minute, nil) // loads the script: the claims below are EVALSHAs
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				<-start
				if claimed, _, _, err := s.Claim(ctx, fmt.Sprint(i), "owner", []byte("p"), time.Minute, time.Minute); !claimed || err != nil {
					t.Errorf("Claim(%d) = %v, %v", i, claimed, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := batches.max.Load(); auto && got < 2 || !auto && got > 1 {
			t.Errorf("AutoPipeline %v: the largest pipeline of 64 concurrent claims held %d of them", auto, got)
		}
	}
}

// batchSizes is a go-redis hook that keeps the most scripts (EVALSHA) that one pipeline of the client
// sent. (A new connection's setup, HELLO and CLIENT SETINFO, is a pipeline too.)
type batchSizes struct{ max atomic.Int64 }

func (h *batchSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *batchSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *batchSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var n int64
		for _, cmd := range cmds {
			if cmd.Name() == "evalsha" {
				n++
			}
		}
		for {
			m := h.max.Load()
			if n <= m || h.max.CompareAndSwap(m, n) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = ring.Close() })
	cases := []struct {
		name    string
		client  redis.UniversalClient
		opts    redisstore.Options
		wantErr string
	}{
		{"default prefix", client, redisstore.Options{}, ""},
		{"custom prefix", client, redisstore.Options{Prefix: "app:idem:"}, ""},
		{"nil client", nil, redisstore.Options{}, "nil client"},
		{"prefix with {", client, redisstore.Options{Prefix: "a{"}, "hash tag"},
		{"prefix with }", client, redisstore.Options{Prefix: "a}"}, "hash tag"},
		{"auto pipelining", client, redisstore.Options{AutoPipeline: true}, ""},
		{"auto pipelining on a ring", ring, redisstore.Options{AutoPipeline: true}, "needs a *redis.Client or *redis.ClusterClient"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redisstore.New(tc.client, tc.opts)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("New() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestKeyLayout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	cases := []struct {
		prefix, key, want string
	}{
		{"", "t/tool/k", "idemgateway:{t/tool/k}"},
		{"", "a}b", "idemgateway:{a%7Db}"},
		{"", "a%7Db", "idemgateway:{a%257Db}"},
		{"", "{x}", "idemgateway:{{x%7D}"},
		{"app:", "k", "app:{k}"},
	}
	for _, tc := range cases {
		s := newStore(t, srv, redisstore.Options{Prefix: tc.prefix})
		if got := redisstore.RedisKey(s, tc.key); got != tc.want {
			t.Errorf("key of %q with prefix %q = %q, want %q", tc.key, tc.prefix, got, tc.want)
		}
		mustClaim(t, s, tc.key, time.Minute, []byte("p"))
		fields, err := raw.HGetAll(ctx, tc.want).Result()
		if err != nil {
			t.Fatal(err)
		}
		leaseUntil, err := strconv.ParseInt(fields["lease_until"], 10, 64)
		if fields["state"] != record.StateInProgress || fields["owner"] != "owner" || fields["payload"] != "p" || err != nil || leaseUntil < time.Now().Add(-time.Hour).UnixMilli() {
			t.Errorf("hash %s = %q, want state, owner, payload and lease_until in ms", tc.want, fields)
		}
		if pttl := raw.PTTL(ctx, tc.want).Val(); pttl <= 0 || pttl > time.Minute {
			t.Errorf("PTTL %s = %s, want in (0, 1m]", tc.want, pttl)
		}
	}
}

// TestPingEvictionPolicy: the store is not ready while maxmemory-policy could evict records, also
// when Redis refuses CONFIG (a managed Redis with CONFIG renamed, or an ACL user without
// +config|get): Ping then reads the policy from INFO memory, and fails closed when Redis refuses
// INFO too.
func TestPingEvictionPolicy(t *testing.T) {
	t.Parallel()
	noConfig := []string{"--rename-command", "CONFIG", ""}
	noConfigNoInfo := []string{"--rename-command", "CONFIG", "", "--rename-command", "INFO", ""}
	cases := []struct {
		name          string
		args          []string
		aclUser       string // when set, Ping runs as this ACL user, created with these rules
		allowEviction bool
		wantErr       error
		wantInErr     string // a part of Ping's error: what it found out
	}{
		{"noeviction", []string{"--maxmemory-policy", "noeviction"}, "", false, nil, ""},
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, "", false, redisstore.ErrEvictionPolicy, `"allkeys-lru"`},
		{"volatile-ttl", []string{"--maxmemory-policy", "volatile-ttl"}, "", false, redisstore.ErrEvictionPolicy, `"volatile-ttl"`},
		{"allkeys-lru allowed", []string{"--maxmemory-policy", "allkeys-lru"}, "", true, nil, ""},
		// CONFIG refused: the policy comes from INFO memory.
		{"CONFIG renamed, noeviction", append([]string{"--maxmemory-policy", "noeviction"}, noConfig...), "", false, nil, ""},
		{"CONFIG renamed, allkeys-lru", append([]string{"--maxmemory-policy", "allkeys-lru"}, noConfig...), "", false, redisstore.ErrEvictionPolicy, `"allkeys-lru"`},
		{"CONFIG renamed, volatile-lfu", append([]string{"--maxmemory-policy", "volatile-lfu"}, noConfig...), "", false, redisstore.ErrEvictionPolicy, `"volatile-lfu"`},
		{"CONFIG renamed, allkeys-lru allowed", append([]string{"--maxmemory-policy", "allkeys-lru"}, noConfig...), "", true, nil, ""},
		{"ACL without CONFIG, allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, "+@all -config", false, redisstore.ErrEvictionPolicy, `"allkeys-lru"`},
		{"ACL without CONFIG, noeviction", []string{"--maxmemory-policy", "noeviction"}, "+@all -config", false, nil, ""},
		// Neither CONFIG nor INFO: the policy is unknown and the store is not ready (fail closed),
		// even when it is in fact noeviction, unless eviction is allowed.
		{"CONFIG and INFO renamed", append([]string{"--maxmemory-policy", "noeviction"}, noConfigNoInfo...), "", false, redisstore.ErrEvictionPolicy, "cannot read maxmemory-policy"},
		{"ACL without CONFIG and INFO", []string{"--maxmemory-policy", "noeviction"}, "+@all -config -info", false, redisstore.ErrEvictionPolicy, "cannot read maxmemory-policy"},
		{"CONFIG and INFO renamed, allowed", append([]string{"--maxmemory-policy", "allkeys-lru"}, noConfigNoInfo...), "", true, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Options{Args: tc.args})
			opts, err := redis.ParseURL(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			if tc.aclUser != "" {
				rules := []any{"ACL", "SETUSER", "gw", "on", ">gw-password", "~*", "&*"}
				for _, r := range strings.Fields(tc.aclUser) {
					rules = append(rules, r)
				}
				if err := newClient(t, srv).Do(ctx, rules...).Err(); err != nil {
					t.Fatalf("ACL SETUSER: %v", err)
				}
				opts.Username, opts.Password = "gw", "gw-password"
			}
			s, err := redisstore.New(redis.NewClient(opts), redisstore.Options{AllowEviction: tc.allowEviction})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			err = s.Ping(ctx)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("Ping() = %v, want %v naming %s", err, tc.wantErr, tc.wantInErr)
			}
		})
	}
}

func TestPingUnreachable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	// Fail fast: no command retries, one dial attempt.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	s, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	srv.Kill()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping of a killed server: no error")
	}
	if _, _, _, err := s.Claim(ctx, "k", "owner", nil, time.Second, time.Second); err == nil {
		t.Fatal("Claim on a killed server: no error")
	}
}

// TestErrorsHideThePassword: errors name the address at most, never the password.
func TestErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{Password: "right-password"})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "wrong-s3cret"})
	s, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Ping(ctx)
	if err == nil {
		t.Fatal("Ping with a wrong password: no error")
	}
	_, _, _, claimErr := s.Claim(ctx, "k", "owner", nil, time.Second, time.Second)
	for _, e := range []error{err, claimErr} {
		if e == nil || strings.Contains(e.Error(), "s3cret") || strings.Contains(e.Error(), "right-password") {
			t.Errorf("error %v reveals a password", e)
		}
	}
}

func TestClaimSurvivesRestart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		args    []string
		restart func(*redistest.Server)
	}{
		{"graceful restart", nil, (*redistest.Server).Restart},
		{"kill -9 with appendfsync always", []string{"--appendfsync", "always"}, func(s *redistest.Server) { s.Kill(); s.Restart() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Options{AppendOnly: true, Args: tc.args})
			s := newStore(t, srv, redisstore.Options{})
			payload := []byte("claim\x00payload")
			mustClaim(t, s, "k", time.Hour, payload)
			tc.restart(srv)
			state, got, err := s.Get(ctx, "k")
			if err != nil || state != record.StateInProgress || string(got.Claim) != string(payload) {
				t.Fatalf("Get after restart = %q, %q, %v; want %q, %q", state, got.Claim, err, record.StateInProgress, payload)
			}
			if pttl := newClient(t, srv).PTTL(ctx, redisstore.RedisKey(s, "k")).Val(); pttl <= 0 {
				t.Errorf("PTTL after restart = %s, want positive", pttl)
			}
			ok, err := s.Commit(ctx, "k", "owner", []byte("receipt"), time.Hour)
			if err != nil || !ok {
				t.Fatalf("Commit after restart = %v, %v", ok, err)
			}
		})
	}
}

// countHook counts the commands a client sends, one per round trip (and a pipeline's commands,
// which share one).
type countHook struct{ commands atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.commands.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestRoundTrips measures the round trips of each operation twice: the commands the client sends
// (a hook), and the top-level commands the server ran (INFO commandstats deltas of EVALSHA and EVAL;
// the commands a script calls are counted there too, so they are not summed). Once the scripts are
// loaded, a claim, a replay, a commit and a get are each one EVALSHA.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	stats := newClient(t, srv)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	hook := &countHook{}
	client.AddHook(hook)
	s, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	steps := []struct {
		name string
		do   func() error
	}{
		{"claim", func() error {
			_, _, _, err := s.Claim(ctx, "k", "owner", []byte("p"), time.Minute, time.Minute)
			return err
		}},
		{"replay claim", func() error {
			_, _, _, err := s.Claim(ctx, "k", "other", []byte("p"), time.Minute, time.Minute)
			return err
		}},
		{"commit", func() error { _, err := s.Commit(ctx, "k", "owner", []byte("receipt"), time.Minute); return err }},
		{"replay claim of the receipt", func() error {
			_, _, _, err := s.Claim(ctx, "k", "other", []byte("p"), time.Minute, time.Minute)
			return err
		}},
		{"get", func() error { _, _, err := s.Get(ctx, "k"); return err }},
	}
	// The first run of each script costs EVALSHA (NOSCRIPT) plus EVAL, which loads it.
	for _, step := range steps {
		if err := step.do(); err != nil {
			t.Fatalf("warm-up %s: %v", step.name, err)
		}
	}
	if _, err := s.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	for _, step := range steps {
		before, sent := commandCalls(t, stats), hook.commands.Load()
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after, sent := commandCalls(t, stats), hook.commands.Load()-sent
		evalsha, eval := after["evalsha"]-before["evalsha"], after["eval"]-before["eval"]
		t.Logf("%s: %d round trip(s); server ran %d EVALSHA, %d EVAL", step.name, sent, evalsha, eval)
		if sent != 1 || evalsha != 1 || eval != 0 {
			t.Errorf("%s: %d round trip(s), %d EVALSHA, %d EVAL; want 1, 1, 0", step.name, sent, evalsha, eval)
		}
	}
}

// TestCommandsPerExecution: the commands the scripts run (INFO commandstats, less the EVALSHAs
// that carry them) for a first execution, a claim of a new key and its prompt commit (ttl 0,
// gateway.exchange.commitKeepsTTL), and for a replay: the budget is 6 for the first
// (docs/performance.md#redis-work-per-execution).
func TestCommandsPerExecution(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	stats := newClient(t, srv)
	s := newStore(t, srv, redisstore.Options{CheckInterval: time.Hour}) // no safety check runs scripts meanwhile
	run := func(key string, do func(key string)) map[string]int {
		before := commandCalls(t, stats)
		do(key)
		after := commandCalls(t, stats)
		ran := map[string]int{}
		for name, n := range after {
			if d := n - before[name]; d > 0 && name != "evalsha" && name != "eval" && name != "info" {
				ran[name] = d
			}
		}
		return ran
	}
	execute := func(key string) {
		mustClaim(t, s, key, time.Minute, []byte("claim"))
		if ok, err := s.Commit(ctx, key, "owner", []byte("receipt"), 0); !ok || err != nil {
			t.Fatalf("Commit = %v, %v", ok, err)
		}
	}
	replay := func(key string) {
		if _, state, _, err := s.Claim(ctx, key, "other", []byte("claim"), time.Minute, time.Minute); state != record.StateCommitted || err != nil {
			t.Fatalf("Claim of the committed key = %q, %v", state, err)
		}
	}
	execute("warm-up") // loads the scripts (EVAL)
	replay("warm-up")
	first := run("k", execute)
	if want := map[string]int{"hgetall": 2, "time": 1, "hset": 2, "pexpire": 1}; !maps.Equal(first, want) {
		t.Errorf("a first execution ran %v, want %v", first, want)
	}
	if got, want := run("k", replay), map[string]int{"hgetall": 1}; !maps.Equal(got, want) {
		t.Errorf("a replay ran %v, want %v", got, want)
	}
}

func TestCorruptRecordsAreRefused(t *testing.T) {
	t.Parallel()
	t.Run("HGETALL", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{})
		testCorruptRecordsAreRefused(t, newClient(t, srv), newStore(t, srv, redisstore.Options{}))
	})
	t.Run("without HGETALL", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, withoutHGETALL)
		testCorruptRecordsAreRefused(t, newClient(t, srv), newStoreAs(t, srv, redisstore.Options{}, "gw"))
	})
}

func testCorruptRecordsAreRefused(t *testing.T, raw *redis.Client, s *redisstore.Store) {
	valid := map[string]any{"state": "in_progress", "owner": "owner", "lease_until": "9999999999999", "payload": "p"}
	without := func(field string) map[string]any {
		m := map[string]any{}
		for k, v := range valid {
			if k != field {
				m[k] = v
			}
		}
		return m
	}
	with := func(field, value string) map[string]any {
		m := without(field)
		m[field] = value
		return m
	}
	cases := []struct {
		name   string
		fields map[string]any
	}{
		{"no state", without("state")},
		{"unknown state", with("state", "done")},
		{"no owner", without("owner")},
		{"no lease_until", without("lease_until")},
		{"lease_until not a number", with("lease_until", "soon")},
		{"no payload", without("payload")},
		{"foreign hash", map[string]any{"name": "someone else's"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.name
			rkey := redisstore.RedisKey(s, key)
			if err := raw.HSet(ctx, rkey, tc.fields).Err(); err != nil {
				t.Fatal(err)
			}
			_, _, _, claimErr := s.Claim(ctx, key, "owner", []byte("new"), time.Minute, time.Minute)
			_, reclaimErr := s.Reclaim(ctx, key, "owner", "other", []byte("new"), time.Minute, time.Minute)
			_, renewErr := s.Renew(ctx, key, "owner", time.Minute)
			_, commitErr := s.Commit(ctx, key, "owner", []byte("new"), time.Minute)
			_, unknownErr := s.MarkUnknown(ctx, key, "owner", []byte("new"), time.Minute)
			_, releaseErr := s.Release(ctx, key, "owner")
			_, _, getErr := s.Get(ctx, key)
			for op, err := range map[string]error{"Claim": claimErr, "Reclaim": reclaimErr, "Renew": renewErr,
				"Commit": commitErr, "MarkUnknown": unknownErr, "Release": releaseErr, "Get": getErr} {
				if !errors.Is(err, record.ErrCorrupt) {
					t.Errorf("%s = %v, want record.ErrCorrupt", op, err)
				}
			}
			if got := raw.HLen(ctx, rkey).Val(); got != int64(len(tc.fields)) {
				t.Errorf("record has %d fields after the refused writes, want %d (unchanged)", got, len(tc.fields))
			}
			if existed, err := s.Delete(ctx, key); !existed || err != nil {
				t.Errorf("Delete = %v, %v; want true", existed, err)
			}
			mustClaim(t, s, key, time.Minute, []byte("fresh"))
		})
	}
	t.Run("wrong type", func(t *testing.T) {
		rkey := redisstore.RedisKey(s, "string")
		raw.Set(ctx, rkey, "x", 0)
		if _, _, _, err := s.Claim(ctx, "string", "owner", nil, time.Minute, time.Minute); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Claim on a string key = %v, want WRONGTYPE", err)
		}
		if v := raw.Get(ctx, rkey).Val(); v != "x" {
			t.Errorf("string key = %q after Claim, want unchanged", v)
		}
	})
}

// TestServerClockDecidesLapse: lease deadlines are server time, stored in milliseconds.
func TestLeaseUsesServerTime(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	raw := newClient(t, srv)
	s := newStore(t, srv, redisstore.Options{})
	serverNow, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "k", time.Minute, nil)
	leaseUntil, err := raw.HGet(ctx, redisstore.RedisKey(s, "k"), "lease_until").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.UnixMilli(leaseUntil).Sub(serverNow); d < time.Minute-time.Second || d > time.Minute+5*time.Second {
		t.Errorf("lease_until - server TIME = %s, want about 1m", d)
	}
}
