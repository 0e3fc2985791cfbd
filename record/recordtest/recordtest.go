// Package recordtest is the conformance suite of record.Store: every store (the Redis store, the
// embedded store, and any later one) runs Run against a real instance and must pass all of it.
//
// Time is given to the suite, not raced: a lease or TTL that must still be alive when a test acts
// on it is a minute or more, so that no stall of a loaded machine can lapse it; one that must lapse
// is short, and the suite lets it pass on the store's clock: Subject.Advance where the test can
// move that clock (the lapse must then show at once), else wall time, and then it polls for the
// lapse with a generous ceiling. What a
// store asked for (the TTL a transition set) is read back through Subject.TTL rather than waited
// out; TTLExpiryRemovesRecords is the one test that sees records really expire. Subtests run in
// parallel; each asks newSubject for its own store, so a store may share a server between subtests
// only if the stores keep their records apart (for instance with a key prefix per subtest).
package recordtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/record"
)

// Durations used by the suite.
const (
	// long is a lease or TTL that does not lapse during a test, however loaded the machine.
	long = time.Minute
	// longer is a TTL told apart from long when read back (CommitResetsTTL).
	longer = time.Hour
	// short is a lease or TTL that a test waits out.
	short = 100 * time.Millisecond
)

// Subject is one store under test, with what the suite needs of its clock.
type Subject struct {
	record.Store
	// TTL returns how long the record at key has left before it expires, as the store keeps it
	// (Redis: the PTTL of the record's key; the embedded store: its expiry against its clock). It
	// returns -1 when the record at key never expires and an error when there is none. Required.
	TTL func(key string) (time.Duration, error)
	// Advance moves the store's clock d forward: leases and TTLs lapse as if d had passed. Nil for
	// a store whose clock a test cannot move (Redis keeps time by its server's TIME): the suite
	// then lets d pass in wall time.
	Advance func(d time.Duration)
}

// elapse lets d pass on the store's clock, for a lease or TTL that the test waits out: a step of
// the clock where the subject can move it, else d of wall time. A stall of the machine only makes
// the wait longer, which lapses the lease or TTL all the more.
func (s Subject) elapse(d time.Duration) {
	if s.Advance != nil {
		s.Advance(d)
		return
	}
	time.Sleep(d) // only wall time moves the clock of this store (Redis's TIME)
}

// after waits for cond, which the time elapse let pass makes true: on a store whose clock the test
// moves it holds at once (and fails at once when it does not); on real time, it is polled with
// eventually.True's ceiling, since a store's own clock may be a little behind the test's.
func (s Subject) after(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if s.Advance != nil {
		if !cond() {
			t.Fatalf("%s: not so once the store's clock has passed it", what)
		}
		return
	}
	eventually.True(t, what, cond)
}

// Run runs the conformance suite against the stores made by newSubject, as parallel named
// subtests. newSubject is called once per subtest with that subtest's t; it must return an empty
// store (or one whose records no other subtest sees) and arrange its own cleanup with t.Cleanup.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s Subject)
	}{
		{"ClaimEmptyKeyCreatesInProgress", testClaimEmpty},
		{"SecondClaimReturnsStoredRecord", testSecondClaim},
		{"CommitByOwner", testCommit},
		{"FencingRefusesOtherOwnersAndStates", testFencing},
		{"ReleaseFreesKey", testRelease},
		{"MarkUnknown", testMarkUnknown},
		{"LapsedLeaseBecomesUnknownNeverFreed", testLapsedLease},
		{"GetReportsLapsedLeaseAsUnknown", testGetLapsed},
		{"ListUnknownPagesTheIndex", testListUnknown},
		{"OwnerMayFinishAfterLapseNobodyObserved", testFinishAfterLapse},
		{"OwnerMayCommitAfterObservedLapse", testCommitAfterObservedLapse},
		{"OwnerMaySettleAfterObservedLapse", testSettleAfterObservedLapse},
		{"Reclaim", testReclaim},
		{"ConcurrentReclaimOneWins", testConcurrentReclaim},
		{"RenewExtendsLease", testRenew},
		{"RenewSetsLeaseFromNow", testRenewShortens},
		{"TransitionsSetTheirTTL", testTransitionTTLs},
		{"TTLExpiryRemovesRecords", testTTLExpiry},
		{"CommitResetsTTL", testCommitResetsTTL},
		{"CommitWithoutTTLKeepsTheClaims", testCommitKeepsTTL},
		{"Delete", testDelete},
		{"GetMissingKey", testGetMissing},
		{"OddKeysDoNotCollide", testOddKeys},
		{"PayloadsRoundTripByteForByte", testPayloads},
		{"ConcurrentClaimsOneWins", testConcurrentClaims},
		{"InvalidArgumentsRefused", testInvalidArguments},
		{"CancelledContextFails", testCancelledContext},
		{"Ping", testPing},
		{"TransitionSentTwice", testSentTwice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newSubject(t))
		})
	}
}

// The helpers below fail the test on a store error: the suite runs against healthy stores.

func claim(t *testing.T, s record.Store, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload) {
	t.Helper()
	claimed, state, stored, err := s.Claim(context.Background(), key, owner, payload, lease, ttl)
	if err != nil {
		t.Fatalf("Claim(%q, %q): %v", key, owner, err)
	}
	return claimed, state, stored
}

// mustClaim claims a new key and fails unless this call created the record.
func mustClaim(t *testing.T, s record.Store, key, owner string, payload []byte, lease, ttl time.Duration) {
	t.Helper()
	claimed, state, stored := claim(t, s, key, owner, payload, lease, ttl)
	if !claimed || state != record.StateInProgress || !samePayload(stored, claimed1(payload)) {
		t.Fatalf("Claim(%q, %q) = %v, %q, %s; want true, %q, %s", key, owner, claimed, state, abbrevPayload(stored), record.StateInProgress, abbrev(payload))
	}
}

func get(t *testing.T, s record.Store, key string) (string, record.Payload) {
	t.Helper()
	state, stored, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return state, stored
}

