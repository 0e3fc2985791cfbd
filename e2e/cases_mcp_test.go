package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The field cases of MCP tool calls (docs/cases.md C16–C18): the built gateway in front of the
// sandbox's go-sdk MCP server, which counts the side effects.

// TestC16_RetryKeepsItsOwnID (case C16): a tools/call with id 7 executes; its retries, with id
// "retry-7b" and then 8, are replays whose id is the retry's own, byte for byte (a string stays a
// string, a number a number), with the same result. Up×1. The calls are sent as raw JSON-RPC, so
// that the ids are the test's, not a client library's.
func TestC16_RetryKeepsItsOwnID(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	w := mcpWays[2] // stateless: no session to open; the server answers as an SSE stream
	before := e.sb.mcpCounts(t, "create_ticket")
	var first json.RawMessage
	for i, c := range []struct{ id, decision string }{{`7`, "execute"}, {`"retry-7b"`, "replay"}, {`8`, "replay"}} {
		body := `{"jsonrpc":"2.0","id":` + c.id + `,"method":"tools/call","params":{"name":"create_ticket",` +
			`"arguments":{"title":"Printer on fire"},"_meta":{"` + metaKey + `":"c16"}}}`
		decision, msg := postToolCall(t, e.gw.Proxy+w.path, body)
		if decision != c.decision {
			t.Errorf("call %d (id %s): Idempotency-Decision %q, want %q", i, c.id, decision, c.decision)
		}
		if got := string(msg["id"]); got != c.id {
			t.Errorf("call %d: the answer's id is %s, want %s byte for byte", i, got, c.id)
		}
		if msg["result"] == nil || bytes.Contains(msg["result"], []byte(`"isError":true`)) {
			t.Fatalf("call %d: no result in the answer %v", i, msg)
		}
		if i == 0 {
			first = msg["result"]
		} else if _, stored := splitReplayMeta(t, msg["result"]); !bytes.Equal(stored, first) {
			t.Errorf("call %d: result %s, want the first call's %s", i, stored, first)
		}
	}
	e.sb.expectSince(t, "create_ticket", before, 1, 1)
}

// TestC29_ReplaySaysSoInBand (case C29): an agent reads a replayed tool result and must not take
// it for a fresh one. The replay's result._meta["io.github.idemgateway/idempotency"] says
// decision "replay", with the key, the tool, the remote id and the first execution's time;
// everything else is the first answer's result byte for byte. The first answer says nothing of
// the kind. Up×1.
func TestC29_ReplaySaysSoInBand(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	w := mcpWays[2]
	before := e.sb.mcpCounts(t, "create_ticket")
	start := time.Now().Add(-time.Second) // RFC 3339 keeps whole seconds
	body := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_ticket",` +
			`"arguments":{"title":"Invoice 7"},"_meta":{"` + metaKey + `":"c29"}}}`
	}
	_, first := postToolCall(t, e.gw.Proxy+w.path, body("1"))
	if bytes.Contains(first["result"], []byte(replayMetaName)) {
		t.Fatalf("the first answer %s carries the replay's _meta", first["result"])
	}
	decision, again := postToolCall(t, e.gw.Proxy+w.path, body("2"))
	meta, stored := splitReplayMeta(t, again["result"])
	if decision != "replay" || !bytes.Equal(stored, first["result"]) {
		t.Errorf("retry: decision %q, result %s; want a replay of %s", decision, stored, first["result"])
	}
	var firstResult struct {
		StructuredContent struct{ ID string } `json:"structuredContent"`
	}
	if err := json.Unmarshal(first["result"], &firstResult); err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339, meta.FirstExecutedAt)
	if meta.Decision != "replay" || meta.Key != "c29" || meta.Tool != "create_ticket" || meta.RemoteID != firstResult.StructuredContent.ID ||
		err != nil || at.Before(start) || at.After(time.Now()) || !strings.HasSuffix(meta.FirstExecutedAt, "Z") {
		t.Errorf("the replay's _meta %+v: want decision replay, key c29, tool create_ticket, remote id %s, first executed after %s (UTC)",
			meta, firstResult.StructuredContent.ID, start.UTC().Format(time.RFC3339))
	}
	e.sb.expectSince(t, "create_ticket", before, 1, 1)
}

// replayMetaName is the _meta member of the gateway's answers (docs/mcp.md "What the agent gets").
const replayMetaName = "io.github.idemgateway/idempotency"

// replayMeta is what a replay says of itself in its result's _meta.
type replayMeta struct {
	Decision, Key, Tool, RemoteID, FirstExecutedAt string
}

// splitReplayMeta reads a replayed result: the gateway's entry, which must be the first member
// of result._meta, and the result as stored, byte for byte (without the entry, and without a
// _meta the gateway added for it).
func splitReplayMeta(t *testing.T, result []byte) (replayMeta, []byte) {
	t.Helper()
	var meta replayMeta
	prefix := []byte(`{"_meta":{"` + replayMetaName + `":`)
	rest, ok := bytes.CutPrefix(result, prefix)
	dec := json.NewDecoder(bytes.NewReader(rest))
	if !ok || dec.Decode(&meta) != nil {
		t.Fatalf("the result %s does not start with the replay's _meta", result)
	}
	switch rest = rest[dec.InputOffset():]; {
	case bytes.HasPrefix(rest, []byte("},")): // a _meta the gateway added, before the result's first member
		return meta, append([]byte("{"), rest[2:]...)
	case bytes.HasPrefix(rest, []byte("}}")): // an empty result
		return meta, []byte("{}")
	case bytes.HasPrefix(rest, []byte(",")): // the server's own _meta
		return meta, append([]byte(`{"_meta":{`), rest[1:]...)
	}
	t.Fatalf("the result %s: no member after the replay's _meta", result)
	return meta, nil
}

