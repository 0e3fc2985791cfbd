package gateway

import (
	"net/http"
	"slices"

	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// Decisions, as sent in the Idempotency-Decision header and the agent.idempotency.decision span
// attribute (docs/contract.md §4, §6).
const (
	DecisionExecute        = "execute"
	DecisionReplay         = "replay"
	DecisionConflict       = "conflict"
	DecisionInProgress     = "in_progress"
	DecisionOutcomeUnknown = "outcome_unknown"
	DecisionRejected       = "rejected"
)

// The decision table (docs/contract.md §4) as two pure functions: decide, what a request gets once
// its key is claimed or read, and outcomeOf, what an executed call did upstream and what the record
// becomes. The request path calls them and does what they say (effect.go); waiting, leases, the
// proxy's callbacks and the rendering of answers (respond.go) sit around them, never inside a row.
// A front end of another protocol (Front) runs the same decide, and settles the outcome classes
// its protocol's answers give through settled.

// action is what decide says to do with a request whose key was claimed or read.
type action int

const (
	// actExecute: the key was new and this request claimed it: call the upstream once (execute).
	actExecute action = iota
	// actReplay: committed with the same effect: answer with the stored response (replay).
	actReplay
	// actConflict: known with another effect, whatever its state: 422 (conflict).
	actConflict
	// actWait: in flight, and the route waits for duplicates with time left: wait for the record
	// to settle, then claim again.
	actWait
	// actInProgress: in flight: 409 request-in-progress, retryable (in_progress).
	actInProgress
	// actReconcile: outcome unknown on a route with reconcile: ask the upstream whether the effect
	// exists (reconcile.go).
	actReconcile
	// actReexecute: outcome unknown on a route with on_unknown_outcome: release: take the record
	// over and execute again.
	actReexecute
	// actOutcomeUnknown: outcome unknown, on_unknown_outcome: block: 409 outcome-unknown (outcome_unknown).
	actOutcomeUnknown
	// actCorrupt: a state the gateway does not know: 500 corrupt-record (rejected).
	actCorrupt
)

var actionNames = [...]string{"execute", "replay", "conflict", "wait", "in_progress", "reconcile", "reexecute", "outcome_unknown", "corrupt"}

func (a action) String() string { return actionNames[a] }

// found is what a claim found at the key: whether the claim created the record, else the stored
// record's state and whether its effect fingerprint is the request's.
type found struct {
	claimed    bool
	state      string // a State constant; "" when claimed
	sameEffect bool
}

// decide is the decision table of docs/contract.md §4 for a request whose key was claimed or read.
// waitLeft is true while a duplicate may still wait (concurrency: wait, wait_timeout not passed, the
// client still there); rt gives the route's policies.
func decide(f found, rt *routes.Route, waitLeft bool) action {
	switch {
	case f.claimed:
		return actExecute
	case !isState(f.state):
		return actCorrupt
	case !f.sameEffect:
		return actConflict // docs/cases.md C05, C12: a client error, whatever the state
	case f.state == record.StateCommitted:
		return actReplay
	case f.state == record.StateInProgress && rt.Concurrency == routes.Wait && waitLeft:
		return actWait
	case f.state == record.StateInProgress:
		return actInProgress
	case f.state == record.StateUnknown && rt.Reconcile != nil:
		return actReconcile
	case f.state == record.StateUnknown && rt.OnUnknownOutcome == routes.Release:
		return actReexecute
	default:
		return actOutcomeUnknown
	}
}

func isState(s string) bool {
	return s == record.StateInProgress || s == record.StateCommitted || s == record.StateUnknown
}

// outcomeClass is what an executed call did upstream (docs/contract.md §4).
type OutcomeClass int

const (
	Committed    OutcomeClass = iota // the upstream acted: store the receipt
	NotCommitted                     // the upstream did not act: free the key
	Unknown                          // it may have: block the key or free it, by route policy
)

// Labels of idemgateway_upstream_duration_seconds{outcome}.
var outcomeClassNames = [...]string{outcomeCommitted, outcomeNotCommitted, outcomeUnknown}

func (c OutcomeClass) String() string { return outcomeClassNames[c] }

// settleOp is the store write that settles an executed call's record.
type settleOp int

const (
	opCommit      settleOp = iota // store the receipt: retries replay it
	opRelease                     // delete the record: a retry executes again
	opMarkUnknown                 // keep the record outcome_unknown: retries are refused until it is resolved
)

var settleOpNames = [...]string{"commit", "release", "mark_unknown"}

func (o settleOp) String() string { return settleOpNames[o] }

// outcome is an executed call's class and the write that settles its record.
type Outcome struct {
	class OutcomeClass
	op    settleOp
}

// upstreamResult is what a front end saw of its upstream call: the response status, or, when no
// response arrived (status 0), whether a connection was obtained, so that bytes of the request may
// have reached the upstream.
type upstreamResult struct {
	status int
	sent   bool
}

// outcomeOf is the outcome table of docs/contract.md §4: a 1xx as the final answer (a 101 that no
// upgrade asked for) is a protocol error, unknown whatever the route says; then the route's
// outcome lists, then 2xx and 3xx committed, 4xx and 503 not committed, any other 5xx unknown;
// with no response, a call that never reached the upstream is not committed and one that may have
// is unknown.
func outcomeOf(res upstreamResult, rt *routes.Route) Outcome {
	return settled(classOf(res, rt.Outcome), rt)
}

// listed returns the class of the list of o (committed, not_committed, unknown) that holds code,
// a status or a JSON-RPC error code; ok is false when none does.
func listed(code int, o routes.Outcome) (c OutcomeClass, ok bool) {
	switch {
	case slices.Contains(o.Committed, code):
		return Committed, true
	case slices.Contains(o.NotCommitted, code):
		return NotCommitted, true
	case slices.Contains(o.Unknown, code):
		return Unknown, true
	}
	return 0, false
}

func classOf(res upstreamResult, o routes.Outcome) OutcomeClass {
	status := res.status
	switch {
	case status == 0 && res.sent:
		return Unknown
	case status == 0:
		return NotCommitted
	case status < 200: // RFC 9110 §15.2: never final; the upstream may have acted and switched
		return Unknown
	}
	if c, ok := listed(status, o); ok {
		return c
	}
	switch {
	case status < 400:
		return Committed
	case status < 500, status == http.StatusServiceUnavailable:
		return NotCommitted
	default:
		return Unknown
	}
}

// settled is the write that settles a call of class c on rt: commit, release, or, for an unknown
// outcome, mark unknown (on_unknown_outcome: block) or release (release). Every front end
// settles through it, whatever its own classes come from.
func settled(c OutcomeClass, rt *routes.Route) Outcome {
	switch {
	case c == Committed:
		return Outcome{c, opCommit}
	case c == Unknown && rt.OnUnknownOutcome != routes.Release:
		return Outcome{c, opMarkUnknown}
	default:
		return Outcome{c, opRelease}
	}
}
