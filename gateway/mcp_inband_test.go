package gateway_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/deadaddr"
	"github.com/idemgateway/idemgateway/internal/eventually"
)

// What an agent reads in band (docs/mcp.md "What the agent gets"): a replay says it is one, an
// executed call the gateway answers itself says what became of it, and a retry that arrives while
// its call runs gets that call's answer.

// TestMCPReplaySaysSo: the replayed result carries
// _meta["io.github.idemgateway/idempotency"] with decision replay, the key, the tool as the call
// names it, the remote id and the first execution's time (the go-sdk client reads it as the
// result's Meta); the first answer carries none.
func TestMCPReplaySaysSo(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	cs, _ := connectMCP(t, srv.URL, "2025-11-25", nil)
	before := time.Now().Add(-time.Second)
	first := callTool(t, cs, "create_ticket", "k1", map[string]any{"title": "a"})
	again := callTool(t, cs, "create_ticket", "k1", map[string]any{"title": "a"})
	if _, ok := first.Meta[metaIdempotency]; ok {
		t.Errorf("the first answer's _meta %v says it is a replay", first.Meta)
	}
	m, _ := again.Meta[metaIdempotency].(map[string]any)
	at, err := time.Parse(time.RFC3339, stringOf(m["firstExecutedAt"]))
	if m["decision"] != "replay" || m["key"] != "k1" || m["tool"] != "create_ticket" || m["remoteId"] != structuredID(t, first) ||
		err != nil || at.Before(before) || at.After(time.Now()) || resultText(again) != resultText(first) {
		t.Errorf("the replay: %s, _meta %v; want the first answer, and decision replay, key k1, tool create_ticket, remote id %s, first executed since %s",
			resultText(again), again.Meta, structuredID(t, first), before.UTC().Format(time.RFC3339))
	}
}

// TestMCPUnsettledAnswerSaysTheOutcome: the gateway's own answer to an executed call says what
// became of it in _meta: not_committed when the server could not be reached (retryable), unknown
// when the call reached it and no complete answer came back.
func TestMCPUnsettledAnswerSaysTheOutcome(t *testing.T) {
	t.Parallel()
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(deadaddr.URL(t), "    refusal: jsonrpc_error\n"), gateway.Options{})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","_meta":{"` + metaKey + `":"k1"}}}`
	if _, h, body := postRaw(t, srv.URL+"/mcp", call); h.Get("Idempotency-Decision") != "execute" ||
		!strings.Contains(body, `"outcome":"not_committed"`) || !strings.Contains(body, `"retryable":true`) {
		t.Errorf("a server that cannot be reached: %s %s; want outcome not_committed", h.Get("Idempotency-Decision"), body)
	}
}

// metaIdempotency is the _meta member of the gateway's answers.
const metaIdempotency = "io.github.idemgateway/idempotency"

// stringOf is v when it is a string, else "".
func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// TestMCPRetryWhileRunningWaits: a kind: mcp route waits by default (concurrency: wait): an SDK
// that retries on its own while the first call still runs (a new JSON-RPC id, the same key)
// gets the first call's answer once it ends, not an "in progress" refusal it can do nothing with.
// The tool ran once.
func TestMCPRetryWhileRunningWaits(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	store := &claimCounter{Store: openEmbedded(t)}
	srv, _, _ := newGatewayOn(t, store, mcpRoutes(up.url, ""), gateway.Options{})
	cs, tap := connectMCP(t, srv.URL, "", nil)
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	call := func() <-chan answer {
		done := make(chan answer, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), toolParams("slow_create", "k1", nil))
			done <- answer{res, err}
		}()
		return done
	}
	first := call()
	up.awaitStarted(t)
	retry := call()
	// The retry claims, finds the call in progress, listens and reads the record again: it waits.
	eventually.True(t, "the retry waiting", func() bool { return store.claims.Load() == 3 })
	close(up.finish)
	a, b := <-first, <-retry
	if a.err != nil || b.err != nil || a.res.IsError || b.res.IsError || structuredID(t, b.res) != structuredID(t, a.res) {
		t.Fatalf("first %+v (%v), retry %+v (%v): want the first call's ticket for both", a.res, a.err, b.res, b.err)
	}
	if got := slices.Sorted(slices.Values(decisions(tap))); !slices.Equal(got, []string{"execute", "replay replayed"}) {
		t.Errorf("decisions %v, want an execute and the waiting retry's replay", got)
	}
	if n := up.count("slow_create"); n != 1 {
		t.Errorf("slow_create ran %d times, want 1", n)
	}
}
