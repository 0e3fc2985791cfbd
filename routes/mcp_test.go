package routes

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
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
	off, err := Parse("t.yaml", []byte("upstreams: {m: {url: 'http://m'}}\nroutes: [{name: t, kind: mcp, upstream: m, path: /mcp, key: {meta: ''}}]\n"), nil)
	if err != nil || off.Routes[0].Key.Meta != "" {
		t.Errorf("key.meta: '' = %+v, %v; want no _meta key", off, err)
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
	wantTool := &Tool{Route: "tickets", Name: "create_ticket", Scope: record.NewToolScope("tickets/create_ticket"),
		ClassSource: ToolClassConfig, ToolError: OutcomeNotCommitted}
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

// mcpFile is a routes file with one kind: mcp route "t" on /mcp; %s is appended to the route,
// then more routes may follow.
const mcpFile = `upstreams:
  m: {url: 'http://m', mcp: {}}
  h: {url: 'http://h'}
routes:
  - name: t
    kind: mcp
    upstream: m
    path: /mcp
`

// TestParseMCPErrors checks every problem of kind: mcp settings, with its field path.
func TestParseMCPErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, route string
		want        []string
	}{
		{"kind", "  - {name: k, kind: grpc, upstream: h, method: GET, path: /k, class: read_only}", []string{
			`routes[1] "k": kind: "grpc": must be http or mcp`}},
		{"method", "    method: POST", []string{
			`routes[0] "t": method: a kind: mcp route serves POST, GET and DELETE; leave method out`}},
		{"upgrade", "    upgrade: websocket", []string{
			`routes[0] "t": upgrade: a kind: mcp route never upgrades`}},
		{"reconcile on the route", "    reconcile: {path: /x, found: /x}", []string{
			`routes[0] "t": reconcile: not served on kind: mcp routes: its lookup is a plain HTTP GET, and the upstream is an MCP server`}},
		{"reconcile on a tool", "    tools: {x: {reconcile: {path: /x, found: /x}}}", []string{
			`routes[0] "t": tools.x.reconcile: not served on kind: mcp routes: its lookup is a plain HTTP GET, and the upstream is an MCP server`}},
		{"key.from and key.derive on the route", "    key: {from: 'body:/params/arguments/k', derive: '{tenant}'}", []string{
			`routes[0] "t": key.from: set it per tool (tools.<name>.key.from): its pointer addresses one tool's arguments`,
			`routes[0] "t": key.derive: set it per tool (tools.<name>.key.derive): its fields address one tool's arguments`}},
		{"key.header and key.meta on a tool", "    tools: {x: {key: {header: K, meta: k}}}", []string{
			`routes[0] "t": tools.x.key.header: set it on the route: one header carries the key of every tool`,
			`routes[0] "t": tools.x.key.meta: set it on the route: one _meta member carries the key of every tool`}},
		{"key.meta on an http route", "  - {name: h, upstream: h, method: POST, path: /h, class: idempotent, key: {meta: k}}", []string{
			`routes[1] "h": key.meta: only a kind: mcp route reads params._meta`}},
		{"key.argument on an http route", "  - {name: h, upstream: h, method: POST, path: /h, class: idempotent, key: {argument: k}}", []string{
			`routes[1] "h": key.argument: only a kind: mcp route reads a tool's arguments`}},
		{"key.argument not printable", "    key: {argument: \"k\\u00e9\"}", []string{
			`routes[0] "t": key.argument: "ké": byte 1 is not printable ASCII: an argument's name is 1 to 255 bytes of printable ASCII`}},
		{"replay_meta on an http route", "  - {name: h, upstream: h, method: POST, path: /h, class: idempotent, replay_meta: false}", []string{
			`routes[1] "h": replay_meta: only a kind: mcp route has it`}},
		{"key.meta malformed", "    key: {meta: 'io.github.x/'}", []string{
			`routes[0] "t": key.meta: "io.github.x/": not an MCP _meta key: want an optional prefix of dot-separated labels and "/" (io.github.idemgateway/), then letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"key.meta reserved", "    key: {meta: 'io.modelcontextprotocol/key'}", []string{
			`routes[0] "t": key.meta: "io.modelcontextprotocol/key": the prefix is reserved for MCP itself`}},
		{"key.derive on a tool", "    tools: {x: {key: {derive: '{body:params}'}}}", []string{
			`routes[0] "t": tools.x.key.derive: "{body:params}": field {body:params}: "params": JSON Pointer must start with "/"`}},
		{"pointers outside the JSON-RPC request", "    tools: {x: {fingerprint: {body: {include: [/arguments/title], exclude: [/params/arguments/note]}}, receipt: {remote_id: /structuredContent/id}}}", []string{
			`routes[0] "t": tools.x.fingerprint.body.include: "/arguments/title": a JSON-RPC request's pointers start with /params (e.g. /params/arguments/title) or /method`,
			`routes[0] "t": tools.x.receipt.remote_id: "/structuredContent/id": it addresses the final JSON-RPC message; start it with /result (e.g. /result/structuredContent/id) or /error`}},
		{"fingerprint format", "    fingerprint: {body: {format: json}}\n    tools: {x: {fingerprint: {body: {format: graphql}}}}", []string{
			`routes[0] "t": fingerprint.body.format: "json": a kind: mcp route fingerprints JSON-RPC requests; want jsonrpc, or leave it out`,
			`routes[0] "t": tools.x.fingerprint.body.format: "graphql": a kind: mcp route fingerprints JSON-RPC requests; want jsonrpc, or leave it out`}},
		{"fingerprint pointer of a tool", "    tools: {x: {fingerprint: {body: {exclude: [params]}}}}", []string{
			`routes[0] "t": tools.x.fingerprint.body.exclude[0]: "params": JSON Pointer must start with "/"`}},
		{"refusal, cancel, unknown_tools", "    refusal: problem\n    cancel: abort\n    unknown_tools: ignore", []string{
			`routes[0] "t": refusal: "problem": must be tool_error or jsonrpc_error`,
			`routes[0] "t": cancel: "abort": must be finish or forward`,
			`routes[0] "t": unknown_tools: "ignore": must be allow or refuse`}},
		{"unknown_tools: refuse without tools", "    unknown_tools: refuse", []string{
			`routes[0] "t": unknown_tools: refuse without tools refuses every tools/call; configure the tools, or allow`}},
		{"tool names", "    tools: {'bad name': {}, '': {}, ok: {}}", []string{
			`routes[0] "t": tools: "": empty tool name`,
			`routes[0] "t": tools: "bad name": byte 3 of the tool name is not a letter, digit, '_', '-', '.' or '/'`}},
		{"tool field under a bad name", "    tools: {'a b': {ttl: 0s}}", []string{
			`routes[0] "t": tools: "a b": byte 1 of the tool name is not a letter, digit, '_', '-', '.' or '/'`,
			`routes[0] "t": tools["a b"].ttl: 0s: must be positive`}},
		{"tool class", "    tools: {x: {class: safe}}", []string{
			`routes[0] "t": tools.x.class: "safe": must be read_only, idempotent or non_idempotent`}},
		{"route class", "    class: safe", []string{
			`routes[0] "t": class: "safe": must be read_only, idempotent or non_idempotent`}},
		{"read_only tool", "    tools: {x: {class: read_only, key: {required: true}, ttl: 1h, tool_error: committed, error_codes: {committed: [1]}}}", []string{
			`routes[0] "t": tools.x.key: meaningless on a read_only tool, which never touches the store`,
			`routes[0] "t": tools.x.ttl: meaningless on a read_only tool, which never touches the store`,
			`routes[0] "t": tools.x.tool_error: meaningless on a read_only tool, which never touches the store`,
			`routes[0] "t": tools.x.error_codes: meaningless on a read_only tool, which never touches the store`}},
		{"tool_error", "    tools: {x: {tool_error: maybe}}", []string{
			`routes[0] "t": tools.x.tool_error: "maybe": must be committed, not_committed or unknown`}},
		{"error_codes", "    tools: {x: {error_codes: {committed: [-32603, -32603], unknown: [-32603]}}}", []string{
			`routes[0] "t": tools.x.error_codes.committed[1]: -32603: listed twice`,
			`routes[0] "t": tools.x.error_codes.unknown[0]: -32603: also in error_codes.committed; a code may stand in one list only`}},
		{"tool settings", "    tools: {x: {ttl: 0s, concurrency: queue, on_unknown_outcome: ignore, outcome: {committed: [99]}, receipt: {remote_id: id}}}", []string{
			`routes[0] "t": tools.x.ttl: 0s: must be positive`,
			`routes[0] "t": tools.x.concurrency: "queue": must be reject or wait`,
			`routes[0] "t": tools.x.receipt.remote_id: "id": JSON Pointer must start with "/"`,
			`routes[0] "t": tools.x.on_unknown_outcome: "ignore": must be block or release`,
			`routes[0] "t": tools.x.outcome.committed[0]: 99: must be a status code from 200 to 599`}},
		{"mcp fields on an http route", "  - {name: h, upstream: h, method: POST, path: /h, class: idempotent, refusal: tool_error, cancel: finish, unknown_tools: allow, tools: {}}", []string{
			`routes[1] "h": refusal: only a kind: mcp route has it`,
			`routes[1] "h": cancel: only a kind: mcp route has it`,
			`routes[1] "h": unknown_tools: only a kind: mcp route has it`,
			`routes[1] "h": tools: only a kind: mcp route has it`}},
		{"http route on an MCP upstream", "  - {name: h, upstream: m, method: POST, path: /h, class: idempotent}", []string{
			`routes[1] "h": upstream: "m" is an MCP server (upstreams.m.mcp): only a kind: mcp route may use it`}},
		{"GET on the MCP path", "  - {name: g, upstream: h, method: GET, path: /mcp, class: read_only}", []string{
			`routes[1] "g": path: GET /mcp is already routed by routes[0] "t"`}},
		{"two MCP routes on one path", "  - {name: u, kind: mcp, upstream: m, path: /mcp}", []string{
			`routes[1] "u": path: POST /mcp is already routed by routes[0] "t"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", []byte(mcpFile+tt.route+"\n"), nil)
			var want []string
			for _, w := range tt.want {
				want = append(want, "t.yaml: "+w)
			}
			if err == nil || !slices.Equal(strings.Split(err.Error(), "\n"), want) {
				t.Errorf("Parse: %v\nwant:\n%s", err, strings.Join(want, "\n"))
			}
		})
	}
}

// TestParseMCPUpstreamErrors checks the settings of upstreams.*.mcp, and that strict decoding
// refuses the fields a tool cannot have.
func TestParseMCPUpstreamErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, file, want string }{
		{"durations", "upstreams: {m: {url: 'http://m', mcp: {tools_ttl: 0s, stream_idle_timeout: -1s}}}\n" +
			"routes: [{name: t, kind: mcp, upstream: m, path: /mcp}]\n",
			"t.yaml: upstreams.m.mcp.tools_ttl: 0s: must be positive\n" +
				"t.yaml: upstreams.m.mcp.stream_idle_timeout: -1s: must be positive"},
		{"unknown upstream mcp field", "upstreams: {m: {url: 'http://m', mcp: {discover: true}}}\n" +
			"routes: [{name: t, kind: mcp, upstream: m, path: /mcp}]\n",
			`t.yaml:1: unknown field "discover"`},
		{"route field on a tool", "upstreams: {m: {url: 'http://m'}}\n" +
			"routes: [{name: t, kind: mcp, upstream: m, path: /mcp, tools: {x: {path: /x}}}]\n",
			`t.yaml:2: unknown field "path"`},
		{"tool field on a route", "upstreams: {m: {url: 'http://m'}}\n" +
			"routes: [{name: t, kind: mcp, upstream: m, path: /mcp, tool_error: unknown}]\n",
			`t.yaml:2: unknown field "tool_error"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", []byte(tt.file), nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse: %v\nwant: %s", err, tt.want)
			}
		})
	}
}