// wantRecord fails unless the record at key has state and payload.
func wantRecord(t *testing.T, s record.Store, key, state string, payload record.Payload) {
	t.Helper()
	gotState, gotPayload := get(t, s, key)
	if gotState != state || !samePayload(gotPayload, payload) {
		t.Fatalf("Get(%q) = %q, %s; want %q, %s", key, gotState, abbrevPayload(gotPayload), state, abbrevPayload(payload))
	}
}

// claimed1 is the payload of a record that a Claim (or Reclaim) of payload began and nothing
// settled.
func claimed1(payload []byte) record.Payload { return record.Payload{Claim: payload} }

// settled is the payload of a record that a Claim of claim began and a Commit or MarkUnknown of
// settle settled.
func settled(claim, settle string) record.Payload {
	return record.Payload{Claim: []byte(claim), Settle: []byte(settle)}
}

// answered is what a Claim answers of a record that a Commit or MarkUnknown of settle settled: the
// settle part alone (record.Store.Claim).
func answered(settle string) record.Payload { return record.Payload{Settle: []byte(settle)} }

// samePayload reports whether a and b hold the same bytes; nil and empty are the same.
func samePayload(a, b record.Payload) bool {
	return bytes.Equal(a.Claim, b.Claim) && bytes.Equal(a.Settle, b.Settle)
}

// wantOK fails unless a fencing write returned want and no error.
func wantOK(t *testing.T, what string, ok bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if ok != want {
		t.Fatalf("%s = %v, want %v", what, ok, want)
	}
}

// wantTTL fails unless the record at key expires after more than min and at most max from now,
// as the store keeps it (Subject.TTL).
func wantTTL(t *testing.T, s Subject, key string, min, max time.Duration) {
	t.Helper()
	left, err := s.TTL(key)
	if err != nil {
		t.Fatalf("TTL(%q): %v", key, err)
	}
	if left <= min || left > max {
		t.Fatalf("TTL(%q) = %s, want more than %s and at most %s", key, left, min, max)
	}
}

// abbrev shortens payloads in failure messages.
func abbrev(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%q... (%d bytes)", b[:64], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// abbrevPayload shows both parts of p, shortened.
func abbrevPayload(p record.Payload) string {
	return "{claim " + abbrev(p.Claim) + ", settle " + abbrev(p.Settle) + "}"
}

var ctx = context.Background()

func testClaimEmpty(t *testing.T, s Subject) {
	p := []byte(`{"fingerprint":"sha256:1"}`)
	mustClaim(t, s, "k", "owner-a", p, long, long)
	wantRecord(t, s, "k", record.StateInProgress, claimed1(p))
}

func testSecondClaim(t *testing.T, s Subject) {
	p1, p2 := []byte("first"), []byte("second")
	mustClaim(t, s, "k", "owner-a", p1, long, long)
	for _, owner := range []string{"owner-b", "owner-a"} { // even the owner does not claim twice
		claimed, state, stored := claim(t, s, "k", owner, p2, long, long)
		if claimed || state != record.StateInProgress || !samePayload(stored, claimed1(p1)) {
			t.Errorf("second Claim by %s = %v, %q, %s; want false, %q, %q", owner, claimed, state, abbrevPayload(stored), record.StateInProgress, p1)
		}
	}
	wantRecord(t, s, "k", record.StateInProgress, claimed1(p1))
}

func testCommit(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), long, long)
	ok, err := s.Commit(ctx, "k", "owner-a", []byte("receipt"), long)
	wantOK(t, "Commit by owner", ok, err, true)
	wantRecord(t, s, "k", record.StateCommitted, settled("claim", "receipt"))
	claimed, state, stored := claim(t, s, "k", "owner-b", []byte("retry"), long, long)
	if claimed || state != record.StateCommitted || !samePayload(stored, answered("receipt")) {
		t.Errorf("Claim after commit = %v, %q, %s; want false, %q, its settle part alone (Get reads both)", claimed, state, abbrevPayload(stored), record.StateCommitted)
	}
}

// writes are the fencing writes, each applied to key by owner. Each is refused on a record that is
// not the owner's in_progress one; on a missing record, all but Release, which answers
// missingOK: a record that is gone is released already.
var writes = []struct {
	name      string
	do        func(s record.Store, key, owner string) (bool, error)
	missingOK bool
}{
	{"Commit", func(s record.Store, key, owner string) (bool, error) {
		return s.Commit(ctx, key, owner, []byte("intruder"), long)
	}, false},
	{"Renew", func(s record.Store, key, owner string) (bool, error) {
		return s.Renew(ctx, key, owner, long)
	}, false},
	{"Release", func(s record.Store, key, owner string) (bool, error) {
		return s.Release(ctx, key, owner)
	}, true},
	{"MarkUnknown", func(s record.Store, key, owner string) (bool, error) {
		return s.MarkUnknown(ctx, key, owner, []byte("intruder"), long)
	}, false},
}

func testFencing(t *testing.T, s Subject) {
	p := []byte("original")
	setups := []struct {
		name  string
		owner string // who attempts the writes
		setup func(t *testing.T, key string)
		state string         // "" when there is no record
		want  record.Payload // the record's payload, unchanged by the writes
	}{
		{"wrong owner on in_progress", "owner-b", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", p, long, long)
		}, record.StateInProgress, claimed1(p)},
		{"empty owner on in_progress", "", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", p, long, long)
		}, record.StateInProgress, claimed1(p)},
		{"owner on committed", "owner-a", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), long, long)
			ok, err := s.Commit(ctx, key, "owner-a", p, long)
			wantOK(t, "Commit", ok, err, true)
		}, record.StateCommitted, settled("claim", string(p))},
		{"owner on outcome_unknown", "owner-a", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), long, long)
			ok, err := s.MarkUnknown(ctx, key, "owner-a", p, long)
			wantOK(t, "MarkUnknown", ok, err, true)
		}, record.StateUnknown, settled("claim", string(p))},
		{"missing key", "owner-a", func(t *testing.T, key string) {}, "", record.Payload{}},
	}
	for _, su := range setups {
		for _, w := range writes {
			t.Run(su.name+"/"+w.name, func(t *testing.T) {
				key := su.name + "/" + w.name
				su.setup(t, key)
				ok, err := w.do(s, key, su.owner)
				if su.owner == "" && err != nil {
					// Refusing an empty owner with an error is as good as ok == false.
				} else {
					wantOK(t, w.name, ok, err, su.state == "" && w.missingOK)
				}
				wantRecord(t, s, key, su.state, su.want)
			})
		}
	}
}