// postToolCall POSTs body, a tools/call, to an MCP route as a 2025-11-25 client that accepts JSON
// and SSE answers, and returns the answer's Idempotency-Decision and its JSON-RPC response (the
// last event of an SSE answer), each member raw.
func postToolCall(t *testing.T, url, body string) (decision string, msg map[string]json.RawMessage) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s (%v)", url, resp.StatusCode, raw, err)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		var last []byte
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
				last = bytes.TrimSpace(data)
			}
		}
		raw = last
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("POST %s: the answer %q is no JSON-RPC message: %v", url, raw, err)
	}
	return resp.Header.Get("Idempotency-Decision"), msg
}

// TestC18_RetryOnANewSession (case C18): an agent runtime loses the answer to a tools/call on
// session A, starts session B (a new initialize, a new Mcp-Session-Id) and sends the call again
// under a new id: a replay under B's id, without A's session id, and B stays usable. The refusals
// B may meet, a conflict and an in-progress call, are answers it can read (tool errors at HTTP
// 200), after which B still works. Up×1 for each call.
func TestC18_RetryOnANewSession(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	for _, w := range mcpWays[:2] { // the sessions era: SSE and JSON answers
		t.Run(w.name, func(t *testing.T) {
			before, slowBefore := e.sb.mcpCounts(t, "create_ticket"), e.sb.mcpCounts(t, "slow_create")
			key := "c18-" + w.name
			args := map[string]any{"title": "Checkout is down"}
			a := e.gw.mcpConnect(t, w, nil)
			id := expectTicket(t, a.mustCall(t, "create_ticket", args, key))
			a.expectDecisionHeaders(t, "execute")
			if err := a.Close(); err != nil { // the runtime gives session A up
				t.Errorf("closing session A: %v", err)
			}

			b := e.gw.mcpConnect(t, w, nil)
			if b.ID() == "" || b.ID() == a.ID() {
				t.Fatalf("session B's id %q, A's %q: want a new session", b.ID(), a.ID())
			}
			if again := expectTicket(t, b.mustCall(t, "create_ticket", args, key)); again != id {
				t.Errorf("the retry on session B answered %s, want the replay of %s", again, id)
			}
			b.expectDecisionHeaders(t, "replay") // and no Mcp-Session-Id on the replay
			b.expectUsable(t)

			expectRefusal(t, b.mustCall(t, "create_ticket", map[string]any{"title": "Checkout is up"}, key), "conflict", false)
			b.expectUsable(t)

			// In progress: a call held by the sandbox until the test releases it, then its duplicate.
			slowKey, hold := "c18-slow-"+w.name, t.Name()
			slowArgs := map[string]any{"title": "Rotate the keys", "hold": hold}
			other := e.gw.mcpConnect(t, w, nil)
			done := other.goCall(t.Context(), "slow_create", slowArgs, slowKey)
			e.sb.waitHeld(t, hold, 1)
			expectRefusal(t, b.mustCall(t, "slow_create", slowArgs, slowKey), "in_progress", true)
			b.expectUsable(t)
			e.sb.release(t, hold)
			if a := <-done; a.err != nil {
				t.Errorf("the held call: %v", a.err)
			}
			e.sb.expectSince(t, "create_ticket", before, 1, 1)
			e.sb.waitIdle(t)
			e.sb.expectSince(t, "slow_create", slowBefore, 1, 1)
		})
	}
}

// TestC28_ConfirmationOutlivesTheUpstreamTimeout (case C28): the sandbox's confirm_create asks the
// user to confirm (elicitation/create) in the middle of the call, and the person answers a second
// later, after the route's 500ms upstream timeout: the call is still in flight, the accepted action
// happens once, and its result is the receipt a retry replays. Up×1. (An answer that comes after
// the call ended is refused and not relayed: gateway TestLateConfirmationNotRelayed.)
func TestC28_ConfirmationOutlivesTheUpstreamTimeout(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	w := mcpWay{"timeout-sse", "/timeout/mcp", "tickets_timeout_sse", "2025-11-25"}
	before := e.sb.mcpCounts(t, "confirm_create")
	c := e.gw.mcpConnect(t, w, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			// The person's time, in wall time past the route's timeout: only wall time shows that
			// the timeout does not run while the server waits on the client.
			select {
			case <-time.After(time.Second):
				return &mcp.ElicitResult{Action: "accept"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
	args := map[string]any{"title": "Restart the payment workers"}
	id := expectTicket(t, c.mustCall(t, "confirm_create", args, "c28"))
	if again := expectTicket(t, c.mustCall(t, "confirm_create", args, "c28")); again != id {
		t.Errorf("the retry answered %s, want the replay of %s", again, id)
	}
	e.sb.expectSince(t, "confirm_create", before, 1, 1)
}
