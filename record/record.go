// Package record is the vocabulary that the gateway and its stores share: the record states, the
// Store contract that every store implements (checked by the conformance suite in package
// recordtest) with the argument checks the stores share, ErrCorrupt for a record that cannot be
// read, the Receipt the admin API serves, the Record the gateway keeps under a key and its binary
// form (codec.go, docs/record-format.md), the ScopeKey a record is stored under, the rule of a
// valid idempotency key (CheckKey), and Encrypted, which keeps payloads encrypted at rest in any
// Store. It imports nothing else of idemgateway's, so a store or an admin client can use it
// without the gateway's HTTP, metrics and tracing dependencies.
package record

import "errors"

// Record states, as stored and as reported in receipts (docs/contract.md §5).
const (
	// StateInProgress: an executor holds the record's lease and the upstream call may be running.
	StateInProgress = "in_progress"
	// StateCommitted: the upstream acted; the record holds the receipt that retries replay.
	StateCommitted = "committed"
	// StateUnknown: the upstream may or may not have acted (a 5xx, a timeout, a broken connection,
	// or an executor whose lease lapsed). Retries are blocked until an operator resolves it or it expires.
	StateUnknown = "outcome_unknown"
)

// ErrCorrupt is wrapped by the errors about a record that exists but cannot be read, whichever
// layer found the damage: the store's own form of it (a Redis hash with a field missing or
// unknown, a bbolt value that does not decode) or the payload the gateway keeps in it (cut off,
// of a format this gateway does not know, or not decrypting). Retrying cannot repair it: a store
// refuses to read, overwrite or free such a record, and Delete removes it. The gateway answers
// 500 corrupt-record, not retryable.
var ErrCorrupt = errors.New("idempotency record unreadable")
