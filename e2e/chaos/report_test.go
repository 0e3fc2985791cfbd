package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemgateway/idemgateway/e2e"
)

// evaluate checks every operation against the sandbox's effects and its clients' answers.
func (c *run) evaluate(lines []sandboxLine) *report {
	t := c.t
	t.Helper()
	r := &report{ops: c.attempted(), effects: map[int][]string{}, lost: map[int][]string{},
		badFinal: map[int][]string{}, sbFaults: map[string]int{}, gwLog: map[string]int{}, renewals: maps.Clone(c.killedRenewals),
		byTool: map[string]*toolTally{}, unknownWhy: map[string]int{}}
	for _, tool := range routeNames {
		r.byTool[tool] = &toolTally{}
	}
	st := c.sb.Stats(t)
	r.sbTotal, r.sbAttempts = st.ByEndpoint[e2e.TicketsEndpoint], st.Requests.ByEndpoint[e2e.TicketsEndpoint]
	r.readSandbox(lines)
	for _, op := range r.ops {
		c.judge(r, op)
	}
	c.readGateways(r)
	return r
}

// readSandbox counts the sandbox's faults and key replays from its log lines, and files each
// effect under the operation it was for.
func (r *report) readSandbox(lines []sandboxLine) {
	byMarker := map[int]*operation{}
	for _, op := range r.ops {
		byMarker[op.marker()] = op
	}
	for _, l := range lines {
		if l.status == "abandoned" && l.effect {
			r.sbFaults["upstream acted after its caller left (detached; the gateway timed out, died or hung up)"]++
		}
		if l.replayed {
			r.keyReplays++
		}
		switch {
		case l.status == "canceled":
			r.sbFaults["upstream call cut: the gateway went away (sandbox did not act)"]++
		case strings.Contains(l.fault, "fail_after_commit=drop") && l.effect:
			r.sbFaults["drop after commit (sandbox acted, then closed the connection)"]++
		case strings.Contains(l.fault, "fail_after_commit=500") && l.effect:
			r.sbFaults["500 after commit (sandbox acted, then answered 500)"]++
		case strings.Contains(l.fault, "status=503"):
			r.sbFaults["503 before acting"]++
		}
		if l.effect && strings.Contains(l.fault, "delay=") {
			if d, err := time.ParseDuration(strings.TrimPrefix(strings.Split(l.fault, ",")[0], "delay=")); err == nil && byMarker[l.marker] != nil && d > routeLeases[byMarker[l.marker].tool] {
				r.sbFaults[faultBeyondLease]++
			}
		}
		if !l.effect {
			continue
		}
		if byMarker[l.marker] == nil || l.id == "" {
			r.unattributed = append(r.unattributed, l.raw)
			continue
		}
		r.effects[l.marker] = append(r.effects[l.marker], l.id)
	}
}

// clientAnswers is what an operation's clients got: the remote ids of their 2xx answers, how many
// of those executed, and what was wrong with them (lost: a receipt lost or a wrong answer; bad:
// any other fault of the operation).
type clientAnswers struct {
	lost, bad []string
	ids       map[string]bool
	executes  int
	saw2xx    bool
}

// judgeAnswers checks the answers op's clients got (not the final check's) against eff, the
// sandbox's effects for op, and counts the reconciliations among them.
func (r *report) judgeAnswers(op *operation, events []event, eff []string) clientAnswers {
	a := clientAnswers{ids: map[string]bool{}}
	for _, ev := range events {
		switch ev.recon {
		case "found":
			r.reconFound++
		case "not-found":
			r.reconAgain++
		}
		if ev.worker < 0 { // the final check is judged below
			continue
		}
		switch ev.result {
		case resExecute, resReplay:
			a.saw2xx = true
			a.ids[ev.remoteID] = true
			if ev.result == resExecute {
				a.executes++
			}
			if !op.answers(ev) {
				a.lost = append(a.lost, fmt.Sprintf("a 2xx at +%.2fs answers another operation (op %q, padding %d)", ev.at.Seconds(), ev.echo, ev.pad))
			}
			if !slices.Contains(eff, ev.remoteID) {
				a.lost = append(a.lost, fmt.Sprintf("a 2xx at +%.2fs carries %s, which the sandbox did not create for this operation (its effects: %v)", ev.at.Seconds(), ev.remoteID, eff))
			}
		case resConflict:
			a.bad = append(a.bad, "422 at +"+fmt.Sprintf("%.2fs", ev.at.Seconds())+": "+ev.detail)
		case resUnexpected:
			a.bad = append(a.bad, fmt.Sprintf("unexpected answer at +%.2fs: %s", ev.at.Seconds(), ev.detail))
		}
	}
	if len(a.ids) > 1 {
		a.lost = append(a.lost, fmt.Sprintf("2xx answers carry %d different remote ids", len(a.ids)))
	}
	if a.executes > 1 && op.tool != toolFK {
		// On the forward_key route an unknown outcome is released and executed again, and the
		// upstream answers it from its de-duplication: the same remote id (checked above).
		a.lost = append(a.lost, fmt.Sprintf("executed %d times with a 2xx", a.executes))
	}
	return a
}

