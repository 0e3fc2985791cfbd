package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// TestMCPGoClient: mark3labs/mcp-go's client, which a Go host uses beside the official SDK,
// sends its key in the two places it can set per call: a header (CallToolRequest.Header) and
// params._meta. Either way a call and its retry make one ticket, the retry replays it, other
// arguments under the key are a conflict the client reads as a tool error, and the session goes
// on serving. Each way of the MCP routes: sessions with SSE and JSON answers, stateless.
func TestMCPGoClient(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "create_ticket")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		// the way's revision, as a host pins it for its server
		c := startMCPGoClient(ctx, t, e.gw.Proxy+w.path, "idemgateway-e2e-mcpgo", w.version)
		call := func(place, key, title string) *mcpgo.CallToolResult {
			t.Helper()
			req := mcpgo.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = "create_ticket", map[string]any{"title": title}
			if place == "header" {
				req.Header = http.Header{"Idempotency-Key": {key}}
			} else {
				req.Params.Meta = &mcpgo.Meta{AdditionalFields: map[string]any{metaKey: key}}
			}
			res, err := c.CallTool(ctx, req)
			if err != nil {
				t.Fatalf("%s, key in the %s: %v", title, place, err)
			}
			return res
		}
		for _, place := range []string{"header", "meta"} {
			key := "mcpgo-" + place + "-" + w.name
			first, again := call(place, key, "Rotate the keys"), call(place, key, "Rotate the keys")
			id, replayed := mcpgoTicket(first), mcpgoTicket(again)
			if id == "" || replayed != id {
				t.Errorf("key in the %s: tickets %q then %q, want one ticket replayed", place, id, replayed)
			}
			conflict := call(place, key, "Rotate other keys")
			if text := mcpgoText(conflict); !conflict.IsError || !strings.Contains(text, "different arguments") {
				t.Errorf("key in the %s, other arguments: isError %v, %q; want a conflict the model can read", place, conflict.IsError, text)
			}
		}
		if _, err := c.ListTools(ctx, mcpgo.ListToolsRequest{}); err != nil {
			t.Errorf("the session after the refusals: %v", err)
		}
		e.sb.expectSince(t, "create_ticket", before, 2, 2)
	})
}

// mcpgoTicket is the ticket id of an mcp-go tool result that created (or replays) one.
func mcpgoTicket(res *mcpgo.CallToolResult) string {
	m, _ := res.StructuredContent.(map[string]any)
	id, _ := m["id"].(string)
	if res.IsError || !strings.HasPrefix(id, "T-") {
		return ""
	}
	return id
}

// mcpgoText is the text of an mcp-go tool result's content.
func mcpgoText(res *mcpgo.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// startMCPGoClient connects mark3labs/mcp-go's Streamable HTTP client to url and initializes it
// under the protocol revision version, as name; it is closed when t ends.
func startMCPGoClient(ctx context.Context, t *testing.T, url, name, version string) *mcpgoclient.Client {
	t.Helper()
	c, err := mcpgoclient.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ClientInfo = mcpgo.Implementation{Name: name, Version: "1"}
	init.Params.ProtocolVersion = version
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize %s: %v", url, err)
	}
	return c
}