func testRelease(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("a"), long, long)
	ok, err := s.Release(ctx, "k", "owner-a")
	wantOK(t, "Release by owner", ok, err, true)
	wantRecord(t, s, "k", "", record.Payload{})
	ok, err = s.Release(ctx, "k", "owner-a")
	wantOK(t, "second Release (the record is gone: released already)", ok, err, true)
	mustClaim(t, s, "k", "owner-b", []byte("b"), long, long)
	ok, err = s.Release(ctx, "k", "owner-a")
	wantOK(t, "Release of another owner's record", ok, err, false)
	wantRecord(t, s, "k", record.StateInProgress, claimed1([]byte("b")))
}

func testMarkUnknown(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), long, long)
	ok, err := s.MarkUnknown(ctx, "k", "owner-a", []byte("unknown"), long)
	wantOK(t, "MarkUnknown by owner", ok, err, true)
	wantRecord(t, s, "k", record.StateUnknown, settled("claim", "unknown"))
	claimed, state, stored := claim(t, s, "k", "owner-b", []byte("retry"), long, long)
	if claimed || state != record.StateUnknown || !samePayload(stored, answered("unknown")) {
		t.Errorf("Claim after MarkUnknown = %v, %q, %s; want false, %q, its settle part alone", claimed, state, abbrevPayload(stored), record.StateUnknown)
	}
}

func testLapsedLease(t *testing.T, s Subject) {
	p := []byte("claim")
	mustClaim(t, s, "k", "owner-a", p, short, long)
	s.elapse(2 * short)
	var claimed bool
	var state string
	var stored record.Payload
	s.after(t, "lease lapses", func() bool {
		claimed, state, stored = claim(t, s, "k", "owner-b", []byte("retry"), long, long)
		return state != record.StateInProgress
	})
	if claimed || state != record.StateUnknown || !samePayload(stored, claimed1(p)) {
		t.Fatalf("Claim after lapse = %v, %q, %s; want false, %q, %q", claimed, state, abbrevPayload(stored), record.StateUnknown, p)
	}
	// It stays outcome_unknown: for Get, for later claims, and for the old owner's writes.
	wantRecord(t, s, "k", record.StateUnknown, claimed1(p))
	claimed, state, _ = claim(t, s, "k", "owner-c", []byte("retry"), long, long)
	if claimed || state != record.StateUnknown {
		t.Errorf("third Claim = %v, %q; want false, %q", claimed, state, record.StateUnknown)
	}
	// The owner may still settle it (OwnerMay{Commit,Settle}AfterObservedLapse), never renew it.
	ok, err := s.Renew(ctx, "k", "owner-a", long)
	wantOK(t, "Renew by the owner whose lease lapsed and was observed", ok, err, false)
	wantRecord(t, s, "k", record.StateUnknown, claimed1(p))
}

// testFinishAfterLapse pins down that the lease matters to others only: until a Claim has observed
// the lapse (turning the record outcome_unknown) or a Reclaim has taken it over, the owner of a
// still in_progress record may renew or finish it, which loses nothing and fences nobody.
func testFinishAfterLapse(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), short, long)
	s.elapse(2 * short) // the lease lapses; no Claim observes it
	ok, err := s.Renew(ctx, "k", "owner-a", long)
	wantOK(t, "Renew after an unobserved lapse", ok, err, true)
	ok, err = s.Commit(ctx, "k", "owner-a", []byte("receipt"), long)
	wantOK(t, "Commit after an unobserved lapse", ok, err, true)
	wantRecord(t, s, "k", record.StateCommitted, settled("claim", "receipt"))
}

// testCommitAfterObservedLapse pins down docs/contract.md §8: the owner whose lease lapsed while
// the store was away, and whose record a Claim has since turned outcome_unknown, may still commit
// it as long as nobody took it over (the owner is unchanged): its receipt is what the upstream did,
// and no other owner can have acted on the key. A receipt the gateway kept writing in the
// background (Idempotency-Receipt: pending) lands this way when the store came back after the
// lease. The commit takes the record out of the outcome_unknown index, and a later Claim replays
// it. Its renewals stay refused (OwnerMaySettleAfterObservedLapse has the release and the mark),
// and so does its commit once another owner has reclaimed the record.
//
// This supersedes the Commit case of LapsedLeaseBecomesUnknownNeverFreed, which expects that commit
// refused; that case is the stores' owners' to change with this one.
func testCommitAfterObservedLapse(t *testing.T, s Subject) {

	observeLapse(t, s, "k")
	ok, err := s.Commit(ctx, "k", "owner-a", []byte("receipt"), long)
	wantOK(t, "Commit by the owner after a lapse a Claim observed", ok, err, true)
	wantRecord(t, s, "k", record.StateCommitted, settled("claim", "receipt"))
	claimed, state, stored := claim(t, s, "k", "owner-c", []byte("retry"), long, long)
	if claimed || state != record.StateCommitted || !samePayload(stored, answered("receipt")) {
		t.Errorf("Claim after that commit = %v, %q, %s; want false, %q, its settle part alone", claimed, state, abbrevPayload(stored), record.StateCommitted)
	}
	keys, _, _, err := s.ListUnknown(ctx, "k", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if key == "k" {
			t.Errorf("ListUnknown still lists the committed record")
		}
	}

	observeLapse(t, s, "taken")
	ok, err = s.Reclaim(ctx, "taken", "owner-a", "owner-b", []byte("successor"), long, long)
	wantOK(t, "Reclaim by another owner", ok, err, true)
	ok, err = s.Commit(ctx, "taken", "owner-a", []byte("stale receipt"), long)
	wantOK(t, "Commit by the owner after a takeover", ok, err, false)
	wantRecord(t, s, "taken", record.StateInProgress, claimed1([]byte("successor")))
}

