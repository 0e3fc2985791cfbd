package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/record"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "idemgateway:"

// Options configure a Store. The zero value is the default.
type Options struct {
	// Prefix is prepended to every key the store writes, so that several gateways (or other
	// applications) can share one Redis. It must not contain "{" or "}", which would break the
	// hash tag. Default DefaultPrefix ("idemgateway:").
	Prefix string

	// AllowEviction makes Ping and Safe report the store fit even when Redis's maxmemory-policy is
	// not noeviction, that is when Redis may evict records under memory pressure and so let a
	// retry execute twice. Default false.
	AllowEviction bool

	// CheckInterval is how often the safety check behind Safe runs (safety.go). It must not be
	// negative. Default DefaultCheckInterval (5 s).
	CheckInterval time.Duration

	// OnSafetyChange, when not nil, is called with Safe's new verdict each time a safety check
	// finds the store's fitness changed (nil: fit again), and after the first check when that
	// finds it unfit. It is called from the check's goroutine and must not block; log there.
	// Default nil.
	OnSafetyChange func(err error)

	// WaitReplicas, when positive, makes Commit and MarkUnknown send WAIT WaitReplicas
	// WaitTimeout in the same round trip as their script, so that they return only once that
	// many replicas have acknowledged the write or WaitTimeout has passed. A write that fewer
	// replicas acknowledged still stands (it is on the primary) and the call still succeeds;
	// OnUnreplicated is told. See the package documentation, "Replication and WAIT". Default 0:
	// no WAIT.
	WaitReplicas int

	// WaitTimeout is how long WAIT blocks for the replicas' acknowledgements, rounded up to whole
	// milliseconds. It must be shorter than the client's read timeout, or the read of WAIT's reply
	// times out first. Default DefaultWaitTimeout (100 ms); used only with WaitReplicas.
	WaitTimeout time.Duration

	// AutoPipeline sends the scripts of a request's round trips, Claim, Commit and Get, through
	// go-redis's automatic pipelining (Client.AutoPipeline, experimental since go-redis v9.22):
	// the scripts of concurrent requests go out in one write and their replies come back in one
	// read, which costs Redis less CPU per request than a write and a read each but adds latency
	// to every call (docs/performance.md#automatic-pipelining). A batch whose connection breaks
	// is sent again; every transition answers its copy as the first run
	// (docs/guarantees.md#lost-replies). Each call still ends when its context does (eval), which
	// the auto-pipeliner alone does not. Renew, Reclaim, Release, MarkUnknown, Commit with
	// WaitReplicas and the safety check keep a pooled connection each, so that a stalled batch
	// cannot hold up a lease renewal. The client must be a *redis.Client (a Sentinel failover
	// client is one) or a *redis.ClusterClient. Default false.
	AutoPipeline bool

	// OnUnreplicated, when not nil, is called (synchronously, before Commit or MarkUnknown
	// returns) after a write that WAIT reports fewer than WaitReplicas replicas acknowledged, or
	// whose WAIT reply was lost. It must not block; log or count there. Default nil.
	OnUnreplicated func(ctx context.Context, u Unreplicated)
}

// DefaultWaitTimeout is the WAIT timeout used when Options.WaitTimeout is zero.
const DefaultWaitTimeout = 100 * time.Millisecond

// Store is a record.Store on Redis. It is safe for concurrent use.
type Store struct {
	client         redis.UniversalClient
	pipelined      redis.Scripter // Options.AutoPipeline's auto-pipeliner of client, or nil
	prefix         string
	allowEviction  bool
	waitReplicas   int
	waitTimeout    time.Duration
	onUnreplicated func(ctx context.Context, u Unreplicated)
	notices        *notices // the settle notices of the watched keys (WatchSettled)
	safety         *safety  // the verdict of the safety checks (Safe)
}

// New returns a Store that keeps its records in the Redis reached by client (a *redis.Client,
// *redis.ClusterClient or Sentinel failover client). It does not contact Redis; call Ping for that
// (the safety checks start with the first Safe). It returns an error when client is nil,
// opts.Prefix contains "{" or "}", opts.WaitReplicas, opts.WaitTimeout or opts.CheckInterval is
// negative, or (for a *redis.Client or *redis.ClusterClient) WaitTimeout is not shorter than the
// client's read timeout. The Store takes over client: Store.Close closes it, and New adds a hook
// to it (safety.go).
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q contains { or }, which would break the hash tag", prefix)
	}
	if opts.WaitReplicas < 0 {
		return nil, fmt.Errorf("redisstore: wait replicas %d is negative", opts.WaitReplicas)
	}
	if opts.WaitTimeout < 0 {
		return nil, fmt.Errorf("redisstore: wait timeout %s is negative", opts.WaitTimeout)
	}
	if opts.CheckInterval < 0 {
		return nil, fmt.Errorf("redisstore: check interval %s is negative", opts.CheckInterval)
	}
	if opts.WaitTimeout == 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	if opts.WaitReplicas > 0 {
		if rt := readTimeout(client); rt > 0 && opts.WaitTimeout >= rt {
			return nil, fmt.Errorf("redisstore: wait timeout %s is not shorter than the client's read timeout %s", opts.WaitTimeout, rt)
		}
	}
	s := &Store{client: client, prefix: prefix, allowEviction: opts.AllowEviction,
		waitReplicas: opts.WaitReplicas, waitTimeout: opts.WaitTimeout, onUnreplicated: opts.OnUnreplicated,
		notices: newNotices()}
	if opts.AutoPipeline {
		ap, err := autoPipeliner(client)
		if err != nil {
			return nil, err
		}
		s.pipelined = ap
	}
	s.safety = newSafety(s, opts)
	client.AddHook(safetyHook{s.safety}) // a script's OOM or NOPERM wakes the safety check
	return s, nil
}

