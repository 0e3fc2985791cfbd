// Package record is the vocabulary that the gateway and its stores share: the record states, the
// Store contract that every store implements (and the conformance suite in package recordtest
// checks), the receipt the admin API serves, and the scope key a record is stored under. It
// imports nothing else of idemgateway's, so a store or an admin client can use it without the
// gateway's HTTP, metrics and tracing dependencies.
package record

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