// testSettleAfterObservedLapse: like its commit, the release and the mark of the owner whose lapse
// a Claim observed are taken while nobody took the record over. The owner alone knows how its call
// ended: a release frees a key whose call never reached the upstream or was refused there (an
// orphaned claim whose reply came after its lease; a 503 after a stalled renewal), a mark adds why
// the outcome is unknown. Once another owner has reclaimed the record, both are refused.
func testSettleAfterObservedLapse(t *testing.T, s Subject) {

	observeLapse(t, s, "released")
	ok, err := s.Release(ctx, "released", "owner-a")
	wantOK(t, "Release by the owner after a lapse a Claim observed", ok, err, true)
	if claimed, state, _ := claim(t, s, "released", "owner-c", []byte("retry"), long, long); !claimed {
		t.Errorf("Claim after that release = %v, %q; want claimed", claimed, state)
	}

	observeLapse(t, s, "marked")
	ok, err = s.MarkUnknown(ctx, "marked", "owner-a", []byte("why"), long)
	wantOK(t, "MarkUnknown by the owner after a lapse a Claim observed", ok, err, true)
	wantRecord(t, s, "marked", record.StateUnknown, settled("claim", "why"))
	ok, err = s.Release(ctx, "marked", "owner-a")
	wantOK(t, "Release of a record its owner marked unknown itself", ok, err, false)

	observeLapse(t, s, "taken")
	ok, err = s.Reclaim(ctx, "taken", "owner-a", "owner-b", []byte("successor"), long, long)
	wantOK(t, "Reclaim by another owner", ok, err, true)
	for _, w := range writes {
		ok, err := w.do(s, "taken", "owner-a")
		wantOK(t, w.name+" by the owner after a takeover", ok, err, false)
	}
	wantRecord(t, s, "taken", record.StateInProgress, claimed1([]byte("successor")))
}

// observeLapse claims key for owner-a with a short lease and claims it as owner-b until that claim
// observes the lapse (the record turns outcome_unknown, still owner-a's).
func observeLapse(t *testing.T, s Subject, key string) {
	t.Helper()
	mustClaim(t, s, key, "owner-a", []byte("claim"), short, long)
	s.elapse(2 * short)
	s.after(t, key+": the lease lapses and a Claim observes it", func() bool {
		_, state, _ := claim(t, s, key, "owner-b", []byte("retry"), long, long)
		return state == record.StateUnknown
	})
}

func testReclaim(t *testing.T, s Subject) {
	unknown := func(t *testing.T, key string) {
		mustClaim(t, s, key, "owner-a", []byte("claim"), long, long)
		ok, err := s.MarkUnknown(ctx, key, "owner-a", []byte("unknown"), long)
		wantOK(t, "MarkUnknown", ok, err, true)
	}
	cases := []struct {
		name   string
		setup  func(t *testing.T, key string)
		from   string
		wantOK bool
	}{
		{"outcome_unknown with right from", unknown, "owner-a", true},
		{"outcome_unknown with wrong from", unknown, "owner-x", false},
		{"lapsed in_progress with right from", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), short, long)
			s.elapse(2 * short) // the lease lapses; no Claim observes it
		}, "owner-a", true},
		{"lapsed in_progress with wrong from", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), short, long)
			s.elapse(2 * short) // the lease lapses; no Claim observes it
		}, "owner-x", false},
		{"live in_progress", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), long, long)
		}, "owner-a", false},
		{"committed", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), long, long)
			ok, err := s.Commit(ctx, key, "owner-a", []byte("receipt"), long)
			wantOK(t, "Commit", ok, err, true)
		}, "owner-a", false},
		{"missing", func(t *testing.T, key string) {}, "owner-a", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := tc.name
			tc.setup(t, key)
			beforeState, beforePayload := get(t, s, key)
			ok, err := s.Reclaim(ctx, key, tc.from, "owner-b", []byte("reclaimed"), long, long)
			wantOK(t, "Reclaim", ok, err, tc.wantOK)
			if !tc.wantOK {
				wantRecord(t, s, key, beforeState, beforePayload)
				return
			}
			// The takeover's payload, and nothing of the settle it took over from.
			wantRecord(t, s, key, record.StateInProgress, claimed1([]byte("reclaimed")))
			claimed, state, _ := claim(t, s, key, "owner-c", []byte("retry"), long, long)
			if claimed || state != record.StateInProgress {
				t.Errorf("Claim after Reclaim = %v, %q; want false, %q", claimed, state, record.StateInProgress)
			}
			// The old owner is fenced off; the new one owns the record.
			ok, err = s.Commit(ctx, key, "owner-a", []byte("stale"), long)
			wantOK(t, "Commit by the previous owner", ok, err, false)
			ok, err = s.Commit(ctx, key, "owner-b", []byte("receipt"), long)
			wantOK(t, "Commit by the new owner", ok, err, true)
			wantRecord(t, s, key, record.StateCommitted, settled("reclaimed", "receipt"))
		})
	}
}

func testConcurrentReclaim(t *testing.T, s Subject) {
	const n = 20
	mustClaim(t, s, "k", "owner-a", []byte("claim"), long, long)
	ok, err := s.MarkUnknown(ctx, "k", "owner-a", []byte("unknown"), long)
	wantOK(t, "MarkUnknown", ok, err, true)
	var wg sync.WaitGroup
	won := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			won[i], errs[i] = s.Reclaim(ctx, "k", "owner-a", fmt.Sprintf("reclaimer-%d", i), []byte(fmt.Sprintf("p%d", i)), long, long)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Reclaim %d: %v", i, errs[i])
		}
		if won[i] {
			if winner >= 0 {
				t.Fatalf("reclaimers %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no reclaimer won")
	}
	wantRecord(t, s, "k", record.StateInProgress, claimed1([]byte(fmt.Sprintf("p%d", winner))))
}

