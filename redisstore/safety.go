package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/record"
)

// DefaultCheckInterval is how often the safety check runs when Options.CheckInterval is zero.
const DefaultCheckInterval = 5 * time.Second

// checkTimeout bounds one safety check (its four round trips at most), as the gateway bounds one
// store call.
const checkTimeout = 2 * time.Second

// unreachableGap is the least time between a check that could not reach Redis and the next one
// that a request asks for: a check of a Redis that is down costs it nothing, and one that is back
// must be found so within a second, though the failed check, its go-redis retries and their
// backoff included, may have ended a moment before it came back.
const unreachableGap = 100 * time.Millisecond

// ErrScriptsRefused is wrapped by the error of Safe (and Check) when Redis refuses the store's
// scripts or a command they call: an ACL without +evalsha, +eval or one of the commands the
// scripts call (docs/deploy.md, "TLS and ACL"), or a script that is not cached and cannot be
// loaded. No transition can run.
var ErrScriptsRefused = errors.New("redis refuses the store's scripts")

// Safe implements record.SafetyReporter: it returns nil while the last safety check found Redis fit
// to keep records, and otherwise its error:
//
//   - an error wrapping ErrEvictionPolicy while maxmemory-policy could evict records, or cannot be
//     read (unless Options.AllowEviction): the same verdict as Ping;
//   - an error wrapping record.ErrWritesRefused while Redis refuses writes: out of memory (OOM
//     under noeviction), a replica (READONLY, during a failover) or a failed RDB save (MISCONF).
//     Reads still work, so a committed record still replays;
//   - an error wrapping ErrScriptsRefused while Redis refuses the store's scripts;
//   - Redis's error while it cannot be reached: the check cannot tell, and fails closed.
//
// The check sends PING, reads the policy as Ping does, and claims and releases a probe key
// ("safety-check/<random>", under Options.Prefix), since only a write shows that writes and the
// scripts work. It runs every Options.CheckInterval (DefaultCheckInterval, 5 s), and at once when
// the store is met unfit: a call of Safe that returns an error, a command of this store that could
// not reach Redis, or a script call that fails with an error reply other than NOSCRIPT and CORRUPT
// (OOM, NOPERM, …); never sooner than the interval or 1 s, whichever is shorter, after the last
// check, or 100 ms after one that could not reach Redis. So a Redis that returns is found fit
// within a second of its return, once a keyed request meets it (docs/stores.md, "Fail closed"),
// not at the next interval. The checks start with the
// first call of Safe, which waits for the first one (at most 2 s); later calls read the last
// verdict and never wait. Options.OnSafetyChange is told of every change. On Redis Cluster the policy is read from one node, and the probe writes to the node that
// serves its key.
func (s *Store) Safe() error {
	c := s.safety
	c.start.Do(func() { go c.run() })
	select {
	case <-c.first:
	case <-c.done:
		if v := c.verdict.Load(); v != nil {
			return v.err
		}
		return errors.New("redisstore: closed")
	}
	err := c.verdict.Load().err
	if err != nil {
		c.ask()
	}
	return err
}

// Check runs the safety check of Safe now, bounded by ctx and 2 s, and returns its verdict, which
// Safe returns from then on. Tests use it to see a change at once; the store's own checks make it
// unnecessary otherwise.
func (s *Store) Check(ctx context.Context) error {
	return s.safety.check(ctx)
}

// safety keeps the verdict of the store's safety checks, and runs them.
type safety struct {
	store    *Store
	interval time.Duration
	minGap   time.Duration // between a check and one that a script's error asks for
	onChange func(err error)

	verdict atomic.Pointer[verdict] // nil until the first check ends
	start   sync.Once               // starts run, at the first Safe
	first   chan struct{}           // closed when verdict is first set
	setOnce sync.Once               // closes first
	wake    chan struct{}           // buffered 1: a script's error asks for a check
	done    chan struct{}           // closed by close
	closed  sync.Once

	mu   sync.Mutex // held by a check while it sets the verdict and tells onChange
	last time.Time  // when the last check ended, under mu
}

// kindUnreachable is the kind of a verdict whose check could not reach Redis.
const kindUnreachable = "unreachable"

// verdict is what one check found: err as Safe returns it, and kind, which names the finding so
// that a change is told once (the error's text may change from one check to the next, e.g. the
// local port of a failed connection).
type verdict struct {
	kind string
	err  error
}

