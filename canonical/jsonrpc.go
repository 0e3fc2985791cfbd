package canonical

import (
	"fmt"
	"slices"
)

// mcpToolsCall is the Model Context Protocol's method for calling a tool.
const mcpToolsCall = "tools/call"

// jsonrpcBody reads a JSON-RPC 2.0 request of at most budget values as its body part
// {"method":M,"params":P} (see Document). Like the json format, it reads the body once in
// parseBounded's two passes: the budget is checked before any tree is built.
func jsonrpcBody(body []byte, budget int, tr *trace) (node, error) {
	v, _, err := parseBounded(body, budget, nil)
	switch {
	case err != nil:
		return node{}, err
	case v.kind == kindArray:
		return node{}, fmt.Errorf("%w: jsonrpc: batches are not supported", ErrInvalidBody)
	case v.kind != kindObject:
		return node{}, fmt.Errorf("%w: jsonrpc: the body is not a JSON-RPC request object", ErrInvalidBody)
	}
	// The members that count are kept in place, as slices.DeleteFunc would: v's members are the
	// parser's own, and nothing else reads them.
	kids := v.kids[:0]
	for _, m := range v.kids { // sorted: "method" before "params"
		switch m.name {
		case "method":
			if m.val.kind != kindString {
				return node{}, fmt.Errorf("%w: jsonrpc: \"method\" is not a string", ErrInvalidBody)
			}
			kids = append(kids, m)
		case "params":
			kids = append(kids, m)
		case "id":
			tr.add("/body/id", actionExcluded, "jsonrpc: the request id never counts")
		case "jsonrpc":
			tr.add("/body/jsonrpc", actionExcluded, "jsonrpc: the protocol version never counts")
		default:
			if tr != nil {
				tr.add("/body/"+escapeToken(m.name), actionExcluded, "jsonrpc: not a member of a JSON-RPC request; never counts")
			}
		}
	}
	if len(kids) == 0 || kids[0].name != "method" {
		return node{}, fmt.Errorf("%w: jsonrpc: the request has no \"method\"", ErrInvalidBody)
	}
	if kids[0].val.str == mcpToolsCall && len(kids) == 2 && kids[1].val.kind == kindObject {
		kids[1].val.kids = toolsCallParams(kids[1].val.kids, tr)
	}
	return node{kind: kindObject, kids: kids}, nil
}

// toolsCallNeverCounts says why a member of MCP tools/call params never counts, "" when it
// counts: it changes between sends of one call (docs/contract.md §7 Fingerprint): metadata, and
// what 2026-07-28 clients add when they send a call again after an input_required result or ask
// for a task. A switch rather than a map: it runs on every member of every guarded call's params.
func toolsCallNeverCounts(name string) (why string) {
	switch name {
	case "_meta":
		return "jsonrpc: MCP tools/call: _meta (progress token and other metadata) never counts"
	case "inputResponses":
		return "jsonrpc: MCP tools/call: inputResponses (answers to the server's input requests, added when the call is sent again) never count"
	case "requestState":
		return "jsonrpc: MCP tools/call: requestState (the server's state echoed when the call is sent again) never counts"
	case "task":
		return "jsonrpc: MCP tools/call: task (whether the client asks for a task handle) never counts"
	}
	return ""
}

// toolsCallParams returns the members of MCP tools/call params that count: without those
// toolsCallNeverCounts names, and with "arguments" {} when absent (a call without arguments and
// one with {} are the same call to the server).
func toolsCallParams(kids []member, tr *trace) []member {
	kids = slices.DeleteFunc(kids, func(m member) bool {
		why := toolsCallNeverCounts(m.name)
		if why != "" && tr != nil { // the pointer is built only for Explain
			tr.add("/body/params/"+m.name, actionExcluded, why)
		}
		return why != ""
	})
	i, found := slices.BinarySearchFunc(kids, "arguments", func(m member, name string) int { return compareUTF16(m.name, name) })
	if !found {
		kids = slices.Insert(kids, i, member{name: "arguments", val: node{kind: kindObject}})
		tr.add("/body/params/arguments", actionDefaulted, "jsonrpc: MCP tools/call: absent, counts as {}")
	}
	return kids
}