func testRenew(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), short, long)
	ok, err := s.Renew(ctx, "k", "owner-a", long)
	wantOK(t, "Renew by owner", ok, err, true)
	s.elapse(2 * short) // past the original lease
	claimed, state, _ := claim(t, s, "k", "owner-b", []byte("retry"), long, long)
	if claimed || state != record.StateInProgress {
		t.Fatalf("Claim after the original lease = %v, %q; want false, %q (renewed)", claimed, state, record.StateInProgress)
	}
	ok, err = s.Commit(ctx, "k", "owner-a", []byte("receipt"), long)
	wantOK(t, "Commit after renewals", ok, err, true)
}

func testRenewShortens(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), long, long)
	ok, err := s.Renew(ctx, "k", "owner-a", short)
	wantOK(t, "Renew by owner", ok, err, true)
	s.elapse(2 * short)
	s.after(t, "renewed short lease lapses", func() bool {
		_, state, _ := claim(t, s, "k", "owner-b", []byte("retry"), long, long)
		return state == record.StateUnknown
	})
}

// testTransitionTTLs: each transition that sets a TTL sets the one it was given, counted from the
// transition, as read back from the store; no test waits for these to run out.
func testTransitionTTLs(t *testing.T, s Subject) {
	mustClaim(t, s, "claimed", "owner-a", []byte("claim"), long, longer)
	wantTTL(t, s, "claimed", long, longer)

	mustClaim(t, s, "committed", "owner-a", []byte("claim"), long, longer)
	ok, err := s.Commit(ctx, "committed", "owner-a", []byte("receipt"), long)
	wantOK(t, "Commit", ok, err, true)
	wantTTL(t, s, "committed", 0, long)

	mustClaim(t, s, "marked", "owner-a", []byte("claim"), long, longer)
	ok, err = s.MarkUnknown(ctx, "marked", "owner-a", []byte("unknown"), long)
	wantOK(t, "MarkUnknown", ok, err, true)
	wantTTL(t, s, "marked", 0, long)

	ok, err = s.Reclaim(ctx, "marked", "owner-a", "owner-b", []byte("again"), long, longer)
	wantOK(t, "Reclaim", ok, err, true)
	wantTTL(t, s, "marked", long, longer)
}

// testTTLExpiry: records really expire, in each state, on the store's own clock; an expired record
// is gone for every transition.
func testTTLExpiry(t *testing.T, s Subject) {
	cases := []struct {
		name  string
		setup func(t *testing.T, key string)
	}{
		{"in_progress", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), long, 2*short)
		}},
		{"committed", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), long, long)
			ok, err := s.Commit(ctx, key, "owner-a", []byte("receipt"), 2*short)
			wantOK(t, "Commit", ok, err, true)
		}},
		{"outcome_unknown", func(t *testing.T, key string) {
			mustClaim(t, s, key, "owner-a", []byte("claim"), long, long)
			ok, err := s.MarkUnknown(ctx, key, "owner-a", []byte("unknown"), 2*short)
			wantOK(t, "MarkUnknown", ok, err, true)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.setup(t, tc.name)
			s.elapse(3 * short)
			s.after(t, "record expires", func() bool {
				state, _ := get(t, s, tc.name)
				return state == ""
			})
			for _, w := range writes {
				ok, err := w.do(s, tc.name, "owner-a")
				wantOK(t, w.name+" on an expired record", ok, err, w.missingOK)
			}
			mustClaim(t, s, tc.name, "owner-b", []byte("again"), long, long)
		})
	}
}

// testCommitResetsTTL: a Commit with a TTL counts it from the commit, whatever the Claim set.
func testCommitResetsTTL(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), long, long)
	ok, err := s.Commit(ctx, "k", "owner-a", []byte("receipt"), longer)
	wantOK(t, "Commit", ok, err, true)
	wantTTL(t, s, "k", long, longer)
	wantRecord(t, s, "k", record.StateCommitted, settled("claim", "receipt"))
}

// testCommitKeepsTTL: a Commit with ttl 0 commits, leaving the expiry the Claim set: not expiring
// the record at once, nor keeping it for ever.
func testCommitKeepsTTL(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), long, long)
	ok, err := s.Commit(ctx, "k", "owner-a", []byte("receipt"), 0)
	wantOK(t, "Commit with ttl 0", ok, err, true)
	wantTTL(t, s, "k", long/2, long)
	wantRecord(t, s, "k", record.StateCommitted, settled("claim", "receipt"))
}

func testDelete(t *testing.T, s Subject) {
	for _, state := range []string{record.StateInProgress, record.StateCommitted, record.StateUnknown} {
		t.Run(state, func(t *testing.T) {
			key := "k-" + state
			mustClaim(t, s, key, "owner-a", []byte("claim"), long, long)
			switch state {
			case record.StateCommitted:
				ok, err := s.Commit(ctx, key, "owner-a", []byte("receipt"), long)
				wantOK(t, "Commit", ok, err, true)
			case record.StateUnknown:
				ok, err := s.MarkUnknown(ctx, key, "owner-a", []byte("unknown"), long)
				wantOK(t, "MarkUnknown", ok, err, true)
			}
			existed, err := s.Delete(ctx, key)
			wantOK(t, "Delete", existed, err, true)
			wantRecord(t, s, key, "", record.Payload{})
			existed, err = s.Delete(ctx, key)
			wantOK(t, "second Delete", existed, err, false)
			ok, err := s.Commit(ctx, key, "owner-a", []byte("late"), long)
			wantOK(t, "Commit after Delete", ok, err, false)
			mustClaim(t, s, key, "owner-b", []byte("again"), long, long)
		})
	}
}

func testGetMissing(t *testing.T, s Subject) {
	state, stored, err := s.Get(ctx, "never-claimed")
	if err != nil || state != "" || len(stored.Claim) != 0 || len(stored.Settle) != 0 {
		t.Errorf("Get(missing) = %q, %s, %v; want \"\", empty, nil", state, abbrevPayload(stored), err)
	}
	existed, err := s.Delete(ctx, "never-claimed")
	wantOK(t, "Delete(missing)", existed, err, false)
}