func newSafety(s *Store, opts Options) *safety {
	interval := opts.CheckInterval
	if interval == 0 {
		interval = DefaultCheckInterval
	}
	return &safety{store: s, interval: interval, minGap: min(interval, time.Second), onChange: opts.OnSafetyChange,
		first: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// run checks at once (or an interval after the Check that ran before it), then every interval,
// and when woken by a script's error, until close.
func (c *safety) run() {
	next := time.Now()
	c.mu.Lock()
	if c.verdict.Load() != nil {
		next = c.last.Add(c.interval)
	}
	c.mu.Unlock()
	for {
		timer := time.NewTimer(time.Until(next))
		select {
		case <-c.done:
			timer.Stop()
			return
		case <-timer.C:
		case <-c.wake:
			timer.Stop()
			c.mu.Lock()
			soonest := c.last.Add(c.gap())
			c.mu.Unlock()
			if time.Now().Before(soonest) { // checked a moment ago: not before minGap
				if soonest.Before(next) {
					next = soonest
				}
				continue
			}
		}
		_ = c.check(context.Background())
		next = time.Now().Add(c.interval)
	}
}

// gap is the least time between the last check and one that a request asks for: minGap, or
// unreachableGap after a check that could not reach Redis.
func (c *safety) gap() time.Duration {
	if v := c.verdict.Load(); v != nil && v.kind == kindUnreachable {
		return min(c.minGap, unreachableGap)
	}
	return c.minGap
}

// ask asks run for a check now; it runs at once unless the last one ended less than minGap ago.
func (c *safety) ask() {
	select {
	case c.wake <- struct{}{}:
	default: // a check is asked for already
	}
}

// close stops the checks; Safe then returns the last verdict.
func (c *safety) close() { c.closed.Do(func() { close(c.done) }) }

// checking marks the context of a check's own commands, which must not wake another check.
type checking struct{}

// check runs one check and records its verdict.
func (c *safety) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, checking{}, true), checkTimeout)
	defer cancel()
	v := c.store.assess(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = time.Now()
	old := c.verdict.Swap(&v)
	c.setOnce.Do(func() { close(c.first) })
	if c.onChange != nil && (old == nil && v.err != nil || old != nil && old.kind != v.kind) {
		c.onChange(v.err)
	}
	return v.err
}

// assess is one safety check: PING, the eviction policy, and a write probe.
func (s *Store) assess(ctx context.Context) verdict {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return verdict{kindUnreachable, fmt.Errorf("redisstore: safety check: ping: %w", err)}
	}
	if err := s.checkPolicy(ctx); err != nil {
		if errors.Is(err, ErrEvictionPolicy) {
			return verdict{"policy: " + err.Error(), err}
		}
		return verdict{kindUnreachable, fmt.Errorf("redisstore: safety check: %w", err)}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	key, owner := "safety-check/"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:])
	_, _, _, err := s.Claim(ctx, key, owner, nil, time.Second, 10*time.Second)
	if err == nil {
		_, err = s.Release(ctx, key, owner)
	}
	var reply redis.Error
	switch {
	case err == nil:
		return verdict{"safe", nil}
	case !errors.As(err, &reply):
		return verdict{kindUnreachable, fmt.Errorf("redisstore: safety check: write probe: %w", err)}
	case writesRefused(err): // Redis's reply alone: err names the probe key, new at every check
		return verdict{"writes refused", fmt.Errorf("redisstore: Redis refuses writes: %w: %v", record.ErrWritesRefused, reply)}
	}
	return verdict{"scripts refused", fmt.Errorf("redisstore: %w: %v", ErrScriptsRefused, reply)}
}

// writesRefused reports whether err is Redis's refusal of a write that leaves reads working:
// OOM (out of memory under noeviction), READONLY (a replica) or MISCONF (a failed RDB save).
func writesRefused(err error) bool {
	for _, prefix := range []string{"OOM", "READONLY", "MISCONF"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// safetyHook wakes the safety check when a command of the store gets no reply (Redis cannot be
// reached, or did not answer in time) and when a script call fails with an error reply other than
// NOSCRIPT (which Script.Run answers with EVAL) and the store's own CORRUPT (one record's damage,
// not the store's): Redis out of memory, or refusing the script (NOPERM). A command whose caller
// went away (context.Canceled) says nothing of Redis.
type safetyHook struct{ c *safety }

func (h safetyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h safetyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd) // the client sets cmd's error after its hooks: look at err
		h.observe(ctx, cmd, err)
		return err
	}
}

func (h safetyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.observe(ctx, cmd, cmd.Err()) // set as each reply was read
		}
		return err
	}
}

func (h safetyHook) observe(ctx context.Context, cmd redis.Cmder, err error) {
	if err == nil || err == redis.Nil || ctx.Value(checking{}) != nil || errors.Is(err, context.Canceled) {
		return
	}
	var reply redis.Error
	if errors.As(err, &reply) && (!strings.HasPrefix(cmd.Name(), "eval") ||
		redis.HasErrorPrefix(err, "NOSCRIPT") || redis.HasErrorPrefix(err, "CORRUPT")) {
		return
	}
	h.c.ask()
}
