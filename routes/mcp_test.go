package routes

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/canonical"
)

// toolCall is a tools/call of create_ticket as a client sends it.
const toolCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_ticket",` +
	`"arguments":{"title":"x","incident_id":"i-1","client_note":"n"},"_meta":{"progressToken":"p1"}}}`

// documentOf returns what rt's fingerprint keeps of body, sent as text/plain (the format, not the
// Content-Type, says how to read it).
func documentOf(t *testing.T, rt *Route, body string) string {
	t.Helper()
	doc, err := rt.Fingerprint.Document(&canonical.Request{
		Tool: rt.Name, Method: http.MethodPost, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(body),
	})
	if err != nil {
		t.Fatalf("%s: Document: %v", rt.Name, err)
	}
	return string(doc)
}

// TestParseMCPContract loads the example of docs/contract.md §7 and checks every value it sets,
// and the per-tool routes of its tools.
func TestParseMCPContract(t *testing.T) {
	t.Parallel()
	cfg, err := parseFile(t, "mcp.good.yml")
	if err != nil {
		t.Fatal(err)
	}
	up := cfg.Upstreams["tickets_mcp"]
	wantMCP := &UpstreamMCP{DiscoverTools: true, ToolsTTL: 5 * time.Minute, StreamIdleTimeout: 5 * time.Minute}
	if !reflect.DeepEqual(up.MCP, wantMCP) || up.Timeout != time.Minute {
		t.Errorf("upstream: MCP %+v, timeout %s; want %+v, 1m", up.MCP, up.Timeout, wantMCP)
	}

	rt := cfg.Routes[0]
	if rt.Name != "tickets" || rt.Kind != KindMCP || rt.Method != "" || rt.Path != "/mcp" || rt.Class != NonIdempotent || rt.Tool != nil {
		t.Errorf("route: %+v", rt)
	}
	wantKey := Key{Header: "Idempotency-Key", Meta: "io.github.idemgateway/idempotencyKey", Required: true}
	if !reflect.DeepEqual(rt.Key, wantKey) {
		t.Errorf("route key %+v, want %+v", rt.Key, wantKey)
	}
	m := rt.MCP
	if m.Refusal != RefuseToolError || m.Cancel != CancelFinish || m.UnknownTools != AllowUnknownTools || len(m.Tools) != 2 {
		t.Errorf("MCP: %+v", m)
	}

	create := m.Tools["create_ticket"]
	if create.Name != "tickets/create_ticket" || create.Kind != KindMCP || create.Method != http.MethodPost ||
		create.Path != "/mcp" || create.Class != NonIdempotent || create.Upstream != up || create.MCP != m {
		t.Errorf("create_ticket: %+v", create)
	}
	wantTool := &Tool{Route: "tickets", Name: "create_ticket", ClassSource: ToolClassConfig, ToolError: OutcomeNotCommitted}
	if !reflect.DeepEqual(create.Tool, wantTool) {
		t.Errorf("create_ticket: Tool %+v, want %+v", create.Tool, wantTool)
	}
	if k := create.Key; k.Header != "Idempotency-Key" || k.Meta != wantKey.Meta || !k.Required ||
		k.Derive.String() != "{tenant}:{body:/params/arguments/incident_id}" {
		t.Errorf("create_ticket: key %+v", k)
	}
	if got := create.Receipt.RemoteID.String(); got != "/result/structuredContent/id" {
		t.Errorf("create_ticket: receipt.remote_id %q", got)
	}
	const wantCreateDoc = `{"body":{"method":"tools/call","params":{"arguments":{"incident_id":"i-1","title":"x"},"name":"create_ticket"}},` +
		`"headers":{},"method":"POST","path":{},"query":{},"tool":"tickets/create_ticket"}`
	if got := documentOf(t, create, toolCall); got != wantCreateDoc {
		t.Errorf("create_ticket: document %s\nwant %s", got, wantCreateDoc)
	}

	search := m.Tools["search_tickets"]
	if search.Class != ReadOnly || search.Tool.ClassSource != ToolClassConfig || search.Name != "tickets/search_tickets" {
		t.Errorf("search_tickets: %+v, tool %+v", search, search.Tool)
	}
}
