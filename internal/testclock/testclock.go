// Package testclock is a clock a test moves: its time stands still until the test advances it, so
// a lease or TTL on it lapses exactly when the test says, however slow the machine. The code under
// test takes it where it takes a clock (boltstore.Options.Now, the gateway's SetClock, admin's
// readiness clock).
package testclock

import (
	"sync/atomic"
	"time"
)

// Clock is safe for concurrent use. Build it with New.
type Clock struct{ ns atomic.Int64 }

// New returns a clock that reads start until it is advanced.
func New(start time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(start.UnixNano())
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
