package gateway

import (
	"context"
	"time"
)

// Record states, as stored and as reported in receipts (contract §5).
const (
	// StateInProgress: an executor holds the record's lease and the upstream call may be running.
	StateInProgress = "in_progress"
	// StateCommitted: the upstream acted; the record holds the receipt that retries replay.
	StateCommitted = "committed"
	// StateUnknown: the upstream may or may not have acted (a 5xx, a timeout, a broken connection,
	// or an executor whose lease lapsed). Retries are blocked until an operator resolves it or it expires.
	StateUnknown = "outcome_unknown"
)

// Store is the durable state machine behind every idempotency key. The gateway declares it; the
// Redis store (package redisstore) and the embedded store (package boltstore) implement it, and both
// pass the conformance suite in package storetest.
//
// A record lives at an opaque key that the gateway builds from (tenant, tool, idempotency key). The
// store knows three things of a record: its state (one of the State constants), its owner token,
// and its lease deadline; everything else (fingerprint, receipt, response) is the payload, which the
// gateway encodes and the store keeps byte for byte.
//
// Every write after a claim names the owner token it was claimed with. The store refuses the write,
// returning ok == false and a nil error, when the record is gone or is owned by another token: the
// fencing check that keeps an executor whose lease was lost from overwriting its successor's record.
// A non-nil error means the store could not be asked (unreachable, timed out); the gateway answers
// 503 and calls no upstream.
//
// Durations are relative to the store's own clock (Redis's TIME for the Redis store), so gateway
// replicas with skewed clocks agree. All methods are safe for concurrent use.
type Store interface {
	// Claim reads the record at key or, when there is none, creates it in state in_progress, owned
	// by owner until lease has passed, holding payload, and expiring after ttl. It is atomic and
	// takes one round trip. It returns whether this call created the record, and the state and
	// payload now stored. An in_progress record whose lease has lapsed (its executor died or lost
	// contact) is changed to outcome_unknown by the same call and returned so: never freed.
	Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (claimed bool, state string, stored []byte, err error)

	// Reclaim takes over an outcome_unknown record (or an in_progress one whose lease has lapsed)
	// whose owner is from: the record becomes in_progress, owned by owner for lease, holding
	// payload, expiring after ttl. ok is false when the record is in any other state or owner.
	Reclaim(ctx context.Context, key, from, owner string, payload []byte, lease, ttl time.Duration) (ok bool, err error)

	// Renew extends the lease of the in_progress record owned by owner to lease from now.
	Renew(ctx context.Context, key, owner string, lease time.Duration) (ok bool, err error)

	// Commit stores payload as the committed receipt of the in_progress record owned by owner,
	// expiring after ttl from now.
	Commit(ctx context.Context, key, owner string, payload []byte, ttl time.Duration) (ok bool, err error)

	// MarkUnknown turns the in_progress record owned by owner into outcome_unknown with payload,
	// expiring after ttl from now.
	MarkUnknown(ctx context.Context, key, owner string, payload []byte, ttl time.Duration) (ok bool, err error)

	// Release deletes the in_progress record owned by owner, so that a retry executes again.
	Release(ctx context.Context, key, owner string) (ok bool, err error)

	// Get returns the state and payload of the record at key; state is "" when there is none. An
	// in_progress record whose lease has lapsed is reported outcome_unknown (and left as it is):
	// its executor is gone, and an operator must not mistake it for a live call.
	Get(ctx context.Context, key string) (state string, payload []byte, err error)

	// ListUnknown returns up to limit records in outcome_unknown whose keys start with prefix and
	// sort after cursor (bytewise; "" starts at the beginning), in key order, with next, the
	// cursor of the following page ("" after the last). The store keeps an index of these records,
	// so a page costs about the page, never a scan of the keyspace. An in_progress record whose
	// lease lapsed is listed once a Claim has observed the lapse.
	ListUnknown(ctx context.Context, prefix, cursor string, limit int) (keys []string, payloads [][]byte, next string, err error)

	// Delete removes the record at key whatever its state; existed reports whether there was one.
	Delete(ctx context.Context, key string) (existed bool, err error)

	// Ping reports whether the store can be reached and is fit to keep records.
	Ping(ctx context.Context) error
}
