package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestMCPLangChainKeys: LangChain's MCP adapters check a call's arguments against the listed
// schema before sending (the sandbox's tools allow no other property), and set a header only
// from a beforeToolCall hook. With the key argument declared in the tool list, a call carrying its
// key there passes LangChain's check; a key in a header set by the hook works too. Either way a
// call and its retry make one ticket, and other arguments under a key are a tool error whose text
// LangChain hands on.
func TestMCPLangChainKeys(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	w := mcpWays[0]
	before := e.sb.mcpCounts(t, "create_ticket")
	var out struct {
		Schema json.RawMessage `json:"schema"`
		Calls  []struct {
			Text  string `json:"text"`
			Error string `json:"error"`
		} `json:"calls"`
	}
	withArg := func(title, key string) map[string]any {
		return map[string]any{"args": map[string]any{"title": title, keyArgument: key}}
	}
	withHeader := map[string]any{"args": map[string]any{"title": "Printer on fire"}, "header": "Idempotency-Key", "key": "langchain-header"}
	runNode(t, "langchain.mjs", map[string]any{"url": e.gw.Proxy + w.path, "tool": "create_ticket", "calls": []any{
		withArg("Disk full on db-1", "langchain-arg"), withArg("Disk full on db-1", "langchain-arg"),
		withArg("Disk full on db-2", "langchain-arg"), withHeader, withHeader,
	}}, &out)
	if !strings.Contains(string(out.Schema), `"`+keyArgument+`"`) {
		t.Errorf("the schema LangChain checks: %s, want %s declared", out.Schema, keyArgument)
	}
	if len(out.Calls) != 5 {
		t.Fatalf("calls %+v, want 5", out.Calls)
	}
	ticket := regexp.MustCompile(`T-\d+`)
	first, again := ticket.FindString(out.Calls[0].Text), ticket.FindString(out.Calls[1].Text)
	if first == "" || again != first {
		t.Errorf("key as an argument: %+v then %+v, want one ticket replayed", out.Calls[0], out.Calls[1])
	}
	if c := out.Calls[2]; !strings.Contains(c.Error, "different arguments") {
		t.Errorf("other arguments under the key: %+v, want the conflict's text", c)
	}
	byHeader, replayed := ticket.FindString(out.Calls[3].Text), ticket.FindString(out.Calls[4].Text)
	if byHeader == "" || byHeader == first || replayed != byHeader {
		t.Errorf("key in a header: %+v then %+v, want a new ticket replayed", out.Calls[3], out.Calls[4])
	}
	e.sb.expectSince(t, "create_ticket", before, 2, 2)
}
