package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestMCPAISDKKeyArgument: the AI SDK's MCP client (@ai-sdk/mcp) sends a tool call's name and
// arguments and nothing else. The tool list it hands the model declares the key argument
// (key.argument); the key the model fills in guards the call: a retry with the same
// key and arguments replays the first ticket (and says so in its _meta), other arguments under the
// key are a conflict the client reads as a tool error, and a new key acts again. The server never
// sees the argument. Each way of the MCP routes: sessions with SSE and JSON answers, stateless.
func TestMCPAISDKKeyArgument(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "create_ticket")
		key := "aisdk-" + w.name
		var out struct {
			Schema struct {
				Properties map[string]any `json:"properties"`
			} `json:"schema"`
			Calls []tsCall `json:"calls"`
		}
		runNode(t, "aisdk.mjs", map[string]any{"url": e.gw.Proxy + w.path, "tool": "create_ticket", "calls": []map[string]any{
			{"title": "Disk full on db-1", keyArgument: key},
			{"title": "Disk full on db-1", keyArgument: key},
			{"title": "Disk full on db-2", keyArgument: key},
			{"title": "Disk full on db-2", keyArgument: key + "-2"},
		}}, &out)
		if p, _ := out.Schema.Properties[keyArgument].(map[string]any); p == nil || !strings.Contains(fmt.Sprint(p["description"]), "Idempotency key") {
			t.Errorf("the schema the model gets: %+v, want %s declared and described", out.Schema, keyArgument)
		}
		if len(out.Calls) != 4 {
			t.Fatalf("calls %+v, want 4", out.Calls)
		}
		first, again, conflict, next := out.Calls[0], out.Calls[1], out.Calls[2], out.Calls[3]
		if first.ticket() == "" || again.ticket() != first.ticket() || again.decision() != "replay" {
			t.Errorf("first %+v, retry %+v: want one ticket, the retry a replay that says so", first, again)
		}
		if !conflict.IsError || conflict.decision() != "conflict" || !strings.Contains(strings.Join(conflict.Texts, " "), "different arguments") {
			t.Errorf("other arguments under the key: %+v, want a conflict the model can read", conflict)
		}
		if next.ticket() == "" || next.ticket() == first.ticket() {
			t.Errorf("a new key: %+v, want a new ticket", next)
		}
		e.sb.expectSince(t, "create_ticket", before, 2, 2)
	})
}

// keyArgument is the argument the MCP routes of the e2e tests read keys from
// (testdata/mcp.yaml.tmpl, key.argument).
const keyArgument = "idempotency_key"