// autoPipeliner returns client's blocking auto-pipeliner (Options.AutoPipeline), which closes
// with client.
func autoPipeliner(client redis.UniversalClient) (*redis.AutoPipeliner, error) {
	var ap *redis.AutoPipeliner
	var err error
	switch c := client.(type) {
	case *redis.Client:
		ap, err = c.AutoPipeline()
	case *redis.ClusterClient:
		ap, err = c.AutoPipeline()
	default:
		return nil, fmt.Errorf("redisstore: auto pipelining needs a *redis.Client or *redis.ClusterClient, not %T", client)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: auto pipelining: %w", err)
	}
	return ap, nil
}

// eval runs script on the record at key. With pipelined (the scripts of a request's round trips:
// Claim, Commit, Get) and Options.AutoPipeline, it goes through the auto-pipeliner, else through
// the client; the safety check's own probe (marked by its context) takes the client, whose hooks
// see that context.
//
// go-redis's auto-pipeliner does not end a call at its context's end: a stalled batch holds every
// call in it until the connection's read timeout, and its retries after that (seconds; the chaos
// suite saw a claim answered 7 s late). A claim answered after its lease could have lapsed must not
// be acted on, and the gateway relies on every store call ending at its store timeout
// (docs/guarantees.md#lease-timing), so eval ends the call when ctx ends: an answer that comes
// later is dropped, as a lost reply is (docs/guarantees.md#lost-replies; a claim's is released by
// the gateway, its owner).
func (s *Store) eval(ctx context.Context, pipelined bool, script *redis.Script, key string, args ...any) *redis.Cmd {
	keys := []string{s.redisKey(key)}
	if !pipelined || s.pipelined == nil || ctx.Value(checking{}) != nil {
		return script.Run(ctx, s.client, keys, args...)
	}
	answer := make(chan *redis.Cmd, 1)
	go func() { answer <- script.Run(ctx, s.pipelined, keys, args...) }()
	select {
	case cmd := <-answer:
		return cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(context.Cause(ctx))
		return cmd
	}
}

// Close closes the Pub/Sub connection of WatchSettled, if it was opened, stops the safety checks,
// and closes the Redis client passed to New.
func (s *Store) Close() error {
	s.notices.close()
	s.safety.close()
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

// Claim implements record.Store.Claim with one script (one round trip). When it claims, stored is
// payload itself. lease and ttl are rounded up to whole milliseconds and must be positive; key and
// owner must not be empty.
func (s *Store) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (claimed bool, state string, stored record.Payload, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease), record.Positive("ttl", ttl)); err != nil {
		return false, "", record.Payload{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	res, err := s.eval(ctx, true, claimScript, key, owner, payload, record.Millis(lease), record.Millis(ttl)).Slice()
	if err != nil {
		return false, "", record.Payload{}, wrap("claim", key, err)
	}
	if len(res) == 2 && res[0] == int64(1) && res[1] == record.StateInProgress {
		return true, record.StateInProgress, record.Payload{Claim: payload}, nil
	}
	if (len(res) == 4 || len(res) == 5) && res[0] == int64(0) {
		if state, stored, ok := storedRecord(res[1:4]); ok {
			if len(res) == 5 { // this claim observed a lapsed lease: index the record
				s.index(ctx, key)
			}
			return false, state, stored, nil
		}
	}
	return false, "", record.Payload{}, fmt.Errorf("redisstore: claim %q: unexpected script reply of %d elements", key, len(res))
}

// storedRecord reads the state and payload of a record from the three elements of a script's reply
// that hold them: state, payload (the claim part, empty in claim.lua's answer of a settled record)
// and settle.
func storedRecord(res []any) (state string, stored record.Payload, ok bool) {
	state, ok1 := res[0].(string)
	claim, ok2 := res[1].(string)
	settle, ok3 := res[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return "", record.Payload{}, false
	}
	if claim != "" {
		stored.Claim = bytesOf(claim)
	}
	if settle != "" {
		stored.Settle = bytesOf(settle)
	}
	return state, stored, true
}

// bytesOf returns the bytes of s without copying them: a reply's strings are go-redis's own copy
// of what it read, which nothing changes, and a Payload is read-only (record.Payload), so the
// record is copied once from the connection's buffer, not twice.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Reclaim implements record.Store.Reclaim with one script. lease and ttl are rounded up to whole
// milliseconds and must be positive; key and owner must not be empty.
func (s *Store) Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease), record.Positive("ttl", ttl)); err != nil {
		return false, fmt.Errorf("redisstore: reclaim: %w", err)
	}
	return s.run(ctx, false, "reclaim", reclaimScript, key, from, owner, payload, record.Millis(lease), record.Millis(ttl))
}

