package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/e2e"
)

// assert fails the test for every operation that broke a promise, with its story: the client
// events, the sandbox's lines and the gateways' lines for its key.
func (c *run) assert(r *report) {
	t := c.t
	t.Helper()
	if r.histogram[2] > 0 {
		t.Errorf("%d operations had more than one side effect", r.histogram[2])
	}
	if len(r.lost) > 0 {
		t.Errorf("%d receipts lost", len(r.lost))
	}
	if len(r.badFinal) > 0 {
		t.Errorf("%d operations did not end in a final state allowed by the contract", len(r.badFinal))
	}
	if len(r.unattributed) > 0 {
		t.Errorf("%d side effects name no operation of this run, e.g. %s", len(r.unattributed), r.unattributed[0])
	}
	var sum int
	for _, ids := range r.effects {
		sum += len(ids)
	}
	if sum+len(r.unattributed) != r.sbTotal {
		t.Errorf("the sandbox counted %d effects, its log shows %d", r.sbTotal, sum+len(r.unattributed))
	}
	if len(r.ops) < 10 {
		t.Errorf("only %d operations were attempted: the run proves little", len(r.ops))
	}
	// The faults must have hit what they are for.
	if n := r.sbFaults[faultBeyondLease]; n > 0 && r.renewals["ok"] == 0 {
		t.Errorf("%d upstream calls ran longer than their lease and acted, but no lease renewal succeeded", n)
	}
	// Every transition lost replies, by close and by stall (docs/guarantees.md#lost-replies).
	if !testing.Short() {
		c.lost.mu.Lock()
		for _, op := range lostReplyRequired {
			for _, f := range lostReplyFaults {
				if c.lost.lost[op+" "+f.String()] == 0 {
					t.Errorf("no reply of %s was lost by %s: the run did not test it", op, f)
				}
			}
		}
		c.lost.mu.Unlock()
	}
	for i, n := range c.killedInFlight {
		if n < 1 {
			t.Errorf("kill -9 #%d hit a gateway with %d upstream calls in flight: it tested a crash without a call under way", i+1, n)
		}
	}
	// forward_key and reconcile were under fault (see newOperation: one operation in twenty
	// drops the connection after acting on each).
	if r.byTool[toolFK].ops > 0 && r.keyReplays == 0 {
		t.Errorf("no answer came from the upstream's de-duplication: forward_key was never re-executed under fault")
	}
	if r.byTool[toolRec].ops > 0 && r.reconFound == 0 {
		t.Errorf("no reconciliation found an effect: reconcile was never under fault")
	}

	// An unexplained outcome_unknown breaks no promise (no second effect, no 2xx lost), but the
	// report must say why: its story is logged for the reader.
	for _, op := range r.unexplained[:min(len(r.unexplained), 3)] {
		t.Logf("%s left outcome_unknown, unexplained:\n%s", op.key, c.story(op))
	}

	shown := 0
	for _, op := range r.ops {
		m := op.marker()
		if r.lost[m] == nil && r.badFinal[m] == nil {
			continue
		}
		if shown++; shown > 8 {
			t.Errorf("(more operations failed; seed %d)", c.seed)
			break
		}
		t.Errorf("operation %s (marker %d, %s, %s, delay %s, %d deliveries): %s", op.key, m, op.tool, op.kind, op.delay, op.deliveries,
			strings.Join(append(r.lost[m], r.badFinal[m]...), "; "))
		t.Log(c.story(op))
	}
}

// story is an operation's events, in time order, from the clients, the sandbox and the gateways.
func (c *run) story(op *operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "story of %s (seed %d):\nprocess faults:\n", op.key, c.seed)
	for _, f := range c.faults {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	b.WriteString("client requests:\n")
	op.mu.Lock()
	events := slices.Clone(op.events)
	op.mu.Unlock()
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	for _, ev := range events {
		fmt.Fprintf(&b, "  +%6.2fs (%4dms) worker %2d %s attempt %d fault %q: %s", ev.at.Seconds(), ev.took.Milliseconds(),
			ev.worker, ev.gateway, ev.attempt, ev.fault, ev.result)
		if ev.remoteID != "" {
			fmt.Fprintf(&b, " id %s op %q pad %d", ev.remoteID, ev.echo, ev.pad)
		}
		if ev.detail != "" {
			fmt.Fprintf(&b, " (%.200s)", ev.detail)
		}
		b.WriteString("\n")
	}
	b.WriteString("sandbox:\n")
	for line := range strings.Lines(c.sb.Out.String()) {
		if l, ok := parseSandboxLine(strings.TrimSpace(line)); ok && l.marker == op.marker() && l.endpoint == e2e.TicketsEndpoint {
			b.WriteString("  " + line)
		}
	}
	quoted := fmt.Sprintf("%q", op.key)
	for _, g := range c.all {
		fmt.Fprintf(&b, "%s (pid %d):\n", g, g.Cmd.Process.Pid)
		for line := range strings.Lines(g.Out.String()) {
			if strings.Contains(line, quoted) {
				b.WriteString("  " + line)
			}
		}
	}
	return b.String()
}
