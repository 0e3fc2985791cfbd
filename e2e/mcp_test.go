package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// MCP tool calls through kind: mcp routes (docs/contract.md §7), with the official go-sdk client and
// server, in both protocol eras and with JSON and SSE answers. The sandbox counts the side effects.

// Routes of testdata/mcp.yaml.tmpl besides mcpWays.
var (
	rpcWay         = mcpWay{"jsonrpc-refusals", "/rpc/mcp-json", "tickets_rpc", "2025-11-25"}
	timeoutWay     = mcpWay{"timeout", "/timeout/mcp-json", "tickets_timeout", "2025-11-25"}
	annotationsWay = mcpWay{"annotations", "/annotations/mcp", "tickets_annotations", "2025-11-25"}
)

// forEachMCPStore runs test as a parallel subtest per store kind, each in an env of its own on the
// MCP routes.
func forEachMCPStore(t *testing.T, test func(t *testing.T, e *env)) {
	t.Helper()
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			test(t, newMCPEnv(t, kind))
		})
	}
}

// TestMCPRetryReplays: a retry with a new JSON-RPC id is replayed, with the retry's id (go-sdk
// drops an answer with another id), and the tool acts once. A change to an excluded argument
// (client_note) is the same call.
func TestMCPRetryReplays(t *testing.T) {
	t.Parallel()
	forEachMCPStore(t, func(t *testing.T, e *env) {
		forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
			before := e.sb.mcpCounts(t, "create_ticket")
			c := e.gw.mcpConnect(t, w, nil)
			key := "retry-" + w.name
			args := map[string]any{"title": "Disk full on db-1", "priority": "high", "client_note": "attempt 1"}

			id := expectTicket(t, c.mustCall(t, "create_ticket", args, key))
			first := c.expectDecisionHeaders(t, "execute")
			args["client_note"] = "attempt 2"
			if again := expectTicket(t, c.mustCall(t, "create_ticket", args, key)); again != id {
				t.Errorf("retry created or answered ticket %s, want the replay of %s", again, id)
			}
			replay := c.expectDecisionHeaders(t, "replay")
			if replay.Fingerprint != first.Fingerprint || replay.Fingerprint == "" {
				t.Errorf("Idempotency-Fingerprint %q on the replay, %q on the execution: want the same", replay.Fingerprint, first.Fingerprint)
			}
			// go-sdk accepts JSON and SSE: a replay is JSON (docs/contract.md §7, Replay).
			if mt, _, _ := mime.ParseMediaType(replay.ContentType); mt != "application/json" {
				t.Errorf("replay Content-Type %q, want application/json", replay.ContentType)
			}
			e.sb.expectSince(t, "create_ticket", before, 1, 1)
			rec := e.gw.mustRecord(t, w.route+"/create_ticket", key)
			if rec.State != "committed" || rec.RemoteID != id {
				t.Errorf("record state %q, remote id %q; want committed, %s", rec.State, rec.RemoteID, id)
			}
		})
	})
}

// TestMCPRetryNewSession: the scope of a key is never the session: a retry from a new session (or
// a new connection, when stateless) replays.
func TestMCPRetryNewSession(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "create_ticket")
		key := "new-session-" + w.name
		args := map[string]any{"title": "Checkout is down"}
		first := e.gw.mcpConnect(t, w, nil)
		id := expectTicket(t, first.mustCall(t, "create_ticket", args, key))
		if err := first.Close(); err != nil {
			t.Errorf("closing the first session: %v", err)
		}
		// In the sessions era, Close sends DELETE, which passes through to the server.
		deletes := first.tap.Deletes()
		if want := w.version != "2026-07-28"; want != (len(deletes) == 1 && deletes[0] < 300) {
			t.Errorf("DELETE statuses %v: want one 2xx in the sessions era, none when stateless", deletes)
		}

		second := e.gw.mcpConnect(t, w, nil)
		if w.version != "2026-07-28" && second.ID() == first.ID() {
			t.Fatalf("the second session has the first's id %q", first.ID())
		}
		if again := expectTicket(t, second.mustCall(t, "create_ticket", args, key)); again != id {
			t.Errorf("retry from a new session answered ticket %s, want the replay of %s", again, id)
		}
		second.expectDecisionHeaders(t, "replay")
		e.sb.expectSince(t, "create_ticket", before, 1, 1)
	})
}

