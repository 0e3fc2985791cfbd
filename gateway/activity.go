package gateway

import (
	"sort"
	"sync"
	"time"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/record"
)

// What the gateway is doing now, as the operator console shows it (admin.Pipeline, GET
// /v1/activity): its upstream calls under way, its settle writes pending, and its decisions per
// minute over the last hour. All of it is this process's own: each replica answers for itself.

// Activity returns g's calls under way and pending settle writes, each oldest first, and its
// decisions per minute over the last hour (admin.Pipeline).
func (g *Gateway) Activity() admin.Activity {
	var a admin.Activity
	g.inFlight.Range(func(k, _ any) bool {
		a.InFlight = append(a.InFlight, k.(*execution).call)
		return true
	})
	g.settles.mu.Lock()
	for p := range g.settles.set {
		k, err := record.ParseScopeKey(p.key)
		if err != nil { // not a request's key: nothing an operator could look up
			continue
		}
		a.Pending = append(a.Pending, admin.PendingWrite{Record: admin.Record{Tenant: k.Tenant, Tool: k.Tool,
			IdempotencyKey: k.Key, CredentialScope: k.Credential}, Op: p.op.String(), Since: p.since})
	}
	g.settles.mu.Unlock()
	sort.Slice(a.InFlight, func(i, j int) bool { return a.InFlight[i].StartedAt.Before(a.InFlight[j].StartedAt) })
	sort.Slice(a.Pending, func(i, j int) bool { return a.Pending[i].Since.Before(a.Pending[j].Since) })
	a.Decisions = g.decisionRate.lastHour(g.now())
	return a
}

// countDecision counts a decision on tool's route: in idemgateway_decisions_total and in the
// console's decisions per minute.
func (g *Gateway) countDecision(tool, decision string) {
	g.metrics.decisions.WithLabelValues(tool, decision).Inc()
	g.decisionRate.add(decision, g.now())
}

// decisionNames are the decisions the console counts, in the order of decisionMinute.counts.
var decisionNames = [...]string{DecisionExecute, DecisionReplay, DecisionConflict, DecisionInProgress, DecisionOutcomeUnknown, DecisionRejected}

// decisionRate counts decisions per minute over the last hour, beside
// idemgateway_decisions_total: a ring of the last 61 minutes, so that the hour before the
// current minute is always whole.
type decisionRate struct {
	mu      sync.Mutex
	minutes [61]decisionMinute
}

type decisionMinute struct {
	minute int64 // Unix time in minutes; the slot's counts are of another minute when it differs
	counts [len(decisionNames)]int
}

// add counts a decision made at now.
func (r *decisionRate) add(decision string, now time.Time) {
	i := 0
	for i < len(decisionNames) && decisionNames[i] != decision {
		i++
	}
	if i == len(decisionNames) {
		return
	}
	m := now.Unix() / 60
	r.mu.Lock()
	slot := &r.minutes[m%int64(len(r.minutes))]
	if slot.minute != m {
		*slot = decisionMinute{minute: m}
	}
	slot.counts[i]++
	r.mu.Unlock()
}

// lastHour returns the 60 minutes up to now's, oldest first, each with the count of every decision.
func (r *decisionRate) lastHour(now time.Time) []admin.Minute {
	cur := now.Unix() / 60
	out := make([]admin.Minute, 0, 60)
	r.mu.Lock()
	defer r.mu.Unlock()
	for m := cur - 59; m <= cur; m++ {
		minute := admin.Minute{Start: time.Unix(m*60, 0).UTC(), Decisions: make(map[string]int, len(decisionNames))}
		slot := &r.minutes[m%int64(len(r.minutes))]
		for i, name := range decisionNames {
			if slot.minute == m {
				minute.Decisions[name] = slot.counts[i]
			} else {
				minute.Decisions[name] = 0
			}
		}
		out = append(out, minute)
	}
	return out
}
