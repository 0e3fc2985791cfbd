package mcpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// A guarded tools/call as the identify phase reads it (gateway.Call, docs/contract.md §7 Key):
// under its tool's route, its body the request's, and its idempotency key, when no header carries
// one, in params._meta[key.meta], then in params.arguments[key.argument] (docs/mcp.md#keys-from-every-client).
// The argument is cut from the body before anything else reads it: the server never sees it, and
// the fingerprint never counts it.

// The key sources of keys read from a tools/call's body (gateway.KeyReader.Source).
const (
	keyFromMeta     = "meta"
	keyFromArgument = "argument"
)

// keySourceNames are the values of agent.idempotency.key.source, by the key source of
// agent.idempotency.key_source (gateway.Exchange.KeySource).
var keySourceNames = map[string]string{
	gateway.KeyFromHeader: "header", keyFromMeta: "meta", keyFromArgument: "argument",
	gateway.KeyFromFrom: "argument", gateway.KeyFromDerive: "derived",
}

// start readies m, whose msg is a tools/call with the headers h, of the MCP revision version, read
// from body, to be identified under trt, the tool's route, and answered; classSource says where
// the tool's class came from.
func (m *mcpTool) start(h http.Header, trt *routes.Route, body []byte, version, classSource string) {
	m.sse, m.session = onlySSE(h), h.Get(headerSessionID)
	m.version, m.classSource = version, classSource
	m.call = gateway.Call{Route: trt, Body: body, Keys: m.keys[:0]}
	if name := trt.Key.Meta; name != "" {
		m.call.Keys = append(m.call.Keys, gateway.KeyReader{Read: m.metaKey, Source: keyFromMeta, Place: "params._meta[" + strconv.Quote(name) + "]", Agrees: true})
	}
	if name := trt.Key.Argument; name != "" {
		place := "params.arguments[" + strconv.Quote(name) + "]"
		v, rest, err := m.msg.CutArgument(body, name)
		m.call.Body = rest
		read := func() (string, bool, error) {
			if err != nil {
				return "", true, fmt.Errorf("%w: %v", problem.ErrInvalidKey, err)
			}
			if v == nil {
				return "", false, nil
			}
			key, err := stringKey(v, place)
			return key, true, err
		}
		m.call.Keys = append(m.call.Keys, gateway.KeyReader{Read: read, Source: keyFromArgument, Place: place, Agrees: true})
	}
}

// metaKey reads the call's key from params._meta[key.meta] (a gateway.KeyReader).
func (m *mcpTool) metaKey() (key string, present bool, err error) {
	name := m.call.Route.Key.Meta
	v := m.msg.Meta(name)
	if v == nil {
		return "", false, nil
	}
	key, err = stringKey(v, "params._meta["+strconv.Quote(name)+"]")
	return key, true, err
}

// stringKey reads the key of a tools/call from v, the raw value at place (params._meta[…] or
// params.arguments[…]): a JSON string holding a valid key (record.CheckKey). Errors wrap
// problem.ErrInvalidKey and never quote v.
func stringKey(v []byte, place string) (key string, err error) {
	switch {
	case len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v[1:len(v)-1], '\\') < 0: // no escapes: the bytes are the key
		key = string(v[1 : len(v)-1])
	case json.Unmarshal(v, &key) != nil:
		return "", fmt.Errorf("%w: %s is not a JSON string", problem.ErrInvalidKey, place)
	}
	if err := record.CheckKey(key); err != nil {
		return "", fmt.Errorf("%w: %s: %v", problem.ErrInvalidKey, place, err)
	}
	return key, nil
}

// ReadCall reads the tools/call that r, a POST on rt (a kind: mcp route), carries, as Serve does,
// for gateway.Explain (a gateway.CallReader): the body read once and parsed, the 2026-07-28
// headers checked, the tool's name checked; tool, when not "", must be the body's. The call is
// under the tool's route, with the class the file gives the tool, else the route's. Errors: a body
// that is not one JSON-RPC message or whose headers do not match it (problem.ErrInvalidBody), a
// bad tool name (problem.ErrInvalidRequest), a body that is no tools/call or calls another tool,
// a read_only tool.
func ReadCall(rt *routes.Route, tool string, r *http.Request) (*gateway.Call, error) {
	body, err := gateway.ReadBody(nil, r, rt.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	m := new(mcpTool)
	msg := &m.msg
	version, err := readMessage(msg, r.Header, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", problem.ErrInvalidBody, err)
	}
	if msg.Kind != mcpwire.Request || msg.Method != methodToolsCall {
		return nil, fmt.Errorf("route %q: the body is no tools/call request, which alone has a fingerprint", rt.Name)
	}
	if err := routes.CheckToolName(msg.Tool); err != nil {
		return nil, fmt.Errorf("%w: %v", problem.ErrInvalidRequest, err)
	}
	if tool != "" && msg.Tool != tool {
		return nil, fmt.Errorf("the body calls tool %q, not %q", msg.Tool, tool)
	}
	trt := rt.MCP.Tool(msg.Tool, "")
	if trt.Class == routes.ReadOnly {
		return nil, fmt.Errorf("tool %q is read_only: its calls pass through and have no fingerprint", trt.Name)
	}
	m.start(r.Header, trt, body, version, "")
	return &m.call, nil
}