// TestMCPConflict: the key reused with other arguments is a tool error the model can read, with the
// differing field; the upstream is not called; the session goes on, and the original call replays.
func TestMCPConflict(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "create_ticket")
		c := e.gw.mcpConnect(t, w, nil)
		key := "conflict-" + w.name
		id := expectTicket(t, c.mustCall(t, "create_ticket", map[string]any{"title": "Disk full on db-1"}, key))

		res := c.mustCall(t, "create_ticket", map[string]any{"title": "Disk full on db-2"}, key)
		m := expectRefusal(t, res, "conflict", false)
		c.expectDecisionHeaders(t, "conflict")
		// The text tells the model which key and which argument (docs/mcp.md#what-the-agent-gets).
		if text := strings.Join(texts(res), " "); !strings.Contains(text, key) || !strings.Contains(text, "/params/arguments/title") {
			t.Errorf("conflict text %q: want the key and the differing argument in it", text)
		}
		if m["key"] != key || m["tool"] != w.route+"/create_ticket" {
			t.Errorf("_meta key %v, tool %v; want %s, %s/create_ticket", m["key"], m["tool"], key, w.route)
		}
		if m["existingFingerprint"] == nil || m["existingFingerprint"] == m["receivedFingerprint"] {
			t.Errorf("_meta existingFingerprint %v, receivedFingerprint %v: want two different fingerprints", m["existingFingerprint"], m["receivedFingerprint"])
		}
		if fields, _ := m["differingFields"].([]any); !slices.Contains(fields, any("/params/arguments/title")) {
			t.Errorf("_meta differingFields %v, want /params/arguments/title among them", m["differingFields"])
		}
		if m["existingRemoteId"] != id {
			t.Errorf("_meta existingRemoteId %v, want %s", m["existingRemoteId"], id)
		}
		c.expectUsable(t)
		if again := expectTicket(t, c.mustCall(t, "create_ticket", map[string]any{"title": "Disk full on db-1"}, key)); again != id {
			t.Errorf("after the conflict, the original call answered %s, want the replay of %s", again, id)
		}
		e.sb.expectSince(t, "create_ticket", before, 1, 1)
	})
}

// TestMCPConflictJSONRPCError: with refusal: jsonrpc_error, a conflict is the JSON-RPC error
// -32010 with data.type idempotency_key_conflict, and the session goes on.
func TestMCPConflictJSONRPCError(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	before := e.sb.mcpCounts(t, "create_ticket")
	c := e.gw.mcpConnect(t, rpcWay, nil)
	expectTicket(t, c.mustCall(t, "create_ticket", map[string]any{"title": "Disk full on db-1"}, "conflict-rpc"))

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := c.call(ctx, "create_ticket", map[string]any{"title": "Disk full on db-2"}, "conflict-rpc")
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -32010 {
		t.Fatalf("error %v, want the JSON-RPC error -32010", err)
	}
	var data struct {
		Type            string   `json:"type"`
		DifferingFields []string `json:"differingFields"`
	}
	if err := json.Unmarshal(werr.Data, &data); err != nil || data.Type != "idempotency_key_conflict" {
		t.Errorf("error data %s (%v), want type idempotency_key_conflict", werr.Data, err)
	}
	c.expectDecisionHeaders(t, "conflict")
	c.expectUsable(t)
	e.sb.expectSince(t, "create_ticket", before, 1, 1)
}

// TestMCPConcurrentSessions: the same call from a second session while the first runs acts once:
// the second gets in_progress (concurrency: reject) and its session goes on; a retry once the first
// is done replays its ticket. The tool waits for the test (slow_create's hold), so the second call
// always arrives while the first runs.
func TestMCPConcurrentSessions(t *testing.T) {
	t.Parallel()
	forEachMCPStore(t, func(t *testing.T, e *env) {
		forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
			before := e.sb.mcpCounts(t, "slow_create")
			key, hold := "concurrent-"+w.name, t.Name()
			args := map[string]any{"title": "Rotate the keys", "hold": hold}
			first, second := e.gw.mcpConnect(t, w, nil), e.gw.mcpConnect(t, w, nil)
			done := first.goCall(t.Context(), "slow_create", args, key)
			e.sb.waitHeld(t, hold, 1) // the first call runs
			expectRefusal(t, second.mustCall(t, "slow_create", args, key), "in_progress", true)
			second.expectUsable(t)
			e.sb.release(t, hold)
			a := <-done
			if a.err != nil {
				t.Fatalf("the first call: %v", a.err)
			}
			id := expectTicket(t, a.res)
			e.sb.waitIdle(t)
			if again := expectTicket(t, second.mustCall(t, "slow_create", args, key)); again != id {
				t.Errorf("the retry answered %s, want the replay of %s", again, id)
			}
			e.sb.expectSince(t, "slow_create", before, 1, 1)
		})
	})
}

