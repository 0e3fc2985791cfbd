package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idemgateway/idemgateway/e2e"
	"github.com/idemgateway/idemgateway/internal/eventually"
)

// quiesce waits until no live gateway has an upstream call in flight or a store write pending
// (docs/guarantees.md#pending-receipts), so that every record the run leaves is settled or owned by
// a dead process, and until the sandbox serves no request: a detached call whose gateway timed out
// or died acts on its own time.
func (c *run) quiesce() {
	c.t.Helper()
	eventually.True(c.t, "the gateways and the sandbox to finish their calls", func() bool {
		if c.sb.InFlight(c.t) != 0 {
			return false
		}
		for _, g := range c.slots {
			m, err := g.Metrics()
			if err != nil {
				return false
			}
			if e2e.SumMetric(m, "idemgateway_upstream_in_flight", "")+e2e.SumMetric(m, "idemgateway_receipts_pending", "") != 0 {
				return false
			}
		}
		return true
	})
}

// verify reads each operation's record through the admin API (read-only) and, when there is one,
// replays it once through the proxy, then reads the record again: a key with a record is never
// executed again (but by the reconcile route's lookup that finds nothing), so this adds no effect. An in_progress record left by a killed gateway answers in_progress until its lease
// lapses, then outcome_unknown.
func (c *run) verify() {
	t := c.t
	t.Helper()
	g := c.slots[0]
	for _, op := range c.attempted() {
		rec, found := g.Record(t, "default", op.tool, op.key)
		if !found {
			continue
		}
		op.record = &rec
		// Long enough for a lease to lapse, and for the reconcile route's wait from a re-execution's
		// latest start (reconcile.after 4s, two store timeouts and the upstream's timeout).
		deadline := time.Now().Add(3*slices.Max(slices.Collect(maps.Values(routeLeases))) + 15*time.Second)
		for {
			req, _, _ := op.request(-1, false, false)
			resp, err := g.Send(req)
			ev, final := classify(resp, err, false)
			ev.at, ev.worker, ev.gateway = c.since(), -1, g.String()+" final check"
			op.add(ev)
			if final || time.Now().After(deadline) {
				op.final, op.finalID, op.finalNote, op.finalRecon = ev.result, ev.remoteID, ev.detail, ev.recon
				if ev.remoteID != "" && !op.answers(ev) {
					op.finalNote = fmt.Sprintf("the replay answers another operation (op %q, padding %d)", ev.echo, ev.pad)
				}
				break
			}
			time.Sleep(100 * time.Millisecond) // the retries' pace, as a client's: each may change the record
		}
		// On the reconcile route the final check may be the request that reconciles (found:
		// committed from the lookup; not found: executed again): the record is what it left.
		if rec, found := g.Record(t, "default", op.tool, op.key); found {
			op.record = &rec
		}
	}
}

// sandboxEffects waits until the sandbox's log has one effect line per side effect its counter
// shows, and returns the ticket endpoint's lines.
func (c *run) sandboxEffects() []sandboxLine {
	t := c.t
	t.Helper()
	var lines []sandboxLine
	eventually.True(t, "the sandbox's log to show every side effect it counted", func() bool {
		want := c.sb.Stats(t).ByEndpoint[e2e.TicketsEndpoint]
		lines = lines[:0]
		effects := 0
		for line := range strings.Lines(c.sb.Out.String()) {
			l, ok := parseSandboxLine(strings.TrimSpace(line))
			if !ok || l.endpoint != e2e.TicketsEndpoint {
				continue
			}
			lines = append(lines, l)
			if l.effect {
				effects++
			}
		}
		return effects == want
	})
	return lines
}
