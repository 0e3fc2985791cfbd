package mcpfront

import (
	"fmt"
	"slices"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/routes"
)

// The outcome table of MCP tool calls (docs/contract.md §7 Outcome): what a guarded call's final
// response says it did. The pipeline settles the record from the class (Exchange.Commit,
// Exchange.Settle), as it does an HTTP route's from its status (gateway/decide.go).

// jsonrpcNotCommitted are the JSON-RPC error codes that say a tools/call was not run
// (docs/contract.md §7 Outcome): parse error, invalid request, method not found, invalid params,
// and MCP's header mismatch, missing required client capability, unsupported protocol version and
// URL elicitation required.
var jsonrpcNotCommitted = []int{-32700, -32600, -32601, -32602, -32020, -32021, -32022, -32042}

// finalClass is the outcome table of MCP tool calls (docs/contract.md §7 Outcome): what the final
// response f of a tools/call of tool t says the call did. A JSON-RPC error is classed by t's
// error_codes, then by jsonrpcNotCommitted, else unknown; a result that asks for input
// (resultType input_required) did nothing yet; a task handle is committed; isError: true is
// t's tool_error; any other result is committed.
func finalClass(f *mcpwire.Final, t *routes.Tool) gateway.OutcomeClass {
	switch {
	case f.HasError && slices.Contains(t.ErrorCodes.Committed, f.ErrCode):
		return gateway.Committed
	case f.HasError && slices.Contains(t.ErrorCodes.NotCommitted, f.ErrCode):
		return gateway.NotCommitted
	case f.HasError && slices.Contains(t.ErrorCodes.Unknown, f.ErrCode):
		return gateway.Unknown
	case f.HasError && slices.Contains(jsonrpcNotCommitted, f.ErrCode):
		return gateway.NotCommitted
	case f.HasError:
		return gateway.Unknown
	case f.ResultType == "input_required":
		return gateway.NotCommitted
	case f.Task:
		return gateway.Committed
	case f.IsError && t.ToolError == routes.OutcomeCommitted:
		return gateway.Committed
	case f.IsError && t.ToolError == routes.OutcomeUnknown:
		return gateway.Unknown
	case f.IsError:
		return gateway.NotCommitted
	default:
		return gateway.Committed
	}
}

// finalDetail says why a final response did not commit, for the record.
func finalDetail(f *mcpwire.Final, t *routes.Tool) string {
	switch {
	case f.HasError:
		return fmt.Sprintf("tool server answered JSON-RPC error %d", f.ErrCode)
	case f.ResultType != "":
		return "tool server asked for input (resultType " + f.ResultType + ")"
	default:
		return fmt.Sprintf("tool answered isError: true (tool_error: %s)", t.ToolError)
	}
}
