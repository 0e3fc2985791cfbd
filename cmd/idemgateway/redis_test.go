package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

// The secrets of the tests below: none may appear in any printed settings, error or log line.
var secrets = []string{"admin-s3cret", "url-s3cret", "redis-s3cret", "sentinel-s3cret", "pg-s3cret"}

func assertNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, secret := range secrets {
		if strings.Contains(text, secret) {
			t.Errorf("%s reveals %q: %s", what, secret, text)
		}
	}
}

// TestSecretsNeverPrinted: the admin token and the Redis passwords never reach a printed settings
// value, an error, or the log.
func TestSecretsNeverPrinted(t *testing.T) {
	configs := []struct {
		name string
		env  map[string]string
	}{
		{"url", map[string]string{"IDEMGATEWAY_ADMIN_TOKEN": "admin-s3cret", "IDEMGATEWAY_REDIS_URL": "rediss://gw:url-s3cret@127.0.0.1:1/0"}},
		{"url and password", map[string]string{"IDEMGATEWAY_REDIS_URL": "redis://127.0.0.1:1/0", "IDEMGATEWAY_REDIS_PASSWORD": "redis-s3cret"}},
		{"sentinel", map[string]string{"IDEMGATEWAY_ADMIN_TOKEN": "admin-s3cret", "IDEMGATEWAY_REDIS_ADDRS": "127.0.0.1:1",
			"IDEMGATEWAY_REDIS_MASTER": "m", "IDEMGATEWAY_REDIS_PASSWORD": "redis-s3cret", "IDEMGATEWAY_REDIS_SENTINEL_PASSWORD": "sentinel-s3cret"}},
		{"cluster", map[string]string{"IDEMGATEWAY_REDIS_ADDRS": "127.0.0.1:1", "IDEMGATEWAY_REDIS_PASSWORD": "redis-s3cret"}},
		{"postgres", map[string]string{"IDEMGATEWAY_POSTGRES_URL": "postgres://gw:pg-s3cret@127.0.0.1:1/db?connect_timeout=1"}},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			s, err := loadSettings(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
				out := fmt.Sprintf(format, s)
				assertNoSecret(t, format, out)
				if !strings.Contains(out, "[redacted]") && !strings.Contains(out, "xxxxx") {
					t.Errorf("%s of the settings shows no redaction: %s", format, out)
				}
			}
			assertNoSecret(t, "storeName", s.storeName())

			// A store that cannot connect: opening it or pinging it must fail (nothing listens on
			// 127.0.0.1:1), and that error and the log name no secret. The checks do not depend on
			// an error happening to occur: no error fails the test.
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			s.RedisDialTimeout = 100 * time.Millisecond
			what := "openStore error"
			st, closeStore, err := s.openStore(log)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				what, err = "Ping error", st.Ping(ctx)
				cancel()
				closeStore()
			}
			if err == nil {
				t.Fatal("openStore and Ping of a store at 127.0.0.1:1 succeeded, want an error")
			}
			assertNoSecret(t, what, err.Error())
			assertNoSecret(t, "log", logs.String())
		})
	}

	// Settings that fail validation: the errors name settings, not values.
	bad := []map[string]string{
		{"IDEMGATEWAY_REDIS_URL": "redis://gw:url-s3cret@127.0.0.1:1/0", "IDEMGATEWAY_REDIS_TLS": "true"},
		{"IDEMGATEWAY_REDIS_URL": "redis://gw:url-s3cret@127.0.0.1:1/0", "IDEMGATEWAY_REDIS_ADDRS": "a:1"},
		{"IDEMGATEWAY_ADMIN_LISTEN": "0.0.0.0:9090", "IDEMGATEWAY_REDIS_PASSWORD": "redis-s3cret"},
		{"IDEMGATEWAY_REDIS_ADDRS": "a:1", "IDEMGATEWAY_REDIS_SENTINEL_PASSWORD": "sentinel-s3cret"},
		{"IDEMGATEWAY_POSTGRES_URL": "postgres://gw:pg-s3cret@127.0.0.1:1/db", "IDEMGATEWAY_REDIS_URL": "redis://127.0.0.1:1"},
		{"IDEMGATEWAY_POSTGRES_URL": "postgres://gw:pg-s3cret@127.0.0.1:1/db?pool_max_conns=many"},
	}
	for i, env := range bad {
		t.Run(fmt.Sprintf("invalid %d", i), func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			_, err := loadSettings(nil)
			if err == nil {
				t.Fatal("no error")
			}
			assertNoSecret(t, "loadSettings error", err.Error())
		})
	}
	for _, s := range []*settings{
		{RedisURL: "redis://gw:url-s3cret@[::1"},                                       // unparsable
		{RedisURL: "redis://gw:url-s3cret@127.0.0.1:1", RedisPassword: "redis-s3cret"}, // password twice
		{RedisURL: "redis://gw:url-s3cret@127.0.0.1:1", RedisUsername: "other"},        // two users
	} {
		if _, err := s.redisClient(); err == nil {
			t.Errorf("redisClient(%v): no error", s)
		} else {
			assertNoSecret(t, "redisClient error", err.Error())
		}
	}
}

