package redisstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

var _ record.SafetyReporter = (*redisstore.Store)(nil)

// storeAs returns a store on srv that runs as the ACL user created with rules (none: the default
// user), with opts.
func storeAs(t *testing.T, srv *redistest.Server, rules string, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	copts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if rules != "" {
		setUser(t, srv, rules)
		copts.Username, copts.Password = "gw", "gw-password"
	}
	s, err := redisstore.New(redis.NewClient(copts), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// setUser creates or changes the ACL user gw (password gw-password) with rules.
func setUser(t *testing.T, srv *redistest.Server, rules string) {
	t.Helper()
	cmd := []any{"ACL", "SETUSER", "gw", "on", ">gw-password", "~*", "&*"}
	for _, r := range strings.Fields(rules) {
		cmd = append(cmd, r)
	}
	if err := newClient(t, srv).Do(ctx, cmd...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
}

// TestSafe: the safety check fails closed on every Redis that could lose records or cannot take
// them, and names why (docs/cases.md C15): an evicting policy (volatile-lru too: every record has a
// TTL), read from INFO memory when CONFIG is renamed, a policy it cannot read, Redis out of memory
// (writes refused, reads still work), an ACL that refuses the scripts or a command they call, and
// a Redis it cannot reach.
func TestSafe(t *testing.T) {
	t.Parallel()
	noConfig := []string{"--rename-command", "CONFIG", ""}
	noConfigNoInfo := []string{"--rename-command", "CONFIG", "", "--rename-command", "INFO", ""}
	cases := []struct {
		name          string
		args          []string
		aclUser       string // when set, the store runs as this ACL user, created with these rules
		allowEviction bool
		kill          bool  // the server is killed before the first check
		wantErr       error // nil: fit; errUnreachable: unfit for want of an answer
		wantInErr     string
	}{
		{"noeviction", nil, "", false, false, nil, ""},
		{"volatile-lru", []string{"--maxmemory-policy", "volatile-lru"}, "", false, false, redisstore.ErrEvictionPolicy, `"volatile-lru"`},
		{"allkeys-lru allowed", []string{"--maxmemory-policy", "allkeys-lru"}, "", true, false, nil, ""},
		{"CONFIG renamed, volatile-lru", append([]string{"--maxmemory-policy", "volatile-lru"}, noConfig...), "", false, false, redisstore.ErrEvictionPolicy, `"volatile-lru"`},
		{"CONFIG renamed, noeviction", noConfig, "", false, false, nil, ""},
		{"CONFIG and INFO renamed", noConfigNoInfo, "", false, false, redisstore.ErrEvictionPolicy, "cannot read maxmemory-policy"},
		{"out of memory", []string{"--maxmemory", "1"}, "", false, false, record.ErrWritesRefused, "OOM"},
		{"ACL without evalsha and eval", nil, "+@all -evalsha -eval", false, false, redisstore.ErrScriptsRefused, "NOPERM"},
		{"ACL without hset", nil, "+@all -hset", false, false, redisstore.ErrScriptsRefused, "can't run this command"},
		{"unreachable", nil, "", false, true, errUnreachable, "safety check"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Options{Args: tc.args})
			s := storeAs(t, srv, tc.aclUser, redisstore.Options{AllowEviction: tc.allowEviction})
			if tc.kill {
				srv.Kill()
			}
			err := s.Safe()
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Safe() = %v, want nil", err)
			case tc.wantErr == nil:
				return
			case err == nil || !strings.Contains(err.Error(), tc.wantInErr):
				t.Fatalf("Safe() = %v, want an error naming %s", err, tc.wantInErr)
			case tc.wantErr == errUnreachable && (errors.Is(err, record.ErrWritesRefused) || errors.Is(err, redisstore.ErrEvictionPolicy)):
				t.Fatalf("Safe() = %v, want an error that is neither ErrWritesRefused nor ErrEvictionPolicy", err)
			case tc.wantErr != errUnreachable && !errors.Is(err, tc.wantErr):
				t.Fatalf("Safe() = %v, want it to wrap %v", err, tc.wantErr)
			}
			if err2 := s.Check(ctx); err2 == nil || err2.Error() != err.Error() && !tc.kill {
				t.Errorf("Check() = %v, want Safe's %v", err2, err)
			}
		})
	}
}

// errUnreachable stands, in TestSafe, for the error of a Redis that does not answer.
var errUnreachable = errors.New("unreachable")

