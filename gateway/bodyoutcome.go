package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/routes"
)

// What an answer's body says of its outcome (docs/unknown-outcomes.md#answers-that-say-what-happened):
// an API that answers 2xx whatever happened tells it in the body. The status rows of decide.go
// class an answer first by its status; on an HTTP route the body refines that:
//
//  1. the route's outcome.body rules, in order, whatever the status: the first that matches
//     classes the answer;
//  2. then the status rows; an answer they commit is looked at once more on a route whose
//     fingerprint format says what its answers are: a GraphQL answer with errors and no data (data
//     null, or every field of it null) did nothing, and one with errors beside data did part of
//     it, unknown; a JSON-RPC error is classed by its code as on kind: mcp routes (jsonrpcClass).
//
// The body is what the gateway reads of a committed answer anyway: up to the receipt's limit. A
// body cut off there, or that is not JSON, matches no rule that needs a value and is left to its
// status; a GraphQL or JSON-RPC answer is judged only when read whole.

// jsonrpcNotCommitted are the JSON-RPC error codes that say a request was not run
// (docs/contract.md §7 Outcome): parse error, invalid request, method not found, invalid params,
// and MCP's header mismatch, missing required client capability, unsupported protocol version and
// URL elicitation required.
var jsonrpcNotCommitted = []int{-32700, -32600, -32601, -32602, -32020, -32021, -32022, -32042}

// JSONRPCErrorClass is the class of a JSON-RPC error of code: by codes (a tool's error_codes, a
// route's outcome.error_codes), then jsonrpcNotCommitted, else unknown: the server failed, and
// may have acted first.
func JSONRPCErrorClass(code int, codes routes.Outcome) OutcomeClass {
	if c, ok := listed(code, codes); ok {
		return c
	}
	if slices.Contains(jsonrpcNotCommitted, code) {
		return NotCommitted
	}
	return Unknown
}

// answerClass is the class of an executed call's answer of status with body (whole: not cut off)
// on rt, and the rule that classed it when the body did ("" when the status rows did).
func answerClass(status int, body []byte, whole bool, rt *routes.Route) (OutcomeClass, string) {
	for i, rule := range rt.Outcome.Body {
		if bodyMatches(body, rule) {
			return classNamed(rule.Class), fmt.Sprintf("outcome.body[%d] (%s)", i, rule)
		}
	}
	class := classOf(upstreamResult{status: status}, rt.Outcome)
	if class != Committed || !whole {
		return class, ""
	}
	switch rt.Fingerprint.Format() {
	case canonical.FormatGraphQL:
		return graphqlClass(body)
	case canonical.FormatJSONRPC:
		if f, err := mcpwire.ReadFinal(body); err == nil && f.HasError {
			var codes routes.Outcome
			if rt.Outcome.ErrorCodes != nil {
				codes = *rt.Outcome.ErrorCodes
			}
			return JSONRPCErrorClass(f.ErrCode, codes), fmt.Sprintf("jsonrpc: error %d", f.ErrCode)
		}
	}
	return Committed, ""
}

// readsBody reports whether answerClass may look at the body of an answer of status on rt, so
// that the gateway reads it before it settles.
func readsBody(status int, rt *routes.Route) bool {
	if len(rt.Outcome.Body) > 0 {
		return true
	}
	switch rt.Fingerprint.Format() {
	case canonical.FormatGraphQL, canonical.FormatJSONRPC:
		return classOf(upstreamResult{status: status}, rt.Outcome) == Committed
	}
	return false
}

// bodyMatches reports whether body matches rule: its value at the pointer equals rule.Equals, or
// is present (not null) as rule.Present asks.
func bodyMatches(body []byte, rule routes.BodyRule) bool {
	v, ok := canonical.LookupLenient(body, rule.Pointer) // read as the API's clients read it
	present := ok && string(v) != "null"
	if rule.Equals != nil {
		return ok && bytes.Equal(v, rule.Equals)
	}
	if !ok && !json.Valid(body) { // a body that is not JSON says nothing: neither present nor absent
		return false
	}
	return present == rule.Present
}

// graphqlClass is what a GraphQL answer that its status commits says (GraphQL over HTTP, "errors"
// and "data"): errors with no data, or data whose every field is null, is not committed (the
// operation did not run, or failed before it acted); errors beside data that is not all null is
// unknown (a mutation of several fields may have done part of its work); no errors, committed.
func graphqlClass(body []byte) (OutcomeClass, string) {
	var answer map[string]json.RawMessage // members by their exact names: not "Errors"
	var errs []json.RawMessage
	if json.Unmarshal(body, &answer) != nil || json.Unmarshal(answer["errors"], &errs) != nil || len(errs) == 0 {
		return Committed, ""
	}
	var data map[string]json.RawMessage
	if d := answer["data"]; d != nil && json.Unmarshal(d, &data) != nil { // data that is no object: not GraphQL's
		return Unknown, "graphql: errors beside data that is no object"
	}
	for _, v := range data {
		if string(v) != "null" {
			return Unknown, "graphql: errors beside data"
		}
	}
	return NotCommitted, "graphql: errors and no data"
}

// classNamed is the class an outcome name of the routes file says.
func classNamed(n routes.OutcomeName) OutcomeClass {
	switch n {
	case routes.OutcomeCommitted:
		return Committed
	case routes.OutcomeNotCommitted:
		return NotCommitted
	default:
		return Unknown
	}
}