func testOddKeys(t *testing.T, s Subject) {
	keys := []string{
		"plain",
		"{", "}", "{}", "}{", "{plain}", "a{b}c", "a}b", "a%7Db", "a%7db", "a%b", "%", "%25", "%%",
		"a/b", "a/b/", "/a/b", "a b", " a", "a ", "a\tb", "a\nb",
		"ü", "u\u0308", "日本語", "🔑", "a\x00b", "a\x00", "\xff\xfe", "idemgateway:{plain}", "idemgateway:plain",
		"tenant/tool/key", "tenant/tool}/key", "tenant/{tool}/key",
	}
	for i, key := range keys {
		mustClaim(t, s, key, "owner", []byte(fmt.Sprintf("payload %d", i)), long, long)
	}
	for i, key := range keys {
		wantRecord(t, s, key, record.StateInProgress, claimed1([]byte(fmt.Sprintf("payload %d", i))))
	}
	existed, err := s.Delete(ctx, "a}b")
	wantOK(t, "Delete", existed, err, true)
	for i, key := range keys {
		if key != "a}b" {
			wantRecord(t, s, key, record.StateInProgress, claimed1([]byte(fmt.Sprintf("payload %d", i))))
		}
	}
}

func testPayloads(t *testing.T, s Subject) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	mib := make([]byte, 1<<20)
	_, _ = rand.Read(mib)
	cases := []struct {
		name    string
		payload []byte
	}{
		{"empty", []byte{}},
		{"nil", nil},
		{"NUL", []byte{0}},
		{"NULs inside", []byte("a\x00b\x00\x00c")},
		{"invalid UTF-8", []byte{0xff, 0xfe, 0xc3, 0x28, 0x80}},
		{"all byte values", all},
		{"CRLF and RESP", []byte("$-1\r\n*3\r\n:1\r\n")},
		{"1 MiB random", mib},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := tc.name
			mustClaim(t, s, key, "owner-a", tc.payload, long, long)
			wantRecord(t, s, key, record.StateInProgress, claimed1(tc.payload))
			_, _, stored := claim(t, s, key, "owner-b", []byte("x"), long, long)
			if !samePayload(stored, claimed1(tc.payload)) {
				t.Fatalf("second Claim stored = %s, want %s", abbrevPayload(stored), abbrev(tc.payload))
			}
			// The settle part is kept as its own bytes, beside the claim's.
			settle := append([]byte("settle:"), tc.payload...)
			ok, err := s.Commit(ctx, key, "owner-a", settle, long)
			wantOK(t, "Commit", ok, err, true)
			wantRecord(t, s, key, record.StateCommitted, record.Payload{Claim: tc.payload, Settle: settle})
		})
	}
}

