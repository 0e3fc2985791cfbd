package mcpfront

import (
	"testing"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/routes"
)

// TestFinalClass is the outcome table of MCP tool calls (docs/contract.md §7 Outcome), one row a
// line: what a tools/call's final response says the call did, by the tool's tool_error and
// error_codes.
func TestFinalClass(t *testing.T) {
	t.Parallel()
	result := func(r string) string { return `{"jsonrpc":"2.0","id":1,"result":` + r + `}` }
	failed := func(code string) string {
		return `{"jsonrpc":"2.0","id":1,"error":{"code":` + code + `,"message":"m"}}`
	}
	moved := routes.Outcome{Committed: []int{-32001}, NotCommitted: []int{-32603}, Unknown: []int{-32602}}
	tests := []struct {
		name      string
		msg       string
		toolError routes.OutcomeName
		codes     routes.Outcome
		want      gateway.OutcomeClass
	}{
		{"complete result", result(`{"content":[]}`), "", routes.Outcome{}, gateway.Committed},
		{"resultType complete", result(`{"content":[],"resultType":"complete"}`), "", routes.Outcome{}, gateway.Committed},
		{"task handle", result(`{"task":{"taskId":"t1"}}`), "", routes.Outcome{}, gateway.Committed},
		{"input required", result(`{"resultType":"input_required","inputRequests":{}}`), "", routes.Outcome{}, gateway.NotCommitted},
		{"isError, default tool_error", result(`{"content":[],"isError":true}`), routes.OutcomeNotCommitted, routes.Outcome{}, gateway.NotCommitted},
		{"isError, tool_error committed", result(`{"content":[],"isError":true}`), routes.OutcomeCommitted, routes.Outcome{}, gateway.Committed},
		{"isError, tool_error unknown", result(`{"content":[],"isError":true}`), routes.OutcomeUnknown, routes.Outcome{}, gateway.Unknown},
		{"isError false", result(`{"content":[],"isError":false}`), routes.OutcomeNotCommitted, routes.Outcome{}, gateway.Committed},
		{"parse error", failed("-32700"), "", routes.Outcome{}, gateway.NotCommitted},
		{"invalid request", failed("-32600"), "", routes.Outcome{}, gateway.NotCommitted},
		{"method not found", failed("-32601"), "", routes.Outcome{}, gateway.NotCommitted},
		{"invalid params", failed("-32602"), "", routes.Outcome{}, gateway.NotCommitted},
		{"header mismatch", failed("-32020"), "", routes.Outcome{}, gateway.NotCommitted},
		{"missing capability", failed("-32021"), "", routes.Outcome{}, gateway.NotCommitted},
		{"unsupported version", failed("-32022"), "", routes.Outcome{}, gateway.NotCommitted},
		{"URL elicitation required", failed("-32042"), "", routes.Outcome{}, gateway.NotCommitted},
		{"internal error", failed("-32603"), "", routes.Outcome{}, gateway.Unknown},
		{"server error", failed("-32001"), "", routes.Outcome{}, gateway.Unknown},
		{"error_codes committed", failed("-32001"), "", moved, gateway.Committed},
		{"error_codes not_committed", failed("-32603"), "", moved, gateway.NotCommitted},
		{"error_codes unknown", failed("-32602"), "", moved, gateway.Unknown},
	}
	for _, tt := range tests {
		f, err := mcpwire.ReadFinal([]byte(tt.msg))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := finalClass(f, &routes.Tool{ToolError: tt.toolError, ErrorCodes: tt.codes}); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