// judge checks one operation: its clients' answers, its effects, and its record and final check
// against them; it counts the operation into r, and files what was lost or wrong.
func (c *run) judge(r *report, op *operation) {
	eff := r.effects[op.marker()]
	r.histogram[min(len(eff), 2)]++
	op.mu.Lock()
	events := slices.Clone(op.events)
	op.mu.Unlock()
	a := r.judgeAnswers(op, events, eff)
	lost, bad, ids, saw2xx := a.lost, a.bad, a.ids, a.saw2xx
	if len(eff) > 1 {
		bad = append(bad, fmt.Sprintf("%d side effects: %v", len(eff), eff))
	}
	switch {
	case op.record == nil:
		if len(eff) == 0 && !saw2xx {
			r.never++
		} else {
			bad = append(bad, fmt.Sprintf("no record, but %d effects", len(eff)))
			if saw2xx {
				lost = append(lost, "no record after a 2xx")
			}
		}
	case op.final == resReplay && strings.HasPrefix(op.finalNote, "the replay answers another"):
		lost = append(lost, op.finalNote)
		bad = append(bad, op.finalNote)
	case op.final == resReplay, op.final == resExecute && op.tool == toolRec && op.finalRecon == "not-found":
		// On the reconcile route the final check may be the request that reconciles: a lookup
		// that finds nothing executes again, as the contract says.
		r.committed++
		if len(eff) != 1 || eff[0] != op.finalID {
			bad = append(bad, fmt.Sprintf("committed with remote id %s, but the sandbox's effects are %v", op.finalID, eff))
		}
		if saw2xx && !ids[op.finalID] {
			lost = append(lost, fmt.Sprintf("the receipt replays %s, clients got %v", op.finalID, keys(ids)))
		}
		if op.record.State != "committed" || op.record.RemoteID != op.finalID {
			bad = append(bad, fmt.Sprintf("record %s with remote id %q, replay %s", op.record.State, op.record.RemoteID, op.finalID))
		}
	case op.final == resUnknown:
		if len(eff) == 0 {
			r.blockedNone++
		} else {
			r.blockedEffect++
		}
		why := c.whyUnknown(op, events)
		r.unknownWhy[why]++
		if why == whyUnexplained {
			r.unexplained = append(r.unexplained, op)
		}
	case op.final == resExecute:
		bad = append(bad, "the final check executed, though the key had a "+op.record.State+" record")
		lost = append(lost, "a key with a record executed again")
	default:
		bad = append(bad, fmt.Sprintf("no final state: the record is %s and the final check answered %s %s", op.record.State, op.final, op.finalNote))
	}
	// A receipt is lost when a client got a 2xx and the record is not committed, unless the 2xx
	// said the receipt was pending and its gateway died before storing it (docs/guarantees.md#pending-receipts).
	if saw2xx && op.record != nil && op.record.State != "committed" {
		if c.pendingOnKilled(events) {
			r.notStoredKilled++
		} else {
			lost = append(lost, "a 2xx, but the record is "+op.record.State)
		}
	}
	r.tally(op, eff)
	if len(lost) > 0 {
		r.lost[op.marker()] = lost
	}
	if len(bad) > 0 {
		r.badFinal[op.marker()] = bad
	}
}

// tally counts op into its tool's tally.
func (r *report) tally(op *operation, eff []string) {
	tt := r.byTool[op.tool]
	tt.ops++
	tt.effects[min(len(eff), 2)]++
	switch {
	case op.record == nil:
		tt.never++
	case op.final == resUnknown:
		tt.blocked++
	case op.record.State == "committed":
		tt.committed++
	default:
		tt.other++
	}
}

