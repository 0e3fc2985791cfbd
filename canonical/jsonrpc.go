package canonical

import (
	"fmt"
	"slices"
)

// mcpToolsCall is the Model Context Protocol's method for calling a tool.
const mcpToolsCall = "tools/call"

// jsonrpcBody reads a JSON-RPC 2.0 request as its body part {"method":M,"params":P} (see
// Document).
func jsonrpcBody(body []byte, tr *trace) (node, error) {
	v, err := parse(body)
	switch {
	case err != nil:
		return node{}, err
	case v.kind == kindArray:
		return node{}, fmt.Errorf("%w: jsonrpc: batches are not supported", ErrInvalidBody)
	case v.kind != kindObject:
		return node{}, fmt.Errorf("%w: jsonrpc: the body is not a JSON-RPC request object", ErrInvalidBody)
	}
	out := node{kind: kindObject, kids: make([]member, 0, 2)}
	for _, m := range v.kids { // sorted: "method" before "params"
		switch m.name {
		case "method":
			if m.val.kind != kindString {
				return node{}, fmt.Errorf("%w: jsonrpc: \"method\" is not a string", ErrInvalidBody)
			}
			out.kids = append(out.kids, m)
		case "params":
			out.kids = append(out.kids, m)
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
	if len(out.kids) == 0 || out.kids[0].name != "method" {
		return node{}, fmt.Errorf("%w: jsonrpc: the request has no \"method\"", ErrInvalidBody)
	}
	if out.kids[0].val.str == mcpToolsCall && len(out.kids) == 2 && out.kids[1].val.kind == kindObject {
		params := &out.kids[1].val
		if i := slices.IndexFunc(params.kids, func(m member) bool { return m.name == "_meta" }); i >= 0 {
			params.kids = slices.Delete(params.kids, i, i+1)
			tr.add("/body/params/_meta", actionExcluded, "jsonrpc: MCP tools/call: _meta (progress token and other metadata) never counts")
		}
	}
	return out, nil
}