// redisSettings returns the default settings (loadSettings without arguments) changed by set,
// after the same validation as loadSettings. (t.Setenv would forbid t.Parallel.)
func redisSettings(t *testing.T, set func(s *settings)) *settings {
	t.Helper()
	s, err := loadSettings(nil)
	if err != nil {
		t.Fatalf("loadSettings: %v", err)
	}
	set(s)
	if err := s.checkRedis(); err != nil {
		t.Fatalf("checkRedis: %v", err)
	}
	return s
}

// exercise opens the store of s, pings it, claims and commits keys spread over many hash slots,
// runs every other script once (renew, mark-unknown, reclaim, release), and watches a key's settle
// notices: with notices, WatchSettled must confirm and the settle must be heard; without (a user
// without +subscribe), WatchSettled must fail, the waiters' cue to poll.
func exercise(t *testing.T, s *settings, log *slog.Logger, notices bool) {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, closeStore, err := s.openStore(log)
	if err != nil {
		t.Fatalf("openStore: %v", err)
	}
	defer closeStore()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	// The safety check (PING, CONFIG GET, a probe claimed and released) passes with the least
	// privileges docs/deploy.md gives, on every topology.
	if r, ok := st.(record.SafetyReporter); !ok {
		t.Fatalf("the store %T has no safety check", st)
	} else if err := r.Safe(); err != nil {
		t.Fatalf("Safe: %v", err)
	}
	for i := range 20 {
		key := fmt.Sprintf("tenant/tool/key-%d", i)
		claimed, _, _, err := st.Claim(ctx, key, "owner", []byte("claim"), time.Minute, time.Minute)
		if err != nil || !claimed {
			t.Fatalf("Claim(%q) = %v, %v", key, claimed, err)
		}
		if ok, err := st.Commit(ctx, key, "owner", []byte("receipt"), time.Minute); !ok || err != nil {
			t.Fatalf("Commit(%q) = %v, %v", key, ok, err)
		}
		if state, _, err := st.Get(ctx, key); state != record.StateCommitted || err != nil {
			t.Fatalf("Get(%q) = %q, %v", key, state, err)
		}
	}

	const key = "tenant/tool/every-script"
	steps := []struct {
		name string
		run  func() (bool, error)
	}{
		{"Claim", func() (bool, error) {
			claimed, _, _, err := st.Claim(ctx, key, "owner", []byte("claim"), time.Minute, time.Minute)
			return claimed, err
		}},
		{"Renew", func() (bool, error) { return st.Renew(ctx, key, "owner", time.Minute) }},
		{"MarkUnknown", func() (bool, error) { return st.MarkUnknown(ctx, key, "owner", []byte("unknown"), time.Minute) }},
		{"Reclaim", func() (bool, error) {
			return st.Reclaim(ctx, key, "owner", "second", []byte("claim"), time.Minute, time.Minute)
		}},
		{"Release", func() (bool, error) { return st.Release(ctx, key, "second") }},
	}
	for _, step := range steps {
		if ok, err := step.run(); !ok || err != nil {
			t.Fatalf("%s(%q) = %v, %v", step.name, key, ok, err)
		}
	}

	n, ok := st.(record.SettleNotifier)
	if !ok {
		t.Fatalf("the store %T has no settle notices", st)
	}
	const watched = "tenant/tool/watched"
	heard := make(chan struct{}, 1)
	watchCtx, cancelWatch := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelWatch()
	stop, err := n.WatchSettled(watchCtx, watched, func() {
		select {
		case heard <- struct{}{}:
		default:
		}
	})
	defer stop()
	if !notices {
		if err == nil {
			t.Fatal("WatchSettled without +subscribe: no error")
		}
		return
	}
	if err != nil {
		t.Fatalf("WatchSettled: %v", err)
	}
	if claimed, _, _, err := st.Claim(ctx, watched, "owner", []byte("claim"), time.Minute, time.Minute); !claimed || err != nil {
		t.Fatalf("Claim(%q) = %v, %v", watched, claimed, err)
	}
	// A duplicate finds it in progress, as a waiting one does: only then does the settle PUBLISH.
	if claimed, state, _, err := st.Claim(ctx, watched, "duplicate", []byte("claim"), time.Minute, time.Minute); claimed || state != record.StateInProgress || err != nil {
		t.Fatalf("duplicate Claim(%q) = %v, %q, %v; want in progress", watched, claimed, state, err)
	}
	if ok, err := st.Commit(ctx, watched, "owner", []byte("receipt"), time.Minute); !ok || err != nil {
		t.Fatalf("Commit(%q) = %v, %v", watched, ok, err)
	}
	select {
	case <-heard:
	case <-ctx.Done():
		t.Fatalf("no settle notice of %q", watched)
	}
}

