package mcpfront

import (
	"fmt"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/routes"
)

// The outcome table of MCP tool calls (docs/contract.md §7 Outcome): what a guarded call's final
// response says it did. The pipeline settles the record from the class (Exchange.Commit,
// Exchange.Settle), as it does an HTTP route's from its status (gateway/decide.go).

// finalClass is the outcome table of MCP tool calls (docs/contract.md §7 Outcome): what the final
// response f of a tools/call of tool t says the call did. A JSON-RPC error is classed by its code
// (gateway.JSONRPCErrorClass: t's error_codes, then the codes that say nothing ran, else
// unknown); a result that asks for input (resultType input_required) did nothing yet; a task
// handle is committed; isError: true is t's tool_error; any other result is committed.
func finalClass(f *mcpwire.Final, t *routes.Tool) gateway.OutcomeClass {
	switch {
	case f.HasError:
		return gateway.JSONRPCErrorClass(f.ErrCode, t.ErrorCodes)
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
