package routes

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/idemgateway/idemgateway/record"
)

// MCPMethods are the HTTP methods a kind: mcp route serves on its path (MCP Streamable HTTP:
// POST carries the messages, GET opens a stream, DELETE ends a session).
var MCPMethods = []string{http.MethodPost, http.MethodGet, http.MethodDelete}

// Methods are the HTTP methods rt serves on its path: its Method, or MCPMethods on a kind: mcp
// route.
func (rt *Route) Methods() []string {
	if rt.Kind == KindMCP && rt.Tool == nil {
		return MCPMethods
	}
	return []string{rt.Method}
}

// ToolRoute is the route the calls of the tool named tool run under on rt, a route of many tools
// (kind: mcp: MCP.Tool, with the class the file gives the tool, else the route's); nil on a route
// of one tool, or for a name CheckToolName refuses.
func (rt *Route) ToolRoute(tool string) *Route {
	if rt.Kind != KindMCP || rt.Tool != nil || CheckToolName(tool) != nil {
		return nil
	}
	return rt.MCP.Tool(tool, "")
}

// Refusal says how a kind: mcp route refuses a guarded tools/call (docs/contract.md §7).
type Refusal string

// CancelPolicy says what a client's notifications/cancelled of a guarded call does.
type CancelPolicy string

// UnknownTools says what a kind: mcp route does with a tools/call of a tool its file does not
// configure.
type UnknownTools string

// The values of Refusal, CancelPolicy and UnknownTools; the first of each pair is the default.
const (
	RefuseToolError    Refusal = "tool_error"    // a CallToolResult with isError: true
	RefuseJSONRPCError Refusal = "jsonrpc_error" // a JSON-RPC error, codes -32010 to -32015

	CancelFinish  CancelPolicy = "finish"  // the call runs to its final response; the cancel is answered 202
	CancelForward CancelPolicy = "forward" // the cancel reaches the server; the outcome may be unknown

	AllowUnknownTools  UnknownTools = "allow"  // guarded with the route's class and settings
	RefuseUnknownTools UnknownTools = "refuse" // -32602 from the gateway; the upstream is not called
)

// OutcomeName names an outcome class: what a tool's isError result, or a JSON-RPC error code,
// means for its record.
type OutcomeName string

// The outcome classes (docs/contract.md §4).
const (
	OutcomeCommitted    OutcomeName = "committed"     // stored as the receipt and replayed
	OutcomeNotCommitted OutcomeName = "not_committed" // the key is released; a retry executes again
	OutcomeUnknown      OutcomeName = "unknown"       // the route's OnUnknownOutcome applies
)

// ToolClassConfig is Tool.ClassSource when tools[T].class sets the class.
const ToolClassConfig = "config"

// maxCachedTools bounds the per-tool routes one MCP keeps of tools its file does not configure:
// their names come from requests.
const maxCachedTools = 4096

// MCP is a kind: mcp route's own settings (docs/contract.md §7).
type MCP struct {
	// Refusal: default RefuseToolError.
	Refusal Refusal
	// Cancel: default CancelFinish.
	Cancel CancelPolicy
	// UnknownTools: default AllowUnknownTools.
	UnknownTools UnknownTools
	// ReplayMeta: a replayed result says so in its _meta (docs/mcp.md#what-the-agent-gets).
	// Default true; replay_meta: false replays the stored result byte for byte.
	ReplayMeta bool
	// Tools are the tools the file configures, by tool name; each a full per-tool route (see
	// Tool) with the class the file gives it, else the route's. Empty when none.
	Tools map[string]*Route

	route *Route               // the kind: mcp route
	specs map[string]*toolSpec // of the configured tools
	base  *toolSpec            // of every other tool

	mu    sync.RWMutex
	cache map[toolClass]*Route
}

// toolClass is a key of MCP.cache.
type toolClass struct {
	name  string
	class Class
}

// toolSpec is a tool's settings before its class is known: proto holds them resolved, with the
// defaults that depend on the class (Key.Required, OnUnknownOutcome) filled by build unless set.
type toolSpec struct {
	proto                  *Route
	requiredSet, policySet bool
	class                  Class // tools[T].class; "" when unset
	toolError              OutcomeName
	errorCodes             Outcome
}

