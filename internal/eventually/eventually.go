// Package eventually is how a test waits for something that will happen: it polls a condition until it
// holds and, when a generous ceiling passes first, fails the test saying what it waited for. A test
// never sleeps for an event (docs/contributing.md, "The testing rules of the house"): a fixed sleep
// is too short on a busy machine and too long on a quiet one, where polling returns at once.
//
// The ceiling only bounds a hang; it is not an assertion of speed. It is long (Ceiling) because a
// machine that runs the suite beside builds and servers can stall a process for seconds.
package eventually

import (
	"testing"
	"time"
)

// Ceiling is how long True waits before it gives up: far beyond any delay a loaded machine causes,
// so that a test fails only when what it waits for does not happen.
const Ceiling = 30 * time.Second

// the interval between two polls grows from firstPoll to lastPoll, so that a condition that holds
// soon is seen soon and a long wait costs few polls.
const (
	firstPoll = time.Millisecond
	lastPoll  = 20 * time.Millisecond
)

// True polls cond until it returns true and fails the test with "gave up after 30s waiting for
// <what>" when Ceiling passes first. It must be called from the test's own goroutine (it calls
// t.Fatalf); in another goroutine, use Within.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	TrueWithin(t, Ceiling, what, cond)
}

// TrueWithin is True with another ceiling, for a wait whose bound is part of what the test
// checks (a condition that must hold within a second of an event): the ceiling is still a bound
// on a stall, never a race with the machine's speed.
func TrueWithin(t testing.TB, ceiling time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(ceiling, cond) {
		t.Fatalf("gave up after %s waiting for %s", ceiling, what)
	}
}

// Within polls cond until it returns true (Within returns true) or ceiling passes (false). It
// fails nothing itself, so a goroutine other than the test's may call it.
func Within(ceiling time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(ceiling)
	interval := firstPoll
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval) // the poll's pace, not a wait for an event
		interval = min(2*interval, lastPoll)
	}
}
