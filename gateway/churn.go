package gateway

import (
	"sync"
	"time"
)

// churn notices a client that mints a new key for each retry: the same tenant, tool and effect
// fingerprint executed under a different key within the window. That is the one duplicate the
// gateway cannot stop (a new key is a new operation), so it is at least counted
// (idemgateway_key_churn_total). It remembers at most max recent executions, in this process only.
type churn struct {
	window time.Duration
	max    int

	mu    sync.Mutex
	seen  map[string]churnEntry // tenant, tool and fingerprint -> the last key executed
	order []string              // keys of seen, oldest first
}

type churnEntry struct {
	key string
	at  time.Time
}

func newChurn(window time.Duration, max int) *churn {
	return &churn{window: window, max: max, seen: make(map[string]churnEntry)}
}

// observe records that key executed the effect fp of tool for tenant at now, and reports whether
// the same effect executed under another key within the window.
func (c *churn) observe(tenant, tool, fp, key string, now time.Time) bool {
	id := tenant + "\x00" + tool + "\x00" + fp
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.order) > 0 { // forget what is out of the window, or over max
		oldest := c.order[0]
		if e := c.seen[oldest]; now.Sub(e.at) < c.window && len(c.order) < c.max {
			break
		}
		delete(c.seen, oldest)
		c.order = c.order[1:]
	}
	prev, found := c.seen[id]
	if !found {
		c.order = append(c.order, id)
	}
	c.seen[id] = churnEntry{key: key, at: now}
	return found && prev.key != key && now.Sub(prev.at) < c.window
}
