package eventually

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestTrueReturnsOnceTheConditionHolds(t *testing.T) {
	var polls atomic.Int32
	True(t, "the third poll", func() bool { return polls.Add(1) == 3 })
	if n := polls.Load(); n != 3 {
		t.Fatalf("%d polls, want 3", n)
	}
}

func TestWithinGivesUpAtTheCeiling(t *testing.T) {
	if Within(10*time.Millisecond, func() bool { return false }) {
		t.Fatal("Within = true for a condition that never holds")
	}
	if !Within(10*time.Millisecond, func() bool { return true }) {
		t.Fatal("Within = false for a condition that holds")
	}
}

// fatalRecorder is a testing.TB whose Fatalf records its message instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

func TestTrueWithinSaysWhatItWaitedFor(t *testing.T) {
	r := &fatalRecorder{TB: t}
	TrueWithin(r, 10*time.Millisecond, "the lease to lapse", func() bool { return false })
	if !strings.Contains(r.msg, "gave up after 10ms waiting for the lease to lapse") {
		t.Fatalf("failure message %q does not say what was awaited", r.msg)
	}
}