// TestMCPSlowToolClientDeadline: the client gives up on a slow tool under way (go-sdk sends
// notifications/cancelled in the sessions era, or closes the request); the gateway absorbs the
// cancel (the server never sees it: expectSince), lets the tool finish and stores the receipt: a
// retry meanwhile is in progress, a retry after it replays.
func TestMCPSlowToolClientDeadline(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "slow_create")
		c := e.gw.mcpConnect(t, w, nil)
		key, hold := "deadline-"+w.name, t.Name()
		args := map[string]any{"title": "Reindex the search cluster", "hold": hold} // runs until released

		ctx, cancel := context.WithCancel(t.Context())
		called := c.goCall(ctx, "slow_create", args, key)
		e.gw.waitState(t, w.route+"/slow_create", key, "in_progress") // then the client's deadline passes
		cancel()
		if a := <-called; a.err == nil {
			t.Fatal("slow_create (held) answered though the client gave up")
		}
		m := expectRefusal(t, c.mustCall(t, "slow_create", args, key), "in_progress", true) // concurrency: reject
		if ms, _ := m["retryAfterMs"].(float64); ms <= 0 {
			t.Errorf("_meta retryAfterMs %v, want a positive number", m["retryAfterMs"])
		}
		c.expectDecisionHeaders(t, "in_progress")
		c.expectUsable(t)
		e.sb.release(t, hold)
		e.gw.waitState(t, w.route+"/slow_create", key, "committed")
		id := expectTicket(t, c.mustCall(t, "slow_create", args, key))
		c.expectDecisionHeaders(t, "replay")
		if rec := e.gw.mustRecord(t, w.route+"/slow_create", key); rec.State != "committed" || rec.RemoteID != id {
			t.Errorf("record state %q, remote id %q; want committed, %s: the call must complete, not be cancelled", rec.State, rec.RemoteID, id)
		}
		e.sb.expectSince(t, "slow_create", before, 1, 1)
	})
}

// TestMCPReadOnlyNotStored: a read_only tool passes through: every call reaches the server, a key
// on it is ignored, nothing is stored, no decision is made.
func TestMCPReadOnlyNotStored(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "search_tickets")
		c := e.gw.mcpConnect(t, w, nil)
		key := "search-" + w.name
		for range 2 {
			if res := c.mustCall(t, "search_tickets", map[string]any{"query": "Disk"}, key); res.IsError {
				t.Errorf("search_tickets: a tool error %q", texts(res))
			}
			if d := c.lastAnswer(t).Decision; d != "" {
				t.Errorf("Idempotency-Decision %q on a read_only tool, want none", d)
			}
		}
		if res := c.mustCall(t, "search_tickets", map[string]any{"query": "Disk"}, ""); res.IsError {
			t.Errorf("search_tickets without a key: a tool error %q (a read_only tool needs no key)", texts(res))
		}
		if _, found := e.gw.Record(t, "default", w.route+"/search_tickets", key); found {
			t.Error("a record of a read_only tool")
		}
		e.sb.expectSince(t, "search_tickets", before, 0, 3)
	})
}

