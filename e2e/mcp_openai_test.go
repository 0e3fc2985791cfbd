package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// TestMCPOpenAIAgentsMetaKey: the OpenAI Agents SDK's MCP client puts what the host's
// toolMetaResolver returns in each call's _meta, so the host, not the model, hands the gateway the
// key. A call and its retry make one ticket, the retry replays it, other arguments under the key
// are a conflict whose text reaches the model's side, and a new key acts again.
func TestMCPOpenAIAgentsMetaKey(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	w := mcpWays[0]
	before := e.sb.mcpCounts(t, "create_ticket")
	var out struct {
		Calls []struct {
			Text  string `json:"text"`
			Error string `json:"error"`
		} `json:"calls"`
	}
	call := func(title, key string) map[string]any {
		return map[string]any{"args": map[string]any{"title": title}, "key": key}
	}
	runNode(t, "openai.mjs", map[string]any{"url": e.gw.Proxy + w.path, "tool": "create_ticket", "metaKey": metaKey, "calls": []any{
		call("Disk full on db-1", "openai-1"), call("Disk full on db-1", "openai-1"),
		call("Disk full on db-2", "openai-1"), call("Disk full on db-2", "openai-2"),
	}}, &out)
	if len(out.Calls) != 4 {
		t.Fatalf("calls %+v, want 4", out.Calls)
	}
	ticket := regexp.MustCompile(`T-\d+`)
	first, again, next := ticket.FindString(out.Calls[0].Text), ticket.FindString(out.Calls[1].Text), ticket.FindString(out.Calls[3].Text)
	if first == "" || again != first {
		t.Errorf("a call and its retry: %+v then %+v, want one ticket replayed", out.Calls[0], out.Calls[1])
	}
	if c := out.Calls[2]; !strings.Contains(c.Text+c.Error, "different arguments") {
		t.Errorf("other arguments under the key: %+v, want the conflict's text", c)
	}
	if next == "" || next == first {
		t.Errorf("a new key: %+v, want a new ticket", out.Calls[3])
	}
	e.sb.expectSince(t, "create_ticket", before, 2, 2)
}