// Renew implements record.Store.Renew with one script. The owner of a record that is still
// in_progress may renew it even after its lease lapsed, as long as no Claim has turned it into
// outcome_unknown and no Reclaim has taken it over. lease is rounded up to whole milliseconds and
// must be positive. The record's TTL is unchanged.
func (s *Store) Renew(ctx context.Context, key, owner string, lease time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("lease", lease)); err != nil {
		return false, fmt.Errorf("redisstore: renew: %w", err)
	}
	return s.run(ctx, false, "renew", renewScript, key, owner, record.Millis(lease))
}

// Commit implements record.Store.Commit with the settle script (one round trip). ttl is rounded up to
// whole milliseconds and must not be negative (0: no PEXPIRE). With Options.WaitReplicas, WAIT follows the script in
// the same round trip (see the package documentation).
func (s *Store) Commit(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.NotNegative("ttl", ttl)); err != nil {
		return false, fmt.Errorf("redisstore: commit: %w", err)
	}
	return s.runReplicated(ctx, true, OpCommit, settleScript, key, owner, settle, record.Millis(ttl), s.settledChannel(key), record.StateCommitted)
}

// MarkUnknown implements record.Store.MarkUnknown with the settle script. ttl is rounded up to whole
// milliseconds and must be positive. With Options.WaitReplicas, WAIT follows the script in the same
// round trip (see the package documentation).
func (s *Store) MarkUnknown(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner, record.Positive("ttl", ttl)); err != nil {
		return false, fmt.Errorf("redisstore: mark unknown: %w", err)
	}
	ok, err = s.runReplicated(ctx, false, OpMarkUnknown, settleScript, key, owner, settle, record.Millis(ttl), s.settledChannel(key), record.StateUnknown)
	if ok {
		s.index(ctx, key)
	}
	return ok, err
}

// Release implements record.Store.Release with one script.
func (s *Store) Release(ctx context.Context, key, owner string) (ok bool, err error) {
	if err := record.CheckArgs(ctx, key, owner); err != nil {
		return false, fmt.Errorf("redisstore: release: %w", err)
	}
	return s.run(ctx, false, "release", releaseScript, key, owner, s.settledChannel(key))
}

// Get implements record.Store.Get with one read-only script. It returns the stored state: an
// in_progress record whose lease has lapsed is reported in_progress until a Claim observes the lapse.
func (s *Store) Get(ctx context.Context, key string) (state string, stored record.Payload, err error) {
	if err := record.CheckKeyArg(ctx, key); err != nil {
		return "", record.Payload{}, fmt.Errorf("redisstore: get: %w", err)
	}
	res, err := s.eval(ctx, true, getScript, key).Slice()
	if err != nil {
		return "", record.Payload{}, wrap("get", key, err)
	}
	if len(res) == 0 {
		return "", record.Payload{}, nil
	}
	if len(res) == 3 {
		if state, stored, ok := storedRecord(res); ok {
			return state, stored, nil
		}
	}
	return "", record.Payload{}, fmt.Errorf("redisstore: get %q: unexpected script reply", key)
}

// Delete implements record.Store.Delete with one DEL. It also removes a corrupt record.
func (s *Store) Delete(ctx context.Context, key string) (existed bool, err error) {
	if err := record.CheckKeyArg(ctx, key); err != nil {
		return false, fmt.Errorf("redisstore: delete: %w", err)
	}
	n, err := s.client.Del(ctx, s.redisKey(key)).Result()
	if err != nil {
		return false, wrap("delete", key, err)
	}
	s.client.ZRem(ctx, s.indexKey(), key) // a stale entry is dropped by ListUnknown anyway
	return n > 0, nil
}

// run runs a fencing script on the record at key (eval; pipelined: one of a request's round trips)
// and reads its 0 or 1 reply.
func (s *Store) run(ctx context.Context, pipelined bool, op string, script *redis.Script, key string, args ...any) (bool, error) {
	n, err := s.eval(ctx, pipelined, script, key, args...).Int64()
	if err != nil {
		return false, wrap(op, key, err)
	}
	return n == 1, nil
}

// wrap adds the operation and key to err, and record.ErrCorrupt to a script's CORRUPT error reply.
func wrap(op, key string, err error) error {
	if redis.HasErrorPrefix(err, "CORRUPT") {
		return fmt.Errorf("redisstore: %s %q: %w: %s", op, key, record.ErrCorrupt, strings.TrimPrefix(err.Error(), "CORRUPT "))
	}
	return fmt.Errorf("redisstore: %s %q: %w", op, key, err)
}