// aclArgs turn off Redis's default user and add the user gw with password pw.
func aclArgs(pw string) []string {
	return []string{"--user", "default", "off", "--user", "gw", "on", ">" + pw, "~*", "&*", "+@all"}
}

// leastPrivilegeACL adds the user gw with password pw and only the commands and keys the gateway
// needs (docs/deploy.md): the connection commands, the scripts and what they call, DEL, WAIT,
// CONFIG GET (the eviction check), the settle notices (PUBLISH, SUBSCRIBE to its channels) and,
// for Redis Cluster, the cluster's topology.
func leastPrivilegeACL(pw string) []string {
	return []string{"--user", "gw", "on", ">" + pw, "~idemgateway:*", "resetchannels", "&idemgateway:settled:*", "-@all", "+@connection",
		"+evalsha", "+eval", "+hgetall", "+hset", "+pexpire", "+time", "+del", "+wait", "+config|get",
		"+publish", "+subscribe", "+unsubscribe", "+zadd", "+zrem", "+zrangebylex",
		"+cluster|slots", "+cluster|shards", "+cluster|nodes", "+command"}
}

// TestRedisTopologies opens the store through the settings against real servers: one Redis over
// TLS with an ACL user, a Redis Cluster reached through one seed address, and Sentinel with
// passwords for the sentinels and the data nodes and WAIT.
func TestRedisTopologies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and Sentinels (about 3 s); skipped with -short")
	}
	t.Run("single node, TLS and ACL user in the URL", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{TLS: true, Args: aclArgs("url-s3cret")})
		url := strings.Replace(srv.URL(), "rediss://", "rediss://gw:url-s3cret@", 1)
		exercise(t, redisSettings(t, func(s *settings) { s.RedisURL, s.RedisTLSCAFile = url, srv.CAFile() }), nil, true)
	})
	t.Run("single node, ACL user in the settings", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{Args: aclArgs("redis-s3cret")})
		exercise(t, redisSettings(t, func(s *settings) {
			s.RedisURL, s.RedisUsername, s.RedisPassword = srv.URL(), "gw", "redis-s3cret"
		}), nil, true)
	})
	t.Run("single node, auto pipelining", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{})
		exercise(t, redisSettings(t, func(s *settings) { s.RedisURL, s.RedisAutoPipeline = srv.URL(), true }), nil, true)
	})
	t.Run("single node, least-privilege ACL user", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{Args: append([]string{"--user", "default", "off"}, leastPrivilegeACL("redis-s3cret")...)})
		exercise(t, redisSettings(t, func(s *settings) {
			s.RedisURL, s.RedisUsername, s.RedisPassword = srv.URL(), "gw", "redis-s3cret"
		}), nil, true)
	})
	// A user set up for an earlier version, whose ACL lacks HGETALL, keeps working: its scripts
	// read records with HMGET and EXISTS instead, and only its settle notices fail (PSUBSCRIBE
	// where SUBSCRIBE is needed), so its waiting duplicates poll.
	t.Run("single node, least-privilege ACL user of an earlier version", func(t *testing.T) {
		t.Parallel()
		earlier := slices.Clone(leastPrivilegeACL("redis-s3cret"))
		for i, rule := range earlier {
			earlier[i] = strings.NewReplacer("+subscribe", "+psubscribe", "+unsubscribe", "+punsubscribe", "+hgetall", "+hmget").Replace(rule)
		}
		earlier = append(earlier, "+exists")
		srv := redistest.Start(t, redistest.Options{Args: append([]string{"--user", "default", "off"}, earlier...)})
		exercise(t, redisSettings(t, func(s *settings) {
			s.RedisURL, s.RedisUsername, s.RedisPassword = srv.URL(), "gw", "redis-s3cret"
		}), nil, false)
	})
	t.Run("single node, TLS without the CA", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{TLS: true})
		s := redisSettings(t, func(s *settings) { s.RedisURL = srv.URL() })
		st, closeStore, err := s.openStore(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer closeStore()
		if err := st.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("Ping of a server whose CA is not trusted = %v, want a certificate error", err)
		}
	})
	t.Run("single node, wrong password", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{Args: aclArgs("right-s3cret")})
		s := redisSettings(t, func(s *settings) {
			s.RedisURL, s.RedisUsername, s.RedisPassword = srv.URL(), "gw", "redis-s3cret"
		})
		st, closeStore, err := s.openStore(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer closeStore()
		err = st.Ping(context.Background())
		if err == nil {
			t.Fatal("Ping with a wrong password: no error")
		}
		assertNoSecret(t, "Ping error", err.Error())
		if strings.Contains(err.Error(), "right-s3cret") {
			t.Errorf("Ping error reveals the server's password: %v", err)
		}
	})
	t.Run("cluster from one seed, least-privilege ACL user, TLS, WAIT", func(t *testing.T) {
		t.Parallel()
		// The default user (and its password) is for redis-cli --cluster create; the gateway
		// connects as the least-privilege user gw.
		cluster := redistest.StartCluster(t, 3, redistest.Options{Password: "admin-s3cret", TLS: true, Args: leastPrivilegeACL("redis-s3cret")})
		exercise(t, redisSettings(t, func(s *settings) {
			s.RedisAddrs, s.RedisUsername, s.RedisPassword = cluster.Addrs()[1:2], "gw", "redis-s3cret"
			s.RedisWaitReplicas, s.RedisWaitTimeout = 1, time.Millisecond
			s.RedisTLS, s.RedisTLSCAFile = true, cluster.Nodes[0].CAFile()
		}), nil, true)
	})
	t.Run("sentinel with passwords and WAIT", func(t *testing.T) {
		t.Parallel()
		primary := redistest.Start(t, redistest.Options{Password: "redis-s3cret"})
		redistest.Start(t, redistest.Options{Password: "redis-s3cret", ReplicaOf: primary.Addr()})
		sentinels := redistest.StartSentinels(t, primary, 3, redistest.SentinelOptions{
			Password: "sentinel-s3cret", MasterPassword: "redis-s3cret"})
		var logs bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&logs, nil))
		// Two replicas wanted, one exists: every commit logs a warning and still succeeds.
		exercise(t, redisSettings(t, func(s *settings) {
			s.RedisAddrs, s.RedisMaster = sentinels.Addrs(), sentinels.MasterName()
			s.RedisPassword, s.RedisSentinelPassword = "redis-s3cret", "sentinel-s3cret"
			s.RedisWaitReplicas, s.RedisWaitTimeout = 2, 20*time.Millisecond
		}), log, true)
		// exercise commits 21 keys and marks one unknown.
		if n := strings.Count(logs.String(), `"msg":"record write not confirmed by enough Redis replicas`); n != 22 {
			t.Errorf("%d warnings about unconfirmed writes, want 22 (one per commit or mark-unknown):\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), `"op":"commit","key":"tenant/tool/key-0","acked":1,"want":2`) {
			t.Errorf("the warning does not say op, key, acked and want:\n%s", logs.String())
		}
		assertNoSecret(t, "log", logs.String())
	})
}