// readGateways counts the gateways' log lines of store and lease failures, and adds the live
// gateways' lease renewals to those the killed ones had made.
func (c *run) readGateways(r *report) {
	for _, g := range c.all {
		for line := range strings.Lines(g.Out.String()) {
			var l struct{ Msg, Op string }
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			switch l.Msg {
			case "lease renewal failed", "lease lost: another owner holds the key", "claim failed", "upstream exchange failed":
				r.gwLog[l.Msg]++
			case "record not settled: store failed", "record not settled: the store refused it: the record is gone (deleted, or expired) or another execution owns it (lease lost)":
				r.gwLog[l.Msg+" ("+l.Op+")"]++
			}
		}
	}
	c.mu.RLock()
	live := slices.Clone(c.slots)
	c.mu.RUnlock()
	for _, g := range live {
		if m, err := g.Metrics(); err == nil {
			for _, res := range []string{"ok", "lost", "error"} {
				r.renewals[res] += e2e.SumMetric(m, "idemgateway_lease_renewals_total", `result="`+res+`"`)
			}
		}
	}
}

// pendingOnKilled reports whether a 2xx execute said Idempotency-Receipt: pending and came from a
// gateway that was killed later: its receipt may never have been stored.
func (c *run) pendingOnKilled(events []event) bool {
	for _, ev := range events {
		if ev.result == resExecute && ev.receipt == "pending" && c.killed[strings.TrimSuffix(ev.gateway, " final check")] {
			return true
		}
	}
	return false
}

// Why a record was left outcome_unknown, as the report counts it.
const (
	whyUpstream    = "the upstream's outcome was unknown (500 or a dropped connection after acting, or its timeout)"
	whyKilled      = "its gateway was killed during the call"
	whyPending     = "its receipt was pending on a gateway killed before storing it"
	whyOutage      = "Redis was stopped during the execution, or within two leases of it"
	whyLostReply   = "a lost reply and nothing else: "
	whySlowStore   = "its lease lapsed while renewals failed (store round trips longer than the lease allows: Redis busy, e.g. just after a restart)"
	whyUnexplained = "unexplained"
)

// whyUnknown says why an operation's record was left outcome_unknown: the first of the run's
// faults, in the order of the constants above, that reached one of its requests.
func (c *run) whyUnknown(op *operation, events []event) string {
	for _, ev := range events {
		if ev.result == resUpUnknown {
			return whyUpstream
		}
	}
	for _, ev := range events {
		if (ev.result == resConnError || ev.result == resGaveUp) && c.killed[ev.gateway] {
			return whyKilled
		}
	}
	if c.pendingOnKilled(events) {
		return whyPending
	}
	for _, ev := range events {
		for _, o := range c.outages {
			if ev.worker >= 0 && ev.at+ev.took >= o[0] && ev.at <= o[1]+2*routeLeases[op.tool] {
				return whyOutage
			}
		}
	}
	c.lost.mu.Lock()
	hits := slices.Compact(slices.Sorted(slices.Values(c.lost.byKey[op.marker()])))
	c.lost.mu.Unlock()
	if len(hits) > 0 {
		return whyLostReply + strings.Join(hits, ", ")
	}
	if c.logged(op, "lease renewal failed") {
		return whySlowStore
	}
	return whyUnexplained
}