// KeyArguments reports whether a call of some tool of this route may carry its key in an argument
// (key.argument on the route or on a tool), which the route's tool lists must then declare.
func (m *MCP) KeyArguments() bool {
	if m.base.proto.Key.Argument != "" {
		return true
	}
	for _, s := range m.specs {
		if s.proto.Key.Argument != "" {
			return true
		}
	}
	return false
}

// Tool returns the per-tool route of tool name on this MCP route, with class c for a tool whose
// class the file does not set (the gateway resolves c: trusted annotations, else the route's
// class; "" means the route's class). c is ignored for a tool whose class the file sets. The
// route's Name is "<route>/<tool>", Method "POST", Path the route's, Kind KindMCP, Tool set; every
// effect setting (key, fingerprint, receipt, ttl, lock_lease, concurrency, wait_timeout, outcome,
// on_unknown_outcome, tenant and actor headers, max_body_bytes, scope) is the tool's where the
// file sets it, else the route's, else the default for class c (key.required,
// on_unknown_outcome). Routes are built once per (tool, class) and cached, so the same pointer
// comes back (up to maxCachedTools tools the file does not configure; past that, an equal new
// route each time). Safe for concurrent use. A name CheckToolName refuses is the caller's to
// refuse first.
func (m *MCP) Tool(name string, c Class) *Route {
	spec := m.base
	if s, ok := m.specs[name]; ok {
		spec = s
	}
	if spec.class != "" {
		c = spec.class
	} else if c == "" {
		c = m.route.Class
	}
	k := toolClass{name, c}
	m.mu.RLock()
	rt := m.cache[k]
	m.mu.RUnlock()
	if rt != nil {
		return rt
	}
	rt = m.build(spec, name, c)
	m.mu.Lock()
	defer m.mu.Unlock()
	if cached := m.cache[k]; cached != nil {
		return cached
	}
	if len(m.cache) < len(m.specs)+maxCachedTools {
		m.cache[k] = rt
	}
	return rt
}

// build makes the per-tool route of tool name with class c from spec.
func (m *MCP) build(spec *toolSpec, name string, c Class) *Route {
	rt := *spec.proto
	rt.Name = m.route.Name + "/" + name
	rt.Kind, rt.MCP, rt.Method, rt.Class = KindMCP, m, http.MethodPost, c
	if !spec.requiredSet {
		rt.Key.Required = c == NonIdempotent
	}
	if !spec.policySet {
		rt.OnUnknownOutcome = defaultUnknownPolicy(c, rt.Upstream, nil)
	}
	rt.Tool = &Tool{Route: m.route.Name, Name: name, Scope: record.NewToolScope(rt.Name), ToolError: spec.toolError,
		ErrorCodes: spec.errorCodes}
	if spec.class != "" {
		rt.Tool.ClassSource = ToolClassConfig
	}
	return &rt
}

// Tool is what only a per-tool route of a kind: mcp route has.
type Tool struct {
	// Route is the kind: mcp route's name.
	Route string
	// Name is the tool's name.
	Name string
	// Scope is the route's Name as the store keys of its records spell it, escaped once, as the
	// route is built, not on each call.
	Scope record.ToolScope
	// ClassSource is ToolClassConfig when tools[T].class sets the class; "" otherwise (the
	// gateway says where the class came from).
	ClassSource string
	// ToolError is what a result with isError: true means (tools[T].tool_error). Default
	// OutcomeNotCommitted.
	ToolError OutcomeName
	// ErrorCodes moves JSON-RPC error codes out of the default rows of docs/contract.md §7
	// (tools[T].error_codes). A code stands in one list only; nil lists move nothing.
	ErrorCodes Outcome
}

// CheckToolName reports whether name is a tool name a kind: mcp route serves: 1 to MaxNameBytes
// bytes of letters, digits, '_', '-', '.' and '/' (the set MCP 2025-11-25 recommends, plus '/').
// Its errors never quote the name, which comes from a request.
func CheckToolName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty tool name")
	case len(name) > MaxNameBytes:
		return fmt.Errorf("tool name of %d bytes, longer than %d", len(name), MaxNameBytes)
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9',
			b == '_', b == '-', b == '.', b == '/':
		default:
			return fmt.Errorf("byte %d of the tool name is not a letter, digit, '_', '-', '.' or '/'", i)
		}
	}
	return nil
}
