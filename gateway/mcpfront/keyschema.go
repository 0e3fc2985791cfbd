package mcpfront

import (
	"bytes"
	"encoding/json"
	"log/slog"

	"github.com/idemgateway/idemgateway/routes"
)

// The key argument in tool lists (docs/mcp.md#keys-from-every-client): a client that can send
// nothing but a tool's arguments sends the key as one, so every tools/list answer that passes a
// route with key.argument declares it in each guarded tool's input schema, for the model to fill
// and for clients that check arguments against the schema (LangChain's adapters) to let through.
// The member is cut from the call before it goes on (call.go): the server never sees it.

// keyProperty is the JSON Schema of the key argument, written for the model that fills it. It is
// not listed in the schema's required: a host may send the key in a header or _meta instead, and
// clients that check arguments against the schema before sending (LangChain's adapters) would
// refuse such a call for want of the argument. A call that carries no key anywhere is refused by
// the gateway with a text naming the argument, which the model can act on.
var keyProperty = json.RawMessage(`{"type":"string","minLength":1,"maxLength":255,` +
	`"description":"Idempotency key of this action: always send one. Use a new unique value (e.g. a UUID) for each new action, ` +
	`and the same value again when retrying the same action after a timeout or an error: the action then takes effect only once."}`)

// declareKeys returns msg, the response of a tools/list on rt, with the key argument declared in
// the input schema of each tool whose calls read one (declareKey); ok is false when msg declares
// nothing (no such tool, or no tool list: an error), and msg then passes unchanged.
func (f *Front) declareKeys(rt *routes.Route, msg []byte) (out []byte, ok bool) {
	var env map[string]json.RawMessage
	var result map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(msg, &env) != nil || json.Unmarshal(env["result"], &result) != nil || json.Unmarshal(result["tools"], &tools) != nil {
		return nil, false
	}
	for i := range tools {
		if t, declared := f.declareKey(rt, tools[i]); declared {
			tools[i], ok = t, true
		}
	}
	if !ok {
		return nil, false
	}
	if result["tools"], ok = encode(tools); !ok {
		return nil, false
	}
	if env["result"], ok = encode(result); !ok {
		return nil, false
	}
	return encode(env)
}

// declareKey returns tool, one tool of a tools/list answer on rt, with its route's key argument
// in inputSchema.properties (keyProperty). declared is false for a read_only tool, one whose route
// reads no key argument, and one whose schema already has a property of that name: the tool's own
// argument, which the gateway would otherwise take, is refused a key (logged).
func (f *Front) declareKey(rt *routes.Route, tool json.RawMessage) (out json.RawMessage, declared bool) {
	var t map[string]json.RawMessage
	var name string
	if json.Unmarshal(tool, &t) != nil || json.Unmarshal(t["name"], &name) != nil || routes.CheckToolName(name) != nil {
		return nil, false
	}
	class, _, _ := f.tools.class(rt, name)
	trt := rt.MCP.Tool(name, class)
	arg := trt.Key.Argument
	if class == routes.ReadOnly || arg == "" {
		return nil, false
	}
	var schema, props map[string]json.RawMessage // null, as a server may write an unset map, is none
	if s, present := t["inputSchema"]; present && json.Unmarshal(s, &schema) != nil {
		return nil, false
	}
	if schema == nil {
		schema = map[string]json.RawMessage{"type": json.RawMessage(`"object"`)}
	}
	if p, present := schema["properties"]; present && json.Unmarshal(p, &props) != nil {
		return nil, false
	}
	if props == nil {
		props = map[string]json.RawMessage{}
	}
	if _, taken := props[arg]; taken {
		f.log.Warn("a tool's input schema already has the key argument's name: the tool list does not declare the key, "+
			"and the gateway takes that argument of its calls as their key; set tools.<tool>.key.argument to another name, or ''",
			slog.String("route", rt.Name), slog.String("tool", name), slog.String("key_argument", arg))
		return nil, false
	}
	props[arg] = keyProperty
	var ok bool
	if schema["properties"], ok = encode(props); !ok {
		return nil, false
	}
	if t["inputSchema"], ok = encode(schema); !ok {
		return nil, false
	}
	return encode(t)
}

// encode is v as JSON, without the HTML escapes of json.Marshal: a tool's description keeps its
// '<', '>' and '&' as the server wrote them.
func encode(v any) (json.RawMessage, bool) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return nil, false
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
}