// logged reports whether a gateway logged msg for the operation's key.
func (c *run) logged(op *operation, msg string) bool {
	quoted, m := fmt.Sprintf("%q", op.key), fmt.Sprintf(`"msg":%q`, msg)
	for _, g := range c.all {
		for line := range strings.Lines(g.Out.String()) {
			if strings.Contains(line, quoted) && strings.Contains(line, m) {
				return true
			}
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// table is the report of the run.
func (r *report) table(c *run) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k string, format string, args ...any) {
		fmt.Fprintf(w, "%s\t%s\n", k, fmt.Sprintf(format, args...))
	}

	byTool, byKind := map[string]int{}, map[behaviour]int{}
	for _, op := range r.ops {
		byTool[op.tool]++
		byKind[op.kind]++
	}
	var mix []string
	for _, m := range behaviourMix {
		mix = append(mix, fmt.Sprintf("%s %d", m.kind, byKind[m.kind]))
	}
	c.tallyMu.Lock()
	answers, retries := c.answers, c.retries
	c.tallyMu.Unlock()
	sumRetries := 0
	for _, n := range retries {
		sumRetries += n
	}

	fmt.Fprintf(&b, "chaos report: seed %d, %d operations asked, %d workers, %d gateways (the odd slots' stores auto-pipelined) on one Redis (appendonly yes, appendfsync always) behind a fault proxy\n",
		c.seed, c.cfg.ops, c.cfg.workers, c.cfg.gateways)
	var tools []string
	for _, tool := range routeNames {
		tools = append(tools, fmt.Sprintf("%s %d", tool, byTool[tool]))
	}
	row("operations attempted", "%d (%s)", len(r.ops), strings.Join(tools, ", "))
	row("  by upstream behaviour", "%s", strings.Join(mix, ", "))
	row("requests sent by clients", "%d (%d retries: requests after an operation's first); upstream reached %d times", c.requests.Load(), sumRetries, r.sbAttempts)
	row("faults: process", "kill -9 gateway %d; redis stop SIGTERM %d, SIGKILL %d", c.kills, c.redisStops, c.redisKills)
	row("faults: lost replies", "%s", c.lost.summary())
	var leases []string
	for _, tool := range routeNames {
		leases = append(leases, fmt.Sprintf("%s %s", tool, routeLeases[tool]))
	}
	row("leases", "%s", strings.Join(leases, ", "))
	for _, k := range sortedKeys(r.sbFaults) {
		row("faults: upstream", "%s %d", k, r.sbFaults[k])
	}
	row("faults: client", "requests given up mid-call %d", answers[resGaveUp])
	row("side effects per operation", "0: %d   1: %d   >1: %d   (sandbox total %d, unattributed %d)", r.histogram[0], r.histogram[1], r.histogram[2], r.sbTotal, len(r.unattributed))
	row("final states", "committed with 1 effect %d; blocked outcome_unknown %d (%d with an effect, %d without); never executed, 0 effects %d",
		r.committed, r.blockedEffect+r.blockedNone, r.blockedEffect, r.blockedNone, r.never)
	for _, tool := range routeNames {
		tt := r.byTool[tool]
		row("  by route", "%-18s ops %3d; effects 0: %d  1: %d  >1: %d; committed %d, blocked %d, no record %d, other %d",
			tool, tt.ops, tt.effects[0], tt.effects[1], tt.effects[2], tt.committed, tt.blocked, tt.never, tt.other)
	}
	row("forward_key and reconcile", "answers from the upstream's de-duplication %d; reconciled: found %d, not found (executed again) %d",
		r.keyReplays, r.reconFound, r.reconAgain)
	row("operations with a final-state violation", "%d", len(r.badFinal))
	row("receipts lost", "%d (a 2xx, then the record not committed, or another answer)", len(r.lost))
	row("receipts not stored, explained", "%d (a 2xx with Idempotency-Receipt: pending from a gateway killed before storing it)", r.notStoredKilled)
	for _, k := range sortedKeys(r.unknownWhy) {
		row("records left outcome_unknown", "%d: %s", r.unknownWhy[k], k)
	}
	var rs []string
	for _, k := range []string{resReplay, resInProgress, resUnknown, resStore503, resUp503, resExecute, resUpUnknown, resConnError, resGaveUp, resConflict, resUnexpected} {
		rs = append(rs, fmt.Sprintf("%s %d", k, retries[k]))
	}
	row("retries answered by", "%s", strings.Join(rs, "; "))
	var as []string
	for _, k := range sortedKeys(answers) {
		as = append(as, fmt.Sprintf("%s %d", k, answers[k]))
	}
	row("all answers", "%s", strings.Join(as, "; "))
	row("deliveries without a final answer", "%d", c.unfinished.Load())
	row("lease renewals (every process)", "ok %.0f, lost %.0f, error %.0f", r.renewals["ok"], r.renewals["lost"], r.renewals["error"])
	row("kills: upstream calls in flight on the victim", "%v", c.killedInFlight)
	for _, k := range sortedKeys(r.gwLog) {
		row("gateway log (all processes)", "%s: %d", k, r.gwLog[k])
	}
	row("timings", "%s", strings.Join(r.timings, ", "))
	w.Flush()
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