// TestC17_ProgressLiveNotReplayed (case C17, its first half): the tool's two progress
// notifications, 200 ms apart, reach the client while it works (on the call's SSE stream, or on
// the session's GET stream when the answers are JSON); the receipt is the result alone, and the
// retry gets it without the notifications. Up×1. The second half, a stream cut after its first
// event is outcome_unknown, is gateway.TestMCPStreamCutIsUnknown (the sandbox's server cannot cut
// its own stream).
func TestC17_ProgressLiveNotReplayed(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "progress_create")
		var (
			mu       sync.Mutex
			progress []float64
		)
		c := e.gw.mcpConnect(t, w, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				defer mu.Unlock()
				progress = append(progress, req.Params.Progress)
			},
		})
		key := "progress-" + w.name
		// The tool's answer waits on the sandbox's hold named key, after its notifications: the
		// notifications the client has before the hold is released came while the tool worked.
		call := func(token string) <-chan mcpAnswer {
			p := &mcp.CallToolParams{Name: "progress_create", Meta: mcp.Meta{metaKey: key},
				Arguments: map[string]any{"title": "Migrate the database", "steps": 2, "step_ms": 200, "hold": key}}
			p.SetProgressToken(token)
			done := make(chan mcpAnswer, 1)
			go func() {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				res, err := c.CallTool(ctx, p)
				done <- mcpAnswer{res, err}
			}()
			return done
		}
		seen := func() []float64 {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(progress)
		}

		answer := call("tok-1")
		e.sb.waitHeld(t, key, 1)
		eventually.True(t, "2 progress notifications while the tool works", func() bool { return len(seen()) >= 2 })
		if got := seen(); !slices.Equal(got, []float64{1, 2}) {
			t.Errorf("progress notifications %v, want [1 2]", got)
		}
		e.sb.release(t, key)
		a := <-answer
		if a.err != nil {
			t.Fatalf("progress_create: %v", a.err)
		}
		id := expectTicket(t, a.res)

		a = <-call("tok-2")
		if a.err != nil {
			t.Fatalf("the retry of progress_create: %v", a.err)
		}
		if again := expectTicket(t, a.res); again != id {
			t.Errorf("retry answered %s, want the replay of %s", again, id)
		}
		c.expectDecisionHeaders(t, "replay")
		// go-sdk hands each notification to the handler on a goroutine of its own: no event marks
		// that none is coming, so a window of wall time stands for it.
		time.Sleep(200 * time.Millisecond)
		if got := seen(); len(got) != 2 {
			t.Errorf("progress notifications %v after the replay, want the first call's 2 only", got)
		}
		e.sb.expectSince(t, "progress_create", before, 1, 1)
	})
}

// TestMCPToolErrorNotStored: an isError result is not committed (tool_error: not_committed): it
// passes through, nothing is stored, and a retry calls the tool again.
func TestMCPToolErrorNotStored(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "failing_create")
		c := e.gw.mcpConnect(t, w, nil)
		key := "failing-" + w.name
		for range 2 {
			res := c.mustCall(t, "failing_create", map[string]any{"title": "Printer on fire"}, key)
			if !res.IsError || res.Meta[metaIdempotency] != nil {
				t.Errorf("isError %v, _meta %v: want the tool's own error, passed through", res.IsError, res.Meta)
			}
			c.expectDecisionHeaders(t, "execute")
		}
		if rec, found := e.gw.Record(t, "default", w.route+"/failing_create", key); found {
			t.Errorf("a record in state %q after a tool error, want none", rec.State)
		}
		e.sb.expectSince(t, "failing_create", before, 0, 2)
	})
}

// TestMCPProtocolErrorUnknown: a JSON-RPC error after the effect (-32603) is an unknown outcome:
// the error reaches the client, the record stays outcome_unknown, and a retry is refused without
// calling the tool again.
func TestMCPProtocolErrorUnknown(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "broken_create")
		c := e.gw.mcpConnect(t, w, nil)
		key := "broken-" + w.name
		args := map[string]any{"title": "Printer on fire"}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, err := c.call(ctx, "broken_create", args, key)
		cancel()
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError {
			t.Fatalf("error %v, want the server's JSON-RPC error -32603", err)
		}
		e.gw.waitState(t, w.route+"/broken_create", key, "outcome_unknown")

		expectRefusal(t, c.mustCall(t, "broken_create", args, key), "outcome_unknown", false)
		c.expectDecisionHeaders(t, "outcome_unknown")
		c.expectUsable(t)
		e.sb.expectSince(t, "broken_create", before, 1, 1)
	})
}

// TestMCPUpstreamTimeout: the upstream's timeout (500 ms) ends a call whose tool goes on and acts:
// the outcome is unknown, and a retry is refused without calling the tool again.
func TestMCPUpstreamTimeout(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	before := e.sb.mcpCounts(t, "slow_create")
	c := e.gw.mcpConnect(t, timeoutWay, nil)
	key := "timeout-1"
	args := map[string]any{"title": "Rebuild the index", "ms": 1500}

	// The call was executed and its outcome is unknown: a tool error that says so (as HTTP's 504
	// with Idempotency-Decision: execute).
	expectRefusal(t, c.mustCall(t, "slow_create", args, key), "execute", false)
	c.expectDecisionHeaders(t, "execute")
	c.expectUsable(t)
	e.sb.waitIdle(t)
	e.gw.waitState(t, timeoutWay.route+"/slow_create", key, "outcome_unknown")
	expectRefusal(t, c.mustCall(t, "slow_create", args, key), "outcome_unknown", false)
	e.sb.expectSince(t, "slow_create", before, 1, 1)
}

