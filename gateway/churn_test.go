package gateway

import (
	"testing"
	"time"
)

func TestChurn(t *testing.T) {
	t.Parallel()
	c := newChurn(time.Minute, 3)
	t0 := time.Unix(1_000_000, 0)
	steps := []struct {
		tenant, fp, key string
		at              time.Duration
		churned         bool
	}{
		{"a", "fp1", "k1", 0, false},
		{"a", "fp1", "k1", time.Second, false},     // the same key again: a retry, not churn
		{"a", "fp1", "k2", 2 * time.Second, true},  // a new key for the same effect
		{"b", "fp1", "k3", 3 * time.Second, false}, // another tenant
		{"a", "fp2", "k4", 4 * time.Second, false}, // another effect
		{"a", "fp1", "k5", 2 * time.Minute, false}, // out of the window
		{"c", "x", "1", 2 * time.Minute, false},
		{"c", "y", "2", 2 * time.Minute, false},
		{"c", "z", "3", 2 * time.Minute, false}, // over max: the oldest is forgotten
		{"a", "fp1", "k6", 2 * time.Minute, false},
	}
	for i, s := range steps {
		if got := c.observe(s.tenant, "tool", s.fp, s.key, t0.Add(s.at)); got != s.churned {
			t.Errorf("step %d %+v: churned = %v", i, s, got)
		}
	}
	if len(c.seen) > 3 || len(c.order) != len(c.seen) {
		t.Errorf("%d remembered, %d in order; want at most 3, equal", len(c.seen), len(c.order))
	}
}