func testConcurrentClaims(t *testing.T, s Subject) {
	const n = 50
	type result struct {
		claimed bool
		state   string
		stored  record.Payload
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			var r result
			r.claimed, r.state, r.stored, r.err = s.Claim(ctx, "k", fmt.Sprintf("owner-%d", i), []byte(fmt.Sprintf("p%d", i)), long, long)
			results[i] = r
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("Claim %d: %v", i, r.err)
		}
		if r.claimed {
			if winner >= 0 {
				t.Fatalf("claims %d and %d both claimed", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no claim claimed")
	}
	want := claimed1([]byte(fmt.Sprintf("p%d", winner)))
	for i, r := range results {
		if r.state != record.StateInProgress || !samePayload(r.stored, want) {
			t.Errorf("Claim %d = %q, %s; want %q, %s", i, r.state, abbrevPayload(r.stored), record.StateInProgress, abbrevPayload(want))
		}
	}
	wantRecord(t, s, "k", record.StateInProgress, want)
}

func testInvalidArguments(t *testing.T, s Subject) {
	p := []byte("p")
	cases := []struct {
		name string
		do   func() error
	}{
		{"Claim empty key", func() error { _, _, _, err := s.Claim(ctx, "", "o", p, long, long); return err }},
		{"Claim empty owner", func() error { _, _, _, err := s.Claim(ctx, "k", "", p, long, long); return err }},
		{"Claim zero lease", func() error { _, _, _, err := s.Claim(ctx, "k", "o", p, 0, long); return err }},
		{"Claim negative ttl", func() error { _, _, _, err := s.Claim(ctx, "k", "o", p, long, -time.Second); return err }},
		{"Reclaim empty owner", func() error { _, err := s.Reclaim(ctx, "k", "o", "", p, long, long); return err }},
		{"Reclaim zero ttl", func() error { _, err := s.Reclaim(ctx, "k", "o", "o2", p, long, 0); return err }},
		{"Renew zero lease", func() error { _, err := s.Renew(ctx, "k", "o", 0); return err }},
		{"Commit negative ttl", func() error { _, err := s.Commit(ctx, "k", "o", p, -time.Second); return err }},
		{"MarkUnknown zero ttl", func() error { _, err := s.MarkUnknown(ctx, "k", "o", p, 0); return err }},
	}
	for _, tc := range cases {
		if err := tc.do(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	wantRecord(t, s, "k", "", record.Payload{})
}

func testCancelledContext(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), long, long)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := s.Claim(cctx, "k2", "owner-a", []byte("p"), long, long); err == nil {
		t.Error("Claim with a cancelled context: no error")
	}
	if _, err := s.Commit(cctx, "k", "owner-a", []byte("receipt"), long); err == nil {
		t.Error("Commit with a cancelled context: no error")
	}
	if _, _, err := s.Get(cctx, "k"); err == nil {
		t.Error("Get with a cancelled context: no error")
	}
	wantRecord(t, s, "k", record.StateInProgress, claimed1([]byte("claim")))
	wantRecord(t, s, "k2", "", record.Payload{})
}

func testPing(t *testing.T, s Subject) {
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// testGetLapsed: Get reports an in_progress record whose lease lapsed as outcome_unknown before any
// Claim observed it, without changing it (its owner may still finish it).
func testGetLapsed(t *testing.T, s Subject) {
	mustClaim(t, s, "k", "owner-a", []byte("claim"), short, long)
	s.elapse(2 * short)
	s.after(t, "Get reports the lapse", func() bool {
		state, _, err := s.Get(ctx, "k")
		return err == nil && state == record.StateUnknown
	})
	ok, err := s.Commit(ctx, "k", "owner-a", []byte("receipt"), long)
	wantOK(t, "Commit after a lapse only Get saw", ok, err, true)
	wantRecord(t, s, "k", record.StateCommitted, settled("claim", "receipt"))
}

// testListUnknown: ListUnknown pages the outcome_unknown records under a prefix in key order,
// skipping every other state, and forgets records that left the state.
func testListUnknown(t *testing.T, s Subject) {
	unknown := func(key string) {
		t.Helper()
		mustClaim(t, s, key, "o", []byte("p:"+key), long, long)
		ok, err := s.MarkUnknown(ctx, key, "o", []byte("u:"+key), long)
		wantOK(t, "MarkUnknown "+key, ok, err, true)
	}
	for _, k := range []string{"a/t/3", "a/t/1", "a/u/2", "b/t/1", "a/t/2"} {
		unknown(k)
	}
	mustClaim(t, s, "a/t/0", "o", []byte("in progress"), long, long)
	mustClaim(t, s, "a/t/4", "o", []byte("x"), long, long)
	ok, err := s.Commit(ctx, "a/t/4", "o", []byte("committed"), long)
	wantOK(t, "Commit a/t/4", ok, err, true)
	mustClaim(t, s, "a/t/5", "o", []byte("lapsing"), short, long)
	s.elapse(2 * short)
	s.after(t, "a/t/5 lapses and a Claim sees it", func() bool {
		_, state, _ := claim(t, s, "a/t/5", "o2", []byte("retry"), long, long)
		return state == record.StateUnknown
	})

	var got []string
	cursor := ""
	for page := 0; page < 10; page++ {
		keys, payloads, next, err := s.ListUnknown(ctx, "a/", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 2 || len(keys) != len(payloads) {
			t.Fatalf("page %d: %d keys, %d payloads, limit 2", page, len(keys), len(payloads))
		}
		for i, k := range keys {
			want := settled("p:"+k, "u:"+k)
			if k == "a/t/5" {
				want = claimed1([]byte("lapsing"))
			}
			if !samePayload(payloads[i], want) {
				t.Errorf("payload of %s = %s, want %s", k, abbrevPayload(payloads[i]), abbrevPayload(want))
			}
		}
		got = append(got, keys...)
		if next == "" {
			break
		}
		cursor = next
	}
	want := []string{"a/t/1", "a/t/2", "a/t/3", "a/t/5", "a/u/2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ListUnknown(a/) = %v, want %v", got, want)
	}

	// A record that leaves outcome_unknown leaves the list.
	ok, err = s.Reclaim(ctx, "a/t/1", "o", "o3", []byte("again"), long, long)
	wantOK(t, "Reclaim a/t/1", ok, err, true)
	if _, err := s.Delete(ctx, "a/t/2"); err != nil {
		t.Fatal(err)
	}
	keys, _, next, err := s.ListUnknown(ctx, "a/t/", "", 10)
	if err != nil || next != "" || strings.Join(keys, " ") != "a/t/3 a/t/5" {
		t.Fatalf("after Reclaim and Delete: %v, next %q, %v; want [a/t/3 a/t/5]", keys, next, err)
	}
	if _, _, _, err := s.ListUnknown(ctx, "", "", 0); err == nil {
		t.Error("ListUnknown with limit 0 succeeded")
	}
}

// testSentTwice: every transition is safe to send twice (docs/guarantees.md#lost-replies). The
// second of two identical calls, as a Redis client or the gateway sends it when the answer to the
// first was lost, answers as the first did, and leaves the record as the first left it; a call
// that differs in its owner or payload is not taken for the first.
func testSentTwice(t *testing.T, s Subject) {
	twice := func(t *testing.T, what string, do func() (bool, error)) {
		t.Helper()
		for _, n := range []string{"first", "second"} {
			ok, err := do()
			wantOK(t, n+" "+what, ok, err, true)
		}
	}
	inProgress := func(t *testing.T, key, owner string) {
		t.Helper()
		claimed, state, _ := claim(t, s, key, owner+"-other", []byte("other"), long, long)
		if claimed || state != record.StateInProgress {
			t.Fatalf("Claim of another owner = %v, %q; want false, in_progress (live lease)", claimed, state)
		}
	}
	t.Run("Claim", func(t *testing.T) {
		t.Parallel()
		for _, n := range []string{"first", "second"} {
			claimed, state, stored := claim(t, s, "k", "owner-a", []byte("claim"), long, long)
			if !claimed || state != record.StateInProgress || !samePayload(stored, claimed1([]byte("claim"))) {
				t.Fatalf("%s Claim = %v, %q, %s; want claimed", n, claimed, state, abbrevPayload(stored))
			}
		}
		wantRecord(t, s, "k", record.StateInProgress, claimed1([]byte("claim")))
		inProgress(t, "k", "owner-a")
		ok, err := s.Commit(ctx, "k", "owner-a", []byte("receipt"), long)
		wantOK(t, "Commit after a claim sent twice", ok, err, true)
		// Sent again after the owner settled (a late copy): it reads the record, and claims nothing.
		claimed, state, stored := claim(t, s, "k", "owner-a", []byte("claim"), long, long)
		if claimed || state != record.StateCommitted || !samePayload(stored, answered("receipt")) {
			t.Errorf("Claim sent again after the commit = %v, %q, %s; want the committed record's settle part", claimed, state, abbrevPayload(stored))
		}
	})
	t.Run("Claim/lease from the second", func(t *testing.T) {
		t.Parallel()
		mustClaim(t, s, "k2", "owner-a", []byte("claim"), short, long)
		s.elapse(2 * short) // the first's lease lapses before the second comes
		claimed, state, _ := claim(t, s, "k2", "owner-a", []byte("claim"), long, long)
		if !claimed || state != record.StateInProgress {
			t.Fatalf("Claim sent again after an unobserved lapse = %v, %q; want claimed", claimed, state)
		}
		inProgress(t, "k2", "owner-a")
	})
	t.Run("Claim/lapse observed", func(t *testing.T) {
		t.Parallel()
		mustClaim(t, s, "k3", "owner-a", []byte("claim"), short, long)
		s.elapse(2 * short)
		s.after(t, "another claim observes the lapse", func() bool {
			_, state, _ := claim(t, s, "k3", "owner-b", []byte("retry"), long, long)
			return state == record.StateUnknown
		})
		claimed, state, _ := claim(t, s, "k3", "owner-a", []byte("claim"), long, long)
		if claimed || state != record.StateUnknown {
			t.Errorf("Claim sent again after its lapse was observed = %v, %q; want false, outcome_unknown", claimed, state)
		}
		// The owner's mark of its lapsed record is taken (OwnerMaySettleAfterObservedLapse), with
		// any settle part, an empty one too; the record stays outcome_unknown.
		ok, err := s.MarkUnknown(ctx, "k3", "owner-a", nil, long)
		wantOK(t, "MarkUnknown with no payload of a record whose lapse was observed", ok, err, true)
		wantRecord(t, s, "k3", record.StateUnknown, claimed1([]byte("claim")))
	})
	t.Run("Reclaim", func(t *testing.T) {
		t.Parallel()
		mustClaim(t, s, "r", "owner-a", []byte("claim"), long, long)
		ok, err := s.MarkUnknown(ctx, "r", "owner-a", []byte("unknown"), long)
		wantOK(t, "MarkUnknown", ok, err, true)
		twice(t, "Reclaim", func() (bool, error) {
			return s.Reclaim(ctx, "r", "owner-a", "owner-b", []byte("reclaimed"), long, long)
		})
		wantRecord(t, s, "r", record.StateInProgress, claimed1([]byte("reclaimed")))
		inProgress(t, "r", "owner-b")
		ok, err = s.Reclaim(ctx, "r", "owner-a", "owner-c", []byte("reclaimed"), long, long)
		wantOK(t, "Reclaim by a third owner", ok, err, false)
		ok, err = s.Reclaim(ctx, "r", "owner-a", "owner-b", []byte("another payload"), long, long)
		wantOK(t, "Reclaim by the new owner with another payload", ok, err, false)
		wantRecord(t, s, "r", record.StateInProgress, claimed1([]byte("reclaimed")))
	})
	t.Run("Renew", func(t *testing.T) {
		t.Parallel()
		mustClaim(t, s, "n", "owner-a", []byte("claim"), short, long)
		twice(t, "Renew", func() (bool, error) { return s.Renew(ctx, "n", "owner-a", long) })
		s.elapse(2 * short) // past the claim's lease
		inProgress(t, "n", "owner-a")
	})
	t.Run("Commit", func(t *testing.T) {
		t.Parallel()
		mustClaim(t, s, "c", "owner-a", []byte("claim"), long, long)
		twice(t, "Commit", func() (bool, error) { return s.Commit(ctx, "c", "owner-a", []byte("receipt"), long) })
		wantRecord(t, s, "c", record.StateCommitted, settled("claim", "receipt"))
		ok, err := s.Commit(ctx, "c", "owner-a", []byte("another receipt"), long)
		wantOK(t, "Commit by the owner with another receipt", ok, err, false)
		ok, err = s.Commit(ctx, "c", "owner-b", []byte("receipt"), long)
		wantOK(t, "Commit of the same receipt by another owner", ok, err, false)
		ok, err = s.MarkUnknown(ctx, "c", "owner-a", []byte("receipt"), long)
		wantOK(t, "MarkUnknown of the committed receipt", ok, err, false)
		wantRecord(t, s, "c", record.StateCommitted, settled("claim", "receipt"))
	})
	t.Run("Commit/TTL of the first", func(t *testing.T) {
		t.Parallel()
		mustClaim(t, s, "e", "owner-a", []byte("claim"), long, longer)
		ok, err := s.Commit(ctx, "e", "owner-a", []byte("receipt"), long)
		wantOK(t, "Commit", ok, err, true)
		ok, err = s.Commit(ctx, "e", "owner-a", []byte("receipt"), longer)
		wantOK(t, "Commit sent again with a longer TTL", ok, err, true)
		wantTTL(t, s, "e", 0, long) // the first's
	})
	t.Run("MarkUnknown", func(t *testing.T) {
		t.Parallel()
		mustClaim(t, s, "u", "owner-a", []byte("claim"), long, long)
		twice(t, "MarkUnknown", func() (bool, error) { return s.MarkUnknown(ctx, "u", "owner-a", []byte("unknown"), long) })
		wantRecord(t, s, "u", record.StateUnknown, settled("claim", "unknown"))
		ok, err := s.MarkUnknown(ctx, "u", "owner-a", []byte("another detail"), long)
		wantOK(t, "MarkUnknown by the owner with another payload", ok, err, false)
		ok, err = s.Commit(ctx, "u", "owner-a", []byte("unknown"), long)
		wantOK(t, "Commit of the marked payload", ok, err, false)
		wantRecord(t, s, "u", record.StateUnknown, settled("claim", "unknown"))
		keys, _, _, err := s.ListUnknown(ctx, "u", "", 10)
		if err != nil || len(keys) != 1 {
			t.Errorf("ListUnknown(u) = %q, %v; want the record once", keys, err)
		}
	})
	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		mustClaim(t, s, "l", "owner-a", []byte("claim"), long, long)
		twice(t, "Release", func() (bool, error) { return s.Release(ctx, "l", "owner-a") })
		wantRecord(t, s, "l", "", record.Payload{})
		mustClaim(t, s, "l", "owner-b", []byte("retry"), long, long)
		ok, err := s.Release(ctx, "l", "owner-a")
		wantOK(t, "Release sent again once another owner claimed the key", ok, err, false)
		wantRecord(t, s, "l", record.StateInProgress, claimed1([]byte("retry")))
	})
}
