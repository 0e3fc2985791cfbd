package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// The official TypeScript MCP client (e2e/mcpts) through the gateway: it numbers its ids 0, 1, 2…
// and matches answers by number, and it adopts any Mcp-Session-Id it sees, two ways a gateway can
// break a client that go-sdk does not show (docs/cases.md C18).

func isJSONNumber(raw json.RawMessage) bool {
	var n json.Number
	return json.Unmarshal(raw, &n) == nil && len(raw) > 0 && raw[0] != '"'
}

// TestMCPTypeScriptRetry: the TypeScript client's retry (a new numeric id) is answered with its own
// id, and replays the first call's ticket.
func TestMCPTypeScriptRetry(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "create_ticket")
		out := e.gw.runTS(t, w, tsConfig{Tool: "create_ticket", Arguments: map[string]any{"title": "Disk full on db-1"},
			Key: "ts-retry-" + w.name, Times: 2})
		first, second := out.Calls[0].ticket(), out.Calls[1].ticket()
		if first == "" || second != first {
			t.Errorf("tickets %q then %q (calls %+v): want one ticket, replayed", first, second, out.Calls)
		}
		// Numeric ids, which the client matches by number: the replay carries the retry's.
		if len(out.IDs) != 2 || bytes.Equal(out.IDs[0], out.IDs[1]) || !isJSONNumber(out.IDs[0]) || !isJSONNumber(out.IDs[1]) {
			t.Errorf("request ids %s: want two different numbers", out.IDs)
		}
		out.expectSameSession(t)
		e.sb.expectSince(t, "create_ticket", before, 1, 1)
	})
}

// TestMCPTypeScriptConflict: the key reused with other arguments is a tool error the TypeScript
// client reads, twice in a row on one session.
func TestMCPTypeScriptConflict(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	w := mcpWays[0]
	before := e.sb.mcpCounts(t, "create_ticket")
	key := "ts-conflict"
	first := e.gw.runTS(t, w, tsConfig{Tool: "create_ticket", Arguments: map[string]any{"title": "Disk full on db-1"}, Key: key, Times: 1})
	id := first.Calls[0].ticket()
	if id == "" {
		t.Fatalf("first call: %+v, want a ticket", first.Calls[0])
	}
	out := e.gw.runTS(t, w, tsConfig{Tool: "create_ticket", Arguments: map[string]any{"title": "Disk full on db-2"}, Key: key, Times: 2})
	for i, c := range out.Calls {
		if !c.IsError || c.decision() != "conflict" || len(c.Texts) == 0 {
			t.Errorf("call %d: %+v, want a conflict tool error with a text", i, c)
		}
	}
	out.expectSameSession(t)
	e.sb.expectSince(t, "create_ticket", before, 1, 1)
}

// TestMCPTypeScriptInProgress: two calls at once on one session with one key: one runs, the other
// is refused as in progress, and each answer reaches the call it belongs to. The tool waits for the
// test (slow_create's hold), which releases it once the gateway has refused the other call: the
// two always overlap.
func TestMCPTypeScriptInProgress(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	w := mcpWays[0]
	before := e.sb.mcpCounts(t, "slow_create")
	hold, refused := t.Name(), fmt.Sprintf(`idemgateway_decisions_total{decision="in_progress",tool=%q}`, w.route+"/slow_create")
	released := releaseOnceRefused(e, hold, refused, e.gw.metric(t, refused))
	out := e.gw.runTS(t, w, tsConfig{Tool: "slow_create", Arguments: map[string]any{"title": "Rotate the keys", "hold": hold},
		Key: "ts-in-progress", Times: 2, Parallel: true})
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	var tickets, refusals int
	for i, c := range out.Calls {
		switch {
		case c.ticket() != "":
			tickets++
		case c.IsError && c.decision() == "in_progress":
			refusals++
		default:
			t.Errorf("call %d: %+v, want a ticket or an in_progress refusal", i, c)
		}
	}
	if tickets != 1 || refusals != 1 {
		t.Errorf("%d tickets and %d in_progress refusals, want 1 and 1 (calls %+v)", tickets, refusals, out.Calls)
	}
	out.expectSameSession(t)
	e.sb.waitIdle(t)
	e.sb.expectSince(t, "slow_create", before, 1, 1)
}

// releaseOnceRefused releases the sandbox's hold once the gateway's series refused has risen above
// before (a duplicate was refused while the held call runs), or after holdTimeout, so that a held
// call ends whatever went wrong. It runs beside a call the test's goroutine waits for, and says
// what went wrong on its channel.
func releaseOnceRefused(e *env, hold, refused string, before float64) <-chan error {
	done := make(chan error, 1)
	go func() {
		var err error
		if !eventually.Within(holdTimeout, func() bool {
			var v float64
			v, err = e.gw.metricValue(refused)
			return err != nil || v > before
		}) {
			err = fmt.Errorf("%s stayed at %v for %s: no duplicate was refused while the call was held", refused, before, holdTimeout)
		}
		if rerr := e.sb.releaseHold(hold); err == nil {
			err = rerr
		}
		done <- err
	}()
	return done
}