// TestMCPKeyMissing: a guarded tool called without a key (key.required) is refused as a tool
// error; the upstream is not called and the session goes on.
func TestMCPKeyMissing(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "create_ticket")
		c := e.gw.mcpConnect(t, w, nil)
		expectRefusal(t, c.mustCall(t, "create_ticket", map[string]any{"title": "No key"}, ""), "rejected", false)
		c.expectUsable(t)
		e.sb.expectSince(t, "create_ticket", before, 0, 0)
	})
}

// TestMCPReplayAcrossEras: a receipt made under one protocol revision replays to a client of the
// other (docs/mcp.md#fronting-an-mcp-server): the sandbox's stateless endpoint also serves
// 2025-11-25 clients, so one route, one scope, sees both eras; the TypeScript client (2025-11-25)
// gets a 2026-07-28 receipt.
func TestMCPReplayAcrossEras(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	stateless := mcpWays[2]
	earlier := stateless
	earlier.name, earlier.version = "stateless-2025-11-25", "2025-11-25"
	for _, tc := range []struct {
		name          string
		first, second mcpWay
	}{
		{"2025-11-25 then 2026-07-28", earlier, stateless},
		{"2026-07-28 then 2025-11-25", stateless, earlier},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.sb.mcpCounts(t, "create_ticket")
			key := "eras-" + tc.first.version
			args := map[string]any{"title": "Disk full on db-1"}
			id := expectTicket(t, e.gw.mcpConnect(t, tc.first, nil).mustCall(t, "create_ticket", args, key))
			c := e.gw.mcpConnect(t, tc.second, nil)
			if again := expectTicket(t, c.mustCall(t, "create_ticket", args, key)); again != id {
				t.Errorf("the %s retry answered %s, want the replay of %s", tc.second.version, again, id)
			}
			c.expectDecisionHeaders(t, "replay")
			e.sb.expectSince(t, "create_ticket", before, 1, 1)
		})
	}
	t.Run("2026-07-28 then TypeScript", func(t *testing.T) {
		before := e.sb.mcpCounts(t, "create_ticket")
		args := map[string]any{"title": "Disk full on db-2"}
		id := expectTicket(t, e.gw.mcpConnect(t, stateless, nil).mustCall(t, "create_ticket", args, "eras-ts"))
		out := e.gw.runTS(t, stateless, tsConfig{Tool: "create_ticket", Arguments: args, Key: "eras-ts", Times: 1})
		if got := out.Calls[0].ticket(); got != id {
			t.Errorf("the TypeScript retry got %+v, want the replay of %s", out.Calls[0], id)
		}
		e.sb.expectSince(t, "create_ticket", before, 1, 1)
	})
}

// TestMCPTrustedAnnotations: on a route that trusts the server's annotations and configures no
// tool, a readOnlyHint tool passes through (no key needed, nothing stored) and the others are
// guarded with the route's class. The tools/list answer passing through teaches the gateway the
// classes (it also lists the tools itself; either way the classes are known after it).
func TestMCPTrustedAnnotations(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	search, create := e.sb.mcpCounts(t, "search_tickets"), e.sb.mcpCounts(t, "create_ticket")
	c := e.gw.mcpConnect(t, annotationsWay, nil)
	c.expectUsable(t) // a tools/list through the gateway

	for _, key := range []string{"", "ann-search", "ann-search"} {
		if res := c.mustCall(t, "search_tickets", map[string]any{"query": "Disk"}, key); res.IsError {
			t.Errorf("search_tickets (key %q): a tool error %q; want it passed through as read_only", key, texts(res))
		}
		if d := c.lastAnswer(t).Decision; d != "" {
			t.Errorf("Idempotency-Decision %q on a readOnlyHint tool, want none", d)
		}
	}
	if _, found := e.gw.Record(t, "default", annotationsWay.route+"/search_tickets", "ann-search"); found {
		t.Error("a record of a readOnlyHint tool")
	}
	e.sb.expectSince(t, "search_tickets", search, 0, 3)

	expectRefusal(t, c.mustCall(t, "create_ticket", map[string]any{"title": "Disk full"}, ""), "rejected", false)
	id := expectTicket(t, c.mustCall(t, "create_ticket", map[string]any{"title": "Disk full"}, "ann-create"))
	if again := expectTicket(t, c.mustCall(t, "create_ticket", map[string]any{"title": "Disk full"}, "ann-create")); again != id {
		t.Errorf("retry answered %s, want the replay of %s", again, id)
	}
	e.sb.expectSince(t, "create_ticket", create, 1, 1)
}
