package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/testlog"
)

// Which tools of a kind: mcp route the gateway guards: the class the routes file gives a tool,
// else the one its server's annotations give (trust_annotations, discover_tools, the tool lists
// passing through), else the route's; and what unknown_tools: refuse does with the rest.

// TestMCPReadOnlyToolNeverStored: a tool the file classes read_only passes through with no key
// read and nothing stored, also when the client sends a key.
func TestMCPReadOnlyToolNeverStored(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
	for i := 1; i <= 2; i++ {
		if got, want := resultText(callTool(t, cs, "search_tickets", "k1", nil)), fmt.Sprintf("search %d", i); got != want {
			t.Errorf("call %d: %q, want %q", i, got, want)
		}
	}
	if len(decisions(tap)) != 0 {
		t.Errorf("decisions %v on a read_only tool, want none", decisions(tap))
	}
}

// TestMCPToolClassFromTrustedAnnotations: with discover_tools and trust_annotations, a tool the
// file does not configure gets the class its annotations give: the server's read-only tool is
// passed through unguarded; without trust, it is guarded with the route's class.
func TestMCPToolClassFromTrustedAnnotations(t *testing.T) {
	t.Parallel()
	for _, trust := range []bool{true, false} {
		t.Run(fmt.Sprint("trust=", trust), func(t *testing.T) {
			t.Parallel()
			up := newMCPUpstream(t, nil)
			yaml := strings.Replace(mcpRoutes(up.url, ""), "timeout: 10s}", fmt.Sprintf("timeout: 10s, mcp: {discover_tools: true, trust_annotations: %v}}", trust), 1)
			yaml = strings.Replace(yaml, "      search_tickets: {class: read_only}\n", "", 1)
			reg := gateway.NewRegistry()
			srv, _, _ := newGatewayYAML(t, openEmbedded, yaml, gateway.Options{Metrics: reg})
			eventually.True(t, "the gateway's listing of the tools", func() bool {
				return metricValue(t, reg, "idemgateway_mcp_tool_list_refreshes_total", "route", "tickets", "result", "ok") >= 1
			})
			cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
			callTool(t, cs, "search_tickets", "k1", nil)
			callTool(t, cs, "search_tickets", "k1", nil)
			want, calls := []string{"execute", "replay replayed"}, 1 // guarded as non_idempotent
			if trust {
				want, calls = nil, 2
			}
			if fmt.Sprint(decisions(tap)) != fmt.Sprint(want) || up.count("search_tickets") != calls {
				t.Errorf("decisions %v, tool calls %d; want %v and %d", decisions(tap), up.count("search_tickets"), want, calls)
			}
		})
	}
}