// changes records the verdicts OnSafetyChange is told, in order.
type changes struct {
	mu   sync.Mutex
	errs []error
}

func (c *changes) add(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

func (c *changes) get() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// waitSafe polls s.Safe until cond holds of its verdict, failing the test after a bound on a hang
// (never an assertion of speed).
func waitSafe(t *testing.T, s *redisstore.Store, what string, cond func(error) bool) {
	t.Helper()
	eventually.True(t, "Safe() to be "+what, func() bool { return cond(s.Safe()) })
}

// TestSafeFollowsThePolicy: the background check sees maxmemory-policy change both ways, and
// OnSafetyChange is told each change once, however many checks ran meanwhile.
func TestSafeFollowsThePolicy(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	var seen changes
	s := newStore(t, srv, redisstore.Options{CheckInterval: 10 * time.Millisecond, OnSafetyChange: seen.add})
	if err := s.Safe(); err != nil {
		t.Fatalf("Safe() on noeviction = %v", err)
	}
	raw := newClient(t, srv)
	if err := raw.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	waitSafe(t, s, "ErrEvictionPolicy", func(err error) bool { return errors.Is(err, redisstore.ErrEvictionPolicy) })
	for range 5 {
		if err := s.Check(ctx); !errors.Is(err, redisstore.ErrEvictionPolicy) {
			t.Fatalf("Check() = %v, want ErrEvictionPolicy", err)
		}
	}
	if err := raw.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	waitSafe(t, s, "nil", func(err error) bool { return err == nil })
	got := seen.get()
	if len(got) != 2 || !errors.Is(got[0], redisstore.ErrEvictionPolicy) || got[1] != nil {
		t.Errorf("OnSafetyChange told %v, want [ErrEvictionPolicy, nil]", got)
	}
}

// TestSafeCheckedAtOnceAfterAScriptError: a claim that fails with OOM or NOPERM wakes the check at
// once (the interval is an hour here), and under OOM a claim of a committed record still reads
// it: the replay of a committed key works while new keys are refused, and a duplicate of a call in
// progress learns it is in progress. The same with
// Options.AutoPipeline, whose batches' errors the check hears as well; its own probe's OOM does not
// wake it again (the probe keeps to the client's pool, where the hook sees the check's context).
func TestSafeCheckedAtOnceAfterAScriptError(t *testing.T) {
	t.Parallel()
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("out of memory, auto pipelining %v", auto), func(t *testing.T) {
			t.Parallel()
			outOfMemory(t, auto)
		})
	}
	t.Run("NOPERM", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{})
		s := storeAs(t, srv, "+@all", redisstore.Options{CheckInterval: time.Hour})
		if err := s.Safe(); err != nil {
			t.Fatalf("Safe() = %v", err)
		}
		setUser(t, srv, "-evalsha -eval")
		if _, _, _, err := s.Claim(ctx, "k", "owner", []byte("p"), time.Minute, time.Hour); !redis.HasErrorPrefix(err, "NOPERM") {
			t.Fatalf("Claim without evalsha = %v, want NOPERM", err)
		}
		waitSafe(t, s, "ErrScriptsRefused", func(err error) bool { return errors.Is(err, redisstore.ErrScriptsRefused) })
	})
}

