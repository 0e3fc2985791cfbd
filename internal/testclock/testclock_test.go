package testclock

import (
	"testing"
	"time"
)

// TestClockMovesOnlyWhenAdvanced: the time stands still between reads, and moves by what Advance
// adds.
func TestClockMovesOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	time.Sleep(time.Millisecond) // wall time passes: the clock must not
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now moved with wall time: %v", got)
	}
	c.Advance(1500 * time.Millisecond)
	if got, want := c.Now(), start.Add(1500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after Advance, Now = %v, want %v", got, want)
	}
}
