package boltstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/boltstore"
)

var ctx = context.Background()

// open opens a store in dir and closes it when the test ends.
func open(t *testing.T, dir string, opts boltstore.Options) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// clock is a settable clock for Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
