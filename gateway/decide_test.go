package gateway

import (
	"testing"

	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// TestDecide is the decision table of docs/contract.md §4 and README.md ("The decision table"),
// one row a line, for a request whose key was claimed or read; the rows before the claim (a key
// missing or invalid, a body too large or unparseable, the store down) are identify's and the
// claim's errors. policy is the route's: concurrency, reconcile, on_unknown_outcome.
func TestDecide(t *testing.T) {
	t.Parallel()
	type policy struct {
		wait, reconcile, release bool
	}
	var none policy
	tests := []struct {
		situation string
		found     found
		policy    policy
		waitLeft  bool
		want      action
	}{
		{"key new: this request claimed it", found{claimed: true}, none, false, actExecute},
		{"committed, same fingerprint", found{state: record.StateCommitted, sameEffect: true}, none, false, actReplay},
		{"committed, different fingerprint", found{state: record.StateCommitted}, none, false, actConflict},
		{"in flight, different fingerprint (C12)", found{state: record.StateInProgress}, policy{wait: true}, true, actConflict},
		{"outcome Unknown, different fingerprint", found{state: record.StateUnknown}, policy{reconcile: true, release: true}, false, actConflict},
		{"in flight, same fingerprint, concurrency: reject", found{state: record.StateInProgress, sameEffect: true}, none, true, actInProgress},
		{"in flight, same fingerprint, concurrency: wait, time left", found{state: record.StateInProgress, sameEffect: true}, policy{wait: true}, true, actWait},
		{"in flight, same fingerprint, concurrency: wait, wait_timeout passed", found{state: record.StateInProgress, sameEffect: true}, policy{wait: true}, false, actInProgress},
		{"outcome Unknown, same fingerprint, block", found{state: record.StateUnknown, sameEffect: true}, none, false, actOutcomeUnknown},
		{"outcome Unknown, same fingerprint, release", found{state: record.StateUnknown, sameEffect: true}, policy{release: true}, false, actReexecute},
		{"outcome Unknown, same fingerprint, reconcile", found{state: record.StateUnknown, sameEffect: true}, policy{reconcile: true}, false, actReconcile},
		{"outcome Unknown, same fingerprint, reconcile and release", found{state: record.StateUnknown, sameEffect: true}, policy{reconcile: true, release: true}, false, actReconcile},
		{"a state the gateway does not know", found{state: "pending", sameEffect: true}, none, false, actCorrupt},
		{"a state the gateway does not know, different fingerprint", found{state: "pending"}, none, false, actCorrupt},
	}
	for _, tt := range tests {
		rt := &routes.Route{Concurrency: routes.Reject, OnUnknownOutcome: routes.Block}
		if tt.policy.wait {
			rt.Concurrency = routes.Wait
		}
		if tt.policy.reconcile {
			rt.Reconcile = &routes.Reconcile{}
		}
		if tt.policy.release {
			rt.OnUnknownOutcome = routes.Release
		}
		if got := decide(tt.found, rt, tt.waitLeft); got != tt.want {
			t.Errorf("%s: decide = %v, want %v", tt.situation, got, tt.want)
		}
	}
}

// TestOutcomeOf is the outcome table of docs/contract.md §4 and README.md ("Outcome of an executed
// call"), one row a line: what the upstream answered, the route's outcome lists and
// on_unknown_outcome, and what the record becomes.
func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	lists := routes.Outcome{Committed: []int{402}, NotCommitted: []int{504}, Unknown: []int{409}}
	var none routes.Outcome
	tests := []struct {
		answered string
		result   upstreamResult
		outcome  routes.Outcome
		release  bool // on_unknown_outcome: release
		want     Outcome
	}{
		{"200", upstreamResult{status: 200}, none, false, Outcome{Committed, opCommit}},
		{"201", upstreamResult{status: 201}, none, false, Outcome{Committed, opCommit}},
		{"302", upstreamResult{status: 302}, none, false, Outcome{Committed, opCommit}},
		{"400", upstreamResult{status: 400}, none, false, Outcome{NotCommitted, opRelease}},
		{"409", upstreamResult{status: 409}, none, false, Outcome{NotCommitted, opRelease}},
		{"429", upstreamResult{status: 429}, none, false, Outcome{NotCommitted, opRelease}},
		{"503", upstreamResult{status: 503}, none, false, Outcome{NotCommitted, opRelease}},
		{"500, block", upstreamResult{status: 500}, none, false, Outcome{Unknown, opMarkUnknown}},
		{"500, release", upstreamResult{status: 500}, none, true, Outcome{Unknown, opRelease}},
		{"502", upstreamResult{status: 502}, none, false, Outcome{Unknown, opMarkUnknown}},
		{"504", upstreamResult{status: 504}, none, false, Outcome{Unknown, opMarkUnknown}},
		{"507", upstreamResult{status: 507}, none, false, Outcome{Unknown, opMarkUnknown}},
		{"nothing: no connection obtained", upstreamResult{}, none, false, Outcome{NotCommitted, opRelease}},
		{"nothing: failed after a connection (timeout, broken)", upstreamResult{sent: true}, none, false, Outcome{Unknown, opMarkUnknown}},
		{"nothing: failed after a connection, release", upstreamResult{sent: true}, none, true, Outcome{Unknown, opRelease}},
		{"101 that no upgrade asked for (a protocol error)", upstreamResult{status: 101}, none, false, Outcome{Unknown, opMarkUnknown}},
		{"101, listed Committed (lists cannot make a 1xx final)", upstreamResult{status: 101}, routes.Outcome{Committed: []int{101}}, false, Outcome{Unknown, opMarkUnknown}},
		{"101, release", upstreamResult{status: 101}, none, true, Outcome{Unknown, opRelease}},
		{"402, listed committed", upstreamResult{status: 402}, lists, false, Outcome{Committed, opCommit}},
		{"504, listed not_committed", upstreamResult{status: 504}, lists, false, Outcome{NotCommitted, opRelease}},
		{"409, listed unknown", upstreamResult{status: 409}, lists, false, Outcome{Unknown, opMarkUnknown}},
		{"500, not listed", upstreamResult{status: 500}, lists, false, Outcome{Unknown, opMarkUnknown}},
		{"201, not listed", upstreamResult{status: 201}, lists, true, Outcome{Committed, opCommit}},
	}
	for _, tt := range tests {
		rt := &routes.Route{Outcome: tt.outcome, OnUnknownOutcome: routes.Block}
		if tt.release {
			rt.OnUnknownOutcome = routes.Release
		}
		if got := outcomeOf(tt.result, rt); got != tt.want {
			t.Errorf("upstream answered %s: outcomeOf = {%v %v}, want {%v %v}", tt.answered, got.class, got.op, tt.want.class, tt.want.op)
		}
	}
}