// outOfMemory is TestSafeCheckedAtOnceAfterAScriptError's OOM case, with or without auto pipelining.
func outOfMemory(t *testing.T, auto bool) {
	srv := redistest.Start(t, redistest.Options{})
	var seen changes
	s := newStore(t, srv, redisstore.Options{CheckInterval: time.Hour, AutoPipeline: auto, OnSafetyChange: seen.add})
	mustClaim(t, s, "done", time.Hour, []byte("claim"))
	if ok, err := s.Commit(ctx, "done", "owner", []byte("receipt"), time.Hour); !ok || err != nil {
		t.Fatalf("Commit = %v, %v", ok, err)
	}
	mustClaim(t, s, "running", time.Hour, []byte("claim"))
	if err := s.Safe(); err != nil {
		t.Fatalf("Safe() = %v", err)
	}
	raw := newClient(t, srv)
	if err := raw.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Claim(ctx, "new", "owner", []byte("p"), time.Minute, time.Hour); !redis.HasErrorPrefix(err, "OOM") {
		t.Fatalf("Claim of a new key out of memory = %v, want OOM", err)
	}
	// Told by OnSafetyChange, not by Safe: a Safe that returns an error asks for a check itself.
	eventually.True(t, "OnSafetyChange to be told ErrWritesRefused", func() bool {
		errs := seen.get()
		return len(errs) > 0 && errors.Is(errs[len(errs)-1], record.ErrWritesRefused)
	})
	// The check that found OOM failed its own probe: that must not wake another (at most one a
	// second, minGap), nor any later one. PING starts each check.
	pings := commandCalls(t, raw)["ping"]
	time.Sleep(2500 * time.Millisecond) // a window of wall time, the clock of the checks' minimum gap: a woken check would run in it
	if n := commandCalls(t, raw)["ping"] - pings; n != 0 {
		t.Errorf("%d more safety checks ran in 2.5 s after the one that found OOM, want 0 (its own probe woke it)", n)
	}
	claimed, state, stored, err := s.Claim(ctx, "done", "other", []byte("p"), time.Minute, time.Hour)
	if err != nil || claimed || state != record.StateCommitted || string(stored.Settle) != "receipt" {
		t.Fatalf("Claim of a committed key out of memory = %v, %q, %q, %v; want its receipt", claimed, state, stored, err)
	}
	// A duplicate of a call in progress learns it is in progress, though Redis refuses to mark the
	// record watched.
	if claimed, state, _, err := s.Claim(ctx, "running", "other", []byte("p"), time.Minute, time.Hour); err != nil || claimed || state != record.StateInProgress {
		t.Fatalf("Claim of a key in progress out of memory = %v, %q, %v; want in progress", claimed, state, err)
	}
	if err := raw.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check() with memory again = %v", err)
	}
	if err := s.Safe(); err != nil {
		t.Fatalf("Safe() after a passing check = %v", err)
	}
}

// TestSafeAfterClose: Safe does not wait on a closed store.
func TestSafeAfterClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, redisstore.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Safe(); err == nil {
		t.Error("Safe() of a closed store = nil")
	}
}

func TestNewRefusesNegativeCheckInterval(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	if _, err := redisstore.New(client, redisstore.Options{CheckInterval: -time.Second}); err == nil || !strings.Contains(err.Error(), "check interval") {
		t.Errorf("New with a negative check interval: %v", err)
	}
}

// TestCheckGapShortWhileUnreachable: while the last check could not reach Redis, a request may
// ask for the next one 100 ms after it, not a second: a failed check, its go-redis retries and
// their backoff included, may end a moment before Redis returns, and a Redis that is back must be
// found so within a second (docs/cases.md C27). Once Redis answers, a second again:
// the checks of a reachable Redis that is unfit write a probe key each.
func TestCheckGapShortWhileUnreachable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, redisstore.Options{CheckInterval: time.Hour})
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check() = %v", err)
	}
	if gap := redisstore.CheckGap(s); gap != time.Second {
		t.Errorf("gap after a check that found Redis fit = %s, want 1s", gap)
	}
	srv.Stop()
	if err := s.Check(ctx); err == nil {
		t.Fatal("Check() with Redis stopped = nil")
	}
	if gap := redisstore.CheckGap(s); gap != 100*time.Millisecond {
		t.Errorf("gap after a check that could not reach Redis = %s, want 100ms", gap)
	}
	srv.Restart()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check() with Redis back = %v", err)
	}
	if gap := redisstore.CheckGap(s); gap != time.Second {
		t.Errorf("gap once Redis is back = %s, want 1s", gap)
	}
}

// TestSafeAgainWhenRedisReturns: with checks an hour apart, a Redis that stopped is found
// unreachable by the check that a failed command asks for, and found fit again by the check that
// a call of Safe asks for once it is back (docs/stores.md, "Fail closed"): recovery does not wait
// for the interval. With or without Options.AutoPipeline.
func TestSafeAgainWhenRedisReturns(t *testing.T) {
	t.Parallel()
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto pipelining %v", auto), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Options{})
			s := newStore(t, srv, redisstore.Options{CheckInterval: time.Hour, AutoPipeline: auto})
			if err := s.Safe(); err != nil {
				t.Fatalf("Safe() = %v", err)
			}
			srv.Stop()
			if _, _, _, err := s.Claim(ctx, "k", "owner", []byte("p"), time.Minute, time.Hour); err == nil {
				t.Fatal("Claim with Redis stopped = nil")
			}
			waitSafe(t, s, "an error (Redis stopped)", func(err error) bool { return err != nil })
			srv.Restart()
			waitSafe(t, s, "nil (Redis back)", func(err error) bool { return err == nil })
		})
	}
}
