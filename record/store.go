package record

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// Store is the durable state machine behind every idempotency key. The gateway uses it; the Redis
// store (package redisstore) and the embedded store (package boltstore) implement it, and both pass
// the conformance suite in package recordtest.
//
// A record lives at an opaque key that the gateway builds from (tenant, tool, idempotency key). The
// store knows three things of a record: its state (one of the State constants), its owner token,
// and its lease deadline; everything else (fingerprint, receipt, response) is the Payload, which
// the gateway encodes and the store keeps byte for byte, in two parts: the claim's, and the settle's
// (docs/stores.md).
//
// Every write after a claim names the owner token it was claimed with. The store refuses the write,
// returning ok == false and a nil error, when the record is gone (but for Release: see there) or
// is owned by another token: the fencing check that keeps an executor whose lease was lost from
// overwriting its successor's record.
// A non-nil error means the store could not be asked (unreachable, timed out); the gateway answers
// 503 and calls no upstream. An error wrapping ErrCorrupt means instead that the record at key is
// there but cannot be read; the gateway answers 500, and calls no upstream either.
//
// Every transition is safe to send twice (docs/guarantees.md#lost-replies): a Claim, Reclaim,
// Renew, Commit, MarkUnknown or Release that the store carried out, but whose answer was lost on
// the way back, answers as it did the first time when the same call (the same owner, the same
// payload) is made again, by the store's client or by the gateway, so that no executor takes its
// own record for another's. What each recognizes as its own first execution is said at each
// method; whatever else it meets is refused or read as before.
//
// Durations are relative to the store's own clock (Redis's TIME for the Redis store), so gateway
// replicas with skewed clocks agree. All methods are safe for concurrent use.
type Store interface {
	// Claim reads the record at key or, when there is none, creates it in state in_progress, owned
	// by owner until lease has passed, holding payload as its Payload.Claim, and expiring after
	// ttl. It is atomic and takes one round trip. It returns whether this call created the record,
	// and the state and payload now stored: of a record with a Payload.Settle, that part alone
	// (Payload.Claim empty), which holds all a replay serves and the fingerprint it is checked by;
	// Get reads both parts, for a request of another effect (docs/stores.md#the-claims-answer).
	// An in_progress record whose lease has lapsed (its executor died or lost contact) is changed
	// to outcome_unknown by the same call and returned so: never freed.
	//
	// Sent twice: a Claim that finds the record in_progress, owned by owner and holding this very
	// payload, is the same call made again after its answer was lost; it answers claimed, and
	// sets the lease to lease from now, as the first did (a lapse that no other Claim observed
	// yet is forgiven: the owner has not started). The same owner with another payload is not
	// the same call: it reads the record, as any other Claim does.
	Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (claimed bool, state string, stored Payload, err error)

	// Reclaim takes over an outcome_unknown record (or an in_progress one whose lease has lapsed)
	// whose owner is from: the record becomes in_progress, owned by owner for lease, holding
	// payload as its Payload.Claim and no Payload.Settle, expiring after ttl. ok is false when the
	// record is in any other state or owner.
	//
	// Sent twice: a record in_progress, owned by owner and holding this very payload, was taken
	// over by the same call already: ok, and the lease is set to lease from now.
	Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (ok bool, err error)

	// Renew extends the lease of the in_progress record owned by owner to lease from now. Sent
	// twice, it extends it twice: both answer ok.
	Renew(ctx context.Context, key, owner string, lease time.Duration) (ok bool, err error)

	// Commit stores settle as the Payload.Settle of the in_progress record owned by owner, which
	// becomes committed, expiring after ttl from now; ttl 0 keeps the expiry its Claim (or
	// Reclaim) set, which costs Redis a command less. The record's Payload.Claim is kept: settle
	// need not repeat what the claim stored.
	//
	// Sent twice: a record committed by owner with this very settle (not empty) was committed by
	// the same call: ok, and nothing changes (its TTL still runs from the first).
	//
	// After a lapse: an outcome_unknown record that a Claim turned so when owner's lease lapsed
	// (it has no Payload.Settle, and owner still holds it: nobody took it over) is committed too,
	// so that a receipt the owner stores late is not lost (docs/guarantees.md). A record owner
	// marked outcome_unknown itself is not. MarkUnknown and Release take such a record likewise:
	// the owner alone knows how its call ended.
	Commit(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (ok bool, err error)

	// MarkUnknown turns the in_progress record owned by owner into outcome_unknown with settle as
	// its Payload.Settle, expiring after ttl from now.
	//
	// Sent twice: a record outcome_unknown, owned by owner and holding this very settle (not
	// empty: a record whose lease lapsed holds none), was marked by the same call: ok, and
	// nothing changes.
	//
	// After a lapse: as Commit, a record a Claim turned outcome_unknown under owner is marked too
	// (it gains settle, which says why).
	MarkUnknown(ctx context.Context, key, owner string, settle []byte, ttl time.Duration) (ok bool, err error)

	// Release deletes the in_progress record owned by owner, so that a retry executes again.
	//
	// Sent twice: when there is no record at key, ok. The record is gone, whoever removed it (this
	// call before its answer was lost, its TTL, an operator's Delete): a retry executes again,
	// which is all a Release asks. A record in another state or of another owner is refused.
	//
	// After a lapse: as Commit, a record a Claim turned outcome_unknown under owner is deleted too:
	// its call did not commit (the owner says so), so a duplicate that saw it outcome_unknown
	// meanwhile is told, once the record is gone, to execute (docs/guarantees.md#orphaned-claims).
	Release(ctx context.Context, key, owner string) (ok bool, err error)

	// Get returns the state and payload of the record at key; state is "" when there is none. An
	// in_progress record whose lease has lapsed is reported outcome_unknown (and left as it is):
	// its executor is gone, and an operator must not mistake it for a live call.
	Get(ctx context.Context, key string) (state string, stored Payload, err error)

	// ListUnknown returns up to limit records in outcome_unknown whose keys start with prefix and
	// sort after cursor (bytewise; "" starts at the beginning), in key order, with next, the
	// cursor of the following page ("" after the last). The store keeps an index of these records,
	// so a page costs about the page, never a scan of the keyspace. An in_progress record whose
	// lease lapsed is listed once a Claim has observed the lapse.
	ListUnknown(ctx context.Context, prefix, cursor string, limit int) (keys []string, stored []Payload, next string, err error)

	// Delete removes the record at key whatever its state; existed reports whether there was one.
	Delete(ctx context.Context, key string) (existed bool, err error)

	// Ping reports whether the store can be reached and is fit to keep records.
	Ping(ctx context.Context) error
}

// Payload is what a store keeps of a record for the gateway, in the two parts that the record's
// transitions write, each byte for byte. Splitting it spares a Commit sending again what the Claim
// stored (docs/stores.md). A store may hand out parts that share memory with its client's replies
// (the Redis store does, to copy them once): they are read-only, never written to.
type Payload struct {
	// Claim is the payload of the Claim or Reclaim that began the record's current execution;
	// empty in what Claim answers of a record that has a Settle.
	Claim []byte
	// Settle is the payload of the Commit or MarkUnknown that settled it: empty while the record
	// is in_progress, and when it is outcome_unknown because its lease lapsed. Records written by
	// stores before the split have none: their Claim holds the whole record.
	Settle []byte
}

// SettleNotifier is implemented by stores that several gateway processes share (the Redis store).
// It tells a process when any process settles (commits, releases or marks unknown) a record that
// duplicates of this process wait for (concurrency: wait), so that they need not poll the store.
// The gateway watches a key only while duplicates wait for it, so a store can limit its notices
// to those keys. A store without it still works: its waiters are woken by the settles of this
// process and, for those of other processes, by a poll every 500 ms.
type SettleNotifier interface {
	// WatchSettled calls settled, from a goroutine of the store, each time the record at key (the
	// key given to Store.Claim) settles, from the time WatchSettled returns with a nil error until
	// stop is called; settled may still be called once after stop returns, when a notice was
	// being delivered. settled must not block.
	//
	// WatchSettled blocks until the store listens, so that a caller which claims the key after it
	// returns cannot miss a settle that follows that claim. A store may announce only the settles
	// of records that a Claim of another owner found in progress (the Redis store does: a settle
	// that no duplicate can be waiting for sends nothing). It returns an error when ctx is done
	// first, or the store cannot listen (it is closed, or has no notices); the watch may then
	// still start later, or never: the caller must poll. stop is never nil, must be called once
	// the caller stops waiting, whatever the error, does not block, and does nothing when called
	// again.
	//
	// Notices are hints: a store may lose one (a dropped connection). That costs a waiter one poll
	// interval, never a wrong answer: it reads the record again before it acts.
	WatchSettled(ctx context.Context, key string, settled func()) (stop func(), err error)
}

// SafetyReporter is implemented by stores that can answer and still be unfit to keep records: a
// Redis whose eviction policy could drop them, that is out of memory, or that refuses the store's
// scripts (docs/stores.md, "Fail closed"). A store without it is taken to be fit whenever it
// answers.
//
// The gateway calls Safe before every claim. While Safe returns an error that does not wrap
// ErrWritesRefused, a keyed request gets 503 store-unavailable without a claim and without an
// upstream call: a claim in a store that may lose it could let a retry execute again. Under
// ErrWritesRefused the gateway still claims, since a claim that finds a committed record writes
// nothing and replays it, and one that must write fails (503 too). /readyz reports either error.
type SafetyReporter interface {
	// Safe returns nil while the store is fit to keep records, else why it is not. It reports
	// what the store's own check last found and does not ask the store, except that the first
	// call may wait for the first check. It is safe for concurrent use.
	Safe() error
}

// Safety returns s's verdict on its own fitness to keep records (SafetyReporter.Safe) without a
// round trip: nil for a store that gives none.
func Safety(s Store) error {
	if r, ok := s.(SafetyReporter); ok {
		return r.Safe()
	}
	return nil
}

// NewOwner returns a new owner token: 128 random bits, hex encoded, for a Claim or a Reclaim.
func NewOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// ErrWritesRefused is wrapped by the error of SafetyReporter.Safe when the store keeps its records
// but refuses writes (Redis out of memory under noeviction): reads, and so replays, still work.
var ErrWritesRefused = errors.New("the store refuses writes")