// TestMCPToolClassLearnedAndInvalidated: with trust_annotations (no discovery), the gateway learns
// the classes of tools/list answers passing through, and forgets them on
// notifications/tools/list_changed: an unconfigured tool is guarded, then passed through as the
// read_only tool its server lists, then guarded again once the list changed.
func TestMCPToolClassLearnedAndInvalidated(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	yaml := strings.Replace(mcpRoutes(up.url, ""), "timeout: 10s}", "timeout: 10s, mcp: {trust_annotations: true}}", 1)
	yaml = strings.Replace(yaml, "      search_tickets: {class: read_only}\n", "", 1)
	reg := gateway.NewRegistry()
	srv, _, _ := newGatewayYAML(t, openEmbedded, yaml, gateway.Options{Metrics: reg})
	cs, tap := connectMCP(t, srv.URL, "2025-11-25", nil)
	guarded := func(key string) bool {
		before := len(decisions(tap))
		callTool(t, cs, "search_tickets", key, nil)
		return len(decisions(tap)) > before
	}
	if !guarded("k1") {
		t.Fatal("search_tickets passed through before any tool list")
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := metricValue(t, reg, "idemgateway_mcp_tool_list_refreshes_total", "route", "tickets", "result", "learned"); n != 1 || guarded("k2") {
		t.Fatalf("after tools/list (%v learned): search_tickets still guarded", n)
	}
	up.server.AddTool(&mcp.Tool{Name: "new_tool", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	i := 0 // list_changed reaches the gateway on the session's GET stream
	eventually.True(t, "search_tickets to be guarded again after the tool list changed", func() bool {
		i++
		return guarded(fmt.Sprint("k-", i))
	})
}

// TestMCPDiscoveryFailureKeepsRouteClass: a server the gateway cannot list (not an MCP server)
// leaves every tool the file does not configure the route's class: the call is guarded, and the
// failure counted.
func TestMCPDiscoveryFailureKeepsRouteClass(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(upstream.Close)
	yaml := strings.Replace(mcpRoutes(upstream.URL, ""), "timeout: 10s}", "timeout: 10s, mcp: {discover_tools: true, trust_annotations: true}}", 1)
	reg := gateway.NewRegistry()
	srv, _, _ := newGatewayYAML(t, openEmbedded, yaml, gateway.Options{Metrics: reg})
	eventually.True(t, "the failed listing to be counted", func() bool {
		return metricValue(t, reg, "idemgateway_mcp_tool_list_refreshes_total", "route", "tickets", "result", "error") >= 1
	})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"archive_ticket","_meta":{"` + metaKey + `":"k1"}}}`
	if status, h, body := postRaw(t, srv.URL+"/mcp", call); h.Get("Idempotency-Decision") != "execute" || status != http.StatusNotFound {
		t.Errorf("%d %q %s: want the call guarded (execute), and the server's 404", status, h.Get("Idempotency-Decision"), body)
	}
}

// TestMCPWarnsOfConfiguredToolsNotListed: a tool the file configures that the server does not list
// (a typo) is named in a warning once the listing is in; a file whose tools the server all lists
// gets none.
func TestMCPWarnsOfConfiguredToolsNotListed(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	for _, tc := range []struct {
		name, typo string
	}{{"all listed", ""}, {"a typo", "create_tikcet"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			yaml := strings.Replace(mcpRoutes(up.url, ""), "timeout: 10s}", "timeout: 10s, mcp: {discover_tools: true}}", 1)
			if tc.typo != "" {
				yaml = strings.Replace(yaml, "      search_tickets:", "      "+tc.typo+": {class: idempotent}\n      search_tickets:", 1)
			}
			logs := &testlog.Buffer{}
			reg := gateway.NewRegistry()
			newGatewayYAML(t, openEmbedded, yaml, gateway.Options{Metrics: reg, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			eventually.True(t, "the listing to be counted", func() bool {
				return metricValue(t, reg, "idemgateway_mcp_tool_list_refreshes_total", "route", "tickets", "result", "ok") >= 1
			})
			var warned []any
			for _, l := range logLines(t, logs) {
				if l["level"] == "WARN" && strings.Contains(fmt.Sprint(l["msg"]), "not in the server's tools/list") {
					warned = append(warned, l["tools"])
				}
			}
			want := []any{}
			if tc.typo != "" {
				want = []any{[]any{tc.typo}}
			}
			if fmt.Sprint(warned) != fmt.Sprint(want) {
				t.Errorf("warnings of unlisted tools: %v, want %v", warned, want)
			}
		})
	}
}

// TestMCPUnknownToolsRefused: unknown_tools: refuse answers a call of a tool neither configured
// nor listed by the server with -32602 at HTTP 200, and the server never hears of it.
func TestMCPUnknownToolsRefused(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, "    unknown_tools: refuse\n"), gateway.Options{})
	cs, _ := connectMCP(t, srv.URL, "2025-11-25", nil)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	var werr *jsonrpc.Error
	if _, err := cs.CallTool(ctx, toolParams("failing_create", "k1", nil)); !errors.As(err, &werr) || werr.Code != -32602 {
		t.Errorf("unknown tool: %v, want -32602", err)
	}
	if n := up.count("failing_create"); n != 0 {
		t.Errorf("the tool ran %d times, want 0", n)
	}
	if id := structuredID(t, callTool(t, cs, "create_ticket", "k1", nil)); id != "T-1" { // a configured tool
		t.Errorf("configured tool: %s, want T-1", id)
	}
}