// TestMCPConcurrencyDefault: a kind: mcp route waits unless the file says otherwise; a
// concurrency the defaults block sets applies to it as to every route; a kind: http route rejects.
func TestMCPConcurrencyDefault(t *testing.T) {
	t.Parallel()
	routesOf := "upstreams: {m: {url: 'http://m'}}\n%sroutes: [{name: t, kind: mcp, upstream: m, path: /mcp}, {name: h, upstream: m, method: POST, path: /h, class: non_idempotent}]\n"
	for _, c := range []struct {
		defaults  string
		mcp, http Concurrency
	}{{"", Wait, Reject}, {"defaults: {concurrency: reject}\n", Reject, Reject}, {"defaults: {concurrency: wait}\n", Wait, Wait}} {
		cfg, err := Parse("t.yaml", []byte(fmt.Sprintf(routesOf, c.defaults)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, tool, http := cfg.Routes[0].Concurrency, cfg.Routes[0].MCP.Tool("x", "").Concurrency, cfg.Routes[1].Concurrency; got != c.mcp || tool != c.mcp || http != c.http {
			t.Errorf("defaults %q: mcp route %q, its tool %q, http route %q; want %q, %q, %q", c.defaults, got, tool, http, c.mcp, c.mcp, c.http)
		}
	}
}

// TestParseMCPDefaults checks what a kind: mcp route that sets nothing gets.
func TestParseMCPDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("t.yaml", []byte("upstreams: {m: {url: 'http://m'}}\nroutes: [{name: t, kind: mcp, upstream: m, path: /mcp}]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := cfg.Routes[0]
	wantUp := &UpstreamMCP{ToolsTTL: DefaultToolsTTL, StreamIdleTimeout: DefaultStreamIdleTimeout}
	if !reflect.DeepEqual(rt.Upstream.MCP, wantUp) {
		t.Errorf("upstream MCP %+v, want %+v", rt.Upstream.MCP, wantUp)
	}
	if rt.Kind != KindMCP || rt.Method != "" || rt.Class != NonIdempotent || rt.OnUnknownOutcome != Block ||
		!reflect.DeepEqual(rt.Key, Key{Header: DefaultKeyHeader, Meta: DefaultKeyMeta, Required: true}) || rt.TTL != DefaultTTL ||
		rt.Concurrency != Wait {
		t.Errorf("route %+v", rt)
	}
	m := rt.MCP
	if m.Refusal != RefuseToolError || m.Cancel != CancelFinish || m.UnknownTools != AllowUnknownTools || len(m.Tools) != 0 || !m.ReplayMeta {
		t.Errorf("MCP %+v", m)
	}
	tool := m.Tool("create_ticket", "")
	if tool.Concurrency != Wait {
		t.Errorf("a tool's concurrency %q, want the route's wait", tool.Concurrency)
	}
	wantTool := &Tool{Route: "t", Name: "create_ticket", Scope: record.NewToolScope("t/create_ticket"), ToolError: OutcomeNotCommitted}
	if tool.Class != NonIdempotent || !reflect.DeepEqual(tool.Tool, wantTool) || tool.Name != "t/create_ticket" ||
		tool.Method != http.MethodPost || tool.Path != "/mcp" || tool.MCP != m {
		t.Errorf("tool %+v, Tool %+v", tool, tool.Tool)
	}
	// The default format is jsonrpc: the id and _meta do not count.
	const wantDoc = `{"body":{"method":"tools/call","params":{"arguments":{"client_note":"n","incident_id":"i-1","title":"x"},"name":"create_ticket"}},` +
		`"headers":{},"method":"POST","path":{},"query":{},"tool":"t/create_ticket"}`
	if got := documentOf(t, tool, toolCall); got != wantDoc {
		t.Errorf("document %s\nwant %s", got, wantDoc)
	}
	// A kind: http route stays kind http, and its upstream has no MCP.
	cfg, err = Parse("t.yaml", []byte("upstreams: {h: {url: 'http://h'}}\nroutes: [{name: a, upstream: h, method: POST, path: /, class: idempotent}]\n"), nil)
	if err != nil || cfg.Routes[0].Kind != KindHTTP || cfg.Routes[0].MCP != nil || cfg.Upstreams["h"].MCP != nil {
		t.Errorf("http route: %v, %+v", err, cfg)
	}
}

// inheritFile sets effect settings on the defaults block, on a kind: mcp route and on its tools.
const inheritFile = `upstreams:
  m: {url: 'http://m', forward_key: X-Gateway-Key}
defaults: {ttl: 2h, tenant_header: X-Org}
routes:
  - name: t
    kind: mcp
    upstream: m
    path: /mcp/{team}
    opaque_path_params: [team]
    class: idempotent
    key: {header: X-Key, meta: io.github.idemgateway/idempotencyKey}
    fingerprint: {body: {exclude: [/params/arguments/note]}}
    receipt: {remote_id: /result/structuredContent/id}
    lock_lease: 20s
    concurrency: wait
    scope: {credential: true}
    outcome: {committed: [402]}
    tools:
      plain: {}
      own:
        class: non_idempotent
        key: {from: 'body:/params/arguments/request_id', required: false}
        fingerprint: {body: {include: [/params/arguments/title]}}
        receipt: {remote_url: /result/structuredContent/url}
        ttl: 1h
        concurrency: reject
        on_unknown_outcome: release
        outcome: {unknown: [500]}
        scope: {credential: false}
        max_body_bytes: 4096
        tool_error: unknown
        error_codes: {committed: [-32603]}
      blocked: {class: non_idempotent}
`

// TestMCPToolInherits checks that a tool's route takes each effect setting from the tool where it
// is set, else from the route, and the defaults that depend on the class from its own class.
func TestMCPToolInherits(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("t.yaml", []byte(inheritFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := cfg.Routes[0]
	m := rt.MCP
	up := cfg.Upstreams["m"]
	meta := "io.github.idemgateway/idempotencyKey"
	remoteID := mustPointer(t, "/result/structuredContent/id")
	tests := []struct {
		name string
		got  *Route
		want Route
	}{
		{"configured, nothing set", m.Tools["plain"], Route{
			Name: "t/plain", Kind: KindMCP, MCP: m, Upstream: up, Method: http.MethodPost, Path: "/mcp/{team}",
			OpaquePathParams: []string{"team"}, Class: Idempotent,
			Tool: &Tool{Route: "t", Name: "plain", Scope: record.NewToolScope("t/plain"), ToolError: OutcomeNotCommitted},
			Key:  Key{Header: "X-Key", Meta: meta}, Receipt: Receipt{RemoteID: remoteID},
			OnUnknownOutcome: Release, Outcome: Outcome{Committed: []int{402}},
			UnknownTTL: DefaultUnknownTTL,
			TTL:        2 * time.Hour, LockLease: 20 * time.Second, Concurrency: Wait, WaitTimeout: DefaultWaitTimeout,
			TenantHeader: "X-Org", ActorHeader: DefaultActorHeader, MaxBodyBytes: DefaultMaxBodyBytes,
			Scope: Scope{CredentialHeader: "Authorization"},
		}},
		{"configured, everything set", m.Tools["own"], Route{
			Name: "t/own", Kind: KindMCP, MCP: m, Upstream: up, Method: http.MethodPost, Path: "/mcp/{team}",
			OpaquePathParams: []string{"team"}, Class: NonIdempotent,
			Tool: &Tool{Route: "t", Name: "own", Scope: record.NewToolScope("t/own"), ClassSource: ToolClassConfig, ToolError: OutcomeUnknown,
				ErrorCodes: Outcome{Committed: []int{-32603}}},
			Key: Key{Header: "X-Key", Meta: meta, Required: false, From: KeySource{Source: SourceBody,
				Name: "/params/arguments/request_id", Pointer: mustPointer(t, "/params/arguments/request_id")}},
			Receipt:          Receipt{RemoteURL: mustPointer(t, "/result/structuredContent/url")},
			OnUnknownOutcome: Release, Outcome: Outcome{Unknown: []int{500}},
			UnknownTTL: DefaultUnknownTTL,
			TTL:        time.Hour, LockLease: 20 * time.Second, Concurrency: Reject, WaitTimeout: DefaultWaitTimeout,
			TenantHeader: "X-Org", ActorHeader: DefaultActorHeader, MaxBodyBytes: 4096,
		}},
		{"non_idempotent by the file: its class's defaults", m.Tools["blocked"], Route{
			Name: "t/blocked", Kind: KindMCP, MCP: m, Upstream: up, Method: http.MethodPost, Path: "/mcp/{team}",
			OpaquePathParams: []string{"team"}, Class: NonIdempotent,
			Tool: &Tool{Route: "t", Name: "blocked", Scope: record.NewToolScope("t/blocked"), ClassSource: ToolClassConfig, ToolError: OutcomeNotCommitted},
			Key:  Key{Header: "X-Key", Meta: meta, Required: true}, Receipt: Receipt{RemoteID: remoteID},
			OnUnknownOutcome: Release, // the upstream has a forward_key
			Outcome:          Outcome{Committed: []int{402}},
			UnknownTTL:       DefaultUnknownTTL,
			TTL:              2 * time.Hour, LockLease: 20 * time.Second, Concurrency: Wait, WaitTimeout: DefaultWaitTimeout,
			TenantHeader: "X-Org", ActorHeader: DefaultActorHeader, MaxBodyBytes: DefaultMaxBodyBytes,
			Scope: Scope{CredentialHeader: "Authorization"},
		}},
		{"not configured, class given", m.Tool("other", NonIdempotent), Route{
			Name: "t/other", Kind: KindMCP, MCP: m, Upstream: up, Method: http.MethodPost, Path: "/mcp/{team}",
			OpaquePathParams: []string{"team"}, Class: NonIdempotent,
			Tool: &Tool{Route: "t", Name: "other", Scope: record.NewToolScope("t/other"), ToolError: OutcomeNotCommitted},
			Key:  Key{Header: "X-Key", Meta: meta, Required: true}, Receipt: Receipt{RemoteID: remoteID},
			OnUnknownOutcome: Release, Outcome: Outcome{Committed: []int{402}},
			UnknownTTL: DefaultUnknownTTL,
			TTL:        2 * time.Hour, LockLease: 20 * time.Second, Concurrency: Wait, WaitTimeout: DefaultWaitTimeout,
			TenantHeader: "X-Org", ActorHeader: DefaultActorHeader, MaxBodyBytes: DefaultMaxBodyBytes,
			Scope: Scope{CredentialHeader: "Authorization"},
		}},
	}
	for _, tt := range tests {
		if tt.got.Fingerprint == nil {
			t.Errorf("%s: nil Fingerprint", tt.name)
			continue
		}
		got := *tt.got
		got.Fingerprint = nil
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}

	// The route's fingerprint, unless the tool has its own.
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"title":"a","note":"n"}}}`
	if rt.Fingerprint != m.Tools["plain"].Fingerprint {
		t.Error("plain: not the route's fingerprint")
	}
	if got, want := documentOf(t, m.Tools["own"], body), `{"body":{"/params/arguments/title":"a"},"headers":{},"method":"POST","path":{},"query":{},"tool":"t/own"}`; got != want {
		t.Errorf("own: document %s, want %s", got, want)
	}
}

// TestMCPToolCache checks that Tool builds one route per (tool, class), also under concurrent
// calls, and that a class the file sets wins over the caller's.
func TestMCPToolCache(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("t.yaml", []byte(inheritFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Routes[0].MCP
	if m.Tool("plain", "") != m.Tools["plain"] || m.Tool("plain", Idempotent) != m.Tools["plain"] {
		t.Error("plain: Tool with the route's class is not Tools[plain]")
	}
	if m.Tool("own", ReadOnly) != m.Tools["own"] || m.Tool("own", "") != m.Tools["own"] {
		t.Error("own: the class the file sets does not win")
	}
	if ro := m.Tool("plain", ReadOnly); ro == m.Tools["plain"] || ro.Class != ReadOnly || ro.Tool.ClassSource != "" {
		t.Errorf("plain as read_only: %+v", ro)
	}

	const workers = 8
	got := make([][3]*Route, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			got[w] = [3]*Route{m.Tool("new", ""), m.Tool("new", NonIdempotent), m.Tool("plain", ReadOnly)}
		})
	}
	wg.Wait()
	for w := range workers {
		if got[w] != got[0] {
			t.Fatalf("worker %d got other routes: %p, want %p", w, got[w], got[0])
		}
	}
	if a, b := got[0][0], got[0][1]; a == b || a.Class != Idempotent || b.Class != NonIdempotent || a.Name != "t/new" {
		t.Errorf("new: %+v and %+v", a, b)
	}
}

func TestCheckToolName(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"create_ticket", ""},
		{"github/issues.create-v2", ""},
		{strings.Repeat("a", MaxNameBytes), ""},
		{"", "empty tool name"},
		{strings.Repeat("a", MaxNameBytes+1), "tool name of 129 bytes, longer than 128"},
		{"two words", "byte 3 of the tool name is not a letter, digit, '_', '-', '.' or '/'"},
		{"a,b", "byte 1 of the tool name is not a letter, digit, '_', '-', '.' or '/'"},
		{"nul\x00", "byte 3 of the tool name is not a letter, digit, '_', '-', '.' or '/'"},
		{"é", "byte 0 of the tool name is not a letter, digit, '_', '-', '.' or '/'"},
		{"a:b", "byte 1 of the tool name is not a letter, digit, '_', '-', '.' or '/'"},
	}
	for _, tt := range tests {
		var got string
		if err := CheckToolName(tt.name); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("CheckToolName(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestMCPToolCacheBound checks that tool names from requests cannot grow the cache without
// bound, and that Tool still answers past it.
func TestMCPToolCacheBound(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("t.yaml", []byte(inheritFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Routes[0].MCP
	for i := range maxCachedTools + 10 {
		m.Tool(fmt.Sprintf("tool%d", i), "")
	}
	if n := len(m.cache); n != len(m.specs)+maxCachedTools {
		t.Errorf("cache holds %d routes, want %d", n, len(m.specs)+maxCachedTools)
	}
	a, b := m.Tool("late", ""), m.Tool("late", "")
	if a == b || !reflect.DeepEqual(a, b) || a.Name != "t/late" {
		t.Errorf("past the bound: %p %p, want two equal routes", a, b)
	}
	if m.Tool("plain", "") != m.Tools["plain"] {
		t.Error("a configured tool left the cache")
	}
}