// TestRedisCAFile: the CA file must exist and hold a certificate, and needs TLS.
func TestRedisCAFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("no certificate here"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		s       settings
		wantErr string
	}{
		{"missing file", settings{RedisURL: "rediss://r:6379", RedisTLSCAFile: filepath.Join(dir, "nope.pem")}, "IDEMGATEWAY_REDIS_TLS_CA_FILE: open"},
		{"no certificate", settings{RedisAddrs: []string{"a:1"}, RedisTLS: true, RedisTLSCAFile: empty}, "holds no PEM certificate"},
		{"without TLS", settings{RedisURL: "redis://r:6379", RedisTLSCAFile: empty}, "TLS is off"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.s.redisClient(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("redisClient() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestRedisClientKinds: each topology gets its go-redis client, a single seed address included.
func TestRedisClientKinds(t *testing.T) {
	cases := []struct {
		name string
		s    settings
		want string
	}{
		{"url", settings{RedisURL: "redis://127.0.0.1:1/0"}, "*redis.Client"},
		{"one cluster seed", settings{RedisAddrs: []string{"127.0.0.1:1"}}, "*redis.ClusterClient"},
		{"sentinel", settings{RedisAddrs: []string{"127.0.0.1:1"}, RedisMaster: "m"}, "*redis.Client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.s.redisClient()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := fmt.Sprintf("%T", c); got != tc.want {
				t.Errorf("client is %s, want %s", got, tc.want)
			}
		})
	}
	// The pool size, timeouts and retries reach the client, whatever the URL says.
	s := settings{RedisURL: "redis://127.0.0.1:1/0?pool_size=99&max_retries=-1", RedisPoolSize: 7, RedisDialTimeout: time.Second,
		RedisReadTimeout: 2 * time.Second, RedisWriteTimeout: 4 * time.Second}
	c, err := s.redisClient()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.(*redis.Client).Options()
	if o.PoolSize != 7 || o.DialTimeout != time.Second || o.ReadTimeout != 2*time.Second || o.WriteTimeout != 4*time.Second ||
		!o.ContextTimeoutEnabled || o.MaxRetries != redisMaxRetries {
		t.Errorf("options = pool %d, dial %s, read %s, write %s, context timeouts %v, retries %d", o.PoolSize, o.DialTimeout, o.ReadTimeout,
			o.WriteTimeout, o.ContextTimeoutEnabled, o.MaxRetries)
	}
	// Cluster and Sentinel: the same retries and context timeouts.
	cluster, err := (&settings{RedisAddrs: []string{"127.0.0.1:1"}}).redisClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	if o := cluster.(*redis.ClusterClient).Options(); o.MaxRetries != redisMaxRetries || !o.ContextTimeoutEnabled {
		t.Errorf("cluster options: retries %d, context timeouts %v", o.MaxRetries, o.ContextTimeoutEnabled)
	}
	failover, err := (&settings{RedisAddrs: []string{"127.0.0.1:1"}, RedisMaster: "m"}).redisClient()
	if err != nil {
		t.Fatal(err)
	}
	defer failover.Close()
	if o := failover.(*redis.Client).Options(); o.MaxRetries != redisMaxRetries || !o.ContextTimeoutEnabled {
		t.Errorf("sentinel options: retries %d, context timeouts %v", o.MaxRetries, o.ContextTimeoutEnabled)
	}
}

var _ record.Store = (*redisstore.Store)(nil)

// quiet drops go-redis's own log lines (dial failures of the unreachable servers above).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain runs the tests, or, with IDEMGATEWAY_TEST_MAIN set, the command itself on the
// arguments after "--" (TestHelpExitsZero runs the test binary so).
func TestMain(m *testing.M) {
	if os.Getenv("IDEMGATEWAY_TEST_MAIN") != "" {
		os.Args = append(os.Args[:1], os.Args[slices.Index(os.Args, "--")+1:]...)
		main()
		os.Exit(0)
	}
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}
