// Package mcpwire reads and writes the wire of MCP's Streamable HTTP transport: JSON-RPC 2.0
// messages (https://www.jsonrpc.org/specification), server-sent events (WHATWG HTML §9.2) and the
// 2026-07-28 Mcp-Method / Mcp-Name headers. It works on raw bytes: ids and results are kept byte
// for byte, never decoded and encoded again (docs/contract.md §7).
package mcpwire

import (
	"errors"
	"fmt"
)

// Kind is what a JSON-RPC body is.
type Kind int

// The kinds of Message. The zero Kind is no message.
const (
	Request      Kind = iota + 1 // method and id
	Notification                 // method, no id
	Response                     // id and result or error
	Batch                        // a JSON array of messages
)

// Message is one JSON-RPC 2.0 message read from a POST body (Parse). Raw slices alias the body.
type Message struct {
	Kind   Kind   // Request, Notification, Response (result or error), or Batch
	Method string // requests and notifications
	// ID is the id exactly as sent (`"a"`, `17`, `12345678901234567890`), nil on notifications;
	// `null` only on an error response.
	ID     []byte
	Params []byte // raw params, nil when absent
	Tool   string // params.name of a tools/call request ("" otherwise)
	// Batch: the messages of an array body, each parsed like a single message.
	Batch []Message

	result, err []byte // a response's raw result or error (ReadFinal)
	// meta is a tools/call's params._meta, raw (nil when absent), found as Parse walks its params:
	// a guarded call reads its key and its protocol version there, without walking params again.
	meta []byte
	// args is a tools/call's params.arguments, raw (nil when absent), found the same way;
	// argsTwice: params holds more than one "arguments".
	args      []byte
	argsTwice bool
	// asksTask: a tools/call's params.task is an object (a 2025-11-25 client asks for a task).
	asksTask bool
}

const (
	methodToolsCall = "tools/call"
	methodCancelled = "notifications/cancelled"
)

// Parse reads body as one JSON-RPC message or a batch. Errors are *Error with Code ParseError (not
// JSON: see isJSON), InvalidRequest (JSON but not a JSON-RPC message: jsonrpc != "2.0", a member sent twice,
// bad id type, method not a string, params not structured, both or neither of result and error on
// a response, an empty batch, ...) or InvalidParams (a tools/call whose params are not an object
// with one string "name").
func Parse(body []byte) (*Message, error) {
	m := new(Message)
	if err := m.Parse(body); err != nil {
		return nil, err
	}
	return m, nil
}

// Parse reads body into m as the function Parse does, for a caller that keeps the message in a
// struct of its own rather than allocate it apart. On error m is the zero Message.
func (m *Message) Parse(body []byte) error {
	*m = Message{}
	if err := m.read(body); err != nil {
		*m = Message{}
		return err
	}
	return nil
}

// Messages returns the messages of data, one JSON-RPC message or a batch of them (2025-03-26
// lets a server send its responses and requests batched, in one SSE event or JSON answer): the
// elements of a JSON array, each exactly as sent, else data itself. Nothing is checked beyond
// that data is JSON: parse each message.
func Messages(data []byte) [][]byte {
	if !isJSON(data) {
		return [][]byte{data}
	}
	data = trimSpace(data)
	if data[0] != '[' {
		return [][]byte{data}
	}
	var msgs [][]byte
	it := newIter(data)
	for v, ok := it.element(); ok; v, ok = it.element() {
		msgs = append(msgs, v)
	}
	return msgs
}

// read reads body into m, the zero Message.
func (m *Message) read(body []byte) error {
	if !isJSON(body) {
		return &Error{Code: ParseError, Message: "parse error: the body is not JSON (UTF-8, one value, nested at most 10000 deep)"}
	}
	body = trimSpace(body) // valid: the value ends at its last byte that is not white space
	if body[0] != '[' {
		return m.object(body)
	}
	it := newIter(body)
	for v, ok := it.element(); ok; v, ok = it.element() {
		m.Batch = append(m.Batch, Message{})
		if err := m.Batch[len(m.Batch)-1].object(v); err != nil {
			var re *RequestError
			if errors.As(err, &re) { // the batch is refused whole, with no id
				return re.Err
			}
			return err
		}
	}
	if len(m.Batch) == 0 {
		return invalid("invalid request: an empty batch")
	}
	m.Kind = Batch
	return nil
}

// object reads one message object (valid JSON) into m.
func (m *Message) object(b []byte) error {
	if b[0] != '{' {
		return invalid("invalid request: a JSON-RPC message is an object")
	}
	var version, method []byte
	hasID := false
	var call callParams
	it := newIter(b)
	for k, ok := it.name(); ok; k, ok = it.name() {
		var slot *[]byte
		switch string(text(k)) {
		case "jsonrpc":
			slot = &version
		case "id":
			if hasID {
				return invalid(`invalid request: "id" sent twice`)
			}
			hasID, m.ID = true, it.value()
			continue
		case "method":
			slot = &method
		case "params":
			slot = &m.Params
		case "result":
			slot = &m.result
		case "error":
			slot = &m.err
		default: // other members are ignored, as the go-sdk does
			it.value()
			continue
		}
		if *slot != nil {
			return invalid("invalid request: " + string(k) + " sent twice")
		}
		if slot == &m.Params && it.b[it.i] == '{' {
			// Walked once: the walk that finds the end of params reads what a tools/call needs of
			// them (the method may come later).
			*slot = it.members(call.member)
		} else {
			*slot = it.value()
		}
	}
	if !isString(version) || string(text(version)) != "2.0" {
		return invalid(`invalid request: "jsonrpc" is not "2.0"`)
	}
	if hasID && !isString(m.ID) && !isNumber(m.ID) && string(m.ID) != "null" {
		return invalid(`invalid request: "id" is not a string or a number`)
	}
	if m.Params != nil && m.Params[0] != '{' && m.Params[0] != '[' && string(m.Params) != "null" {
		return invalid(`invalid request: "params" is not an object or an array`)
	}
	if method == nil {
		return m.response(hasID)
	}
	switch {
	case !isString(method):
		return invalid(`invalid request: "method" is not a string`)
	case m.result != nil || m.err != nil:
		return invalid(`invalid request: a request has no "result" or "error"`)
	case hasID && string(m.ID) == "null":
		return invalid(`invalid request: a request's "id" is not null`)
	}
	m.Method, m.Kind = methodName(text(method)), Notification
	if hasID {
		m.Kind = Request
	}
	if m.Method == methodToolsCall {
		return m.tool(&call)
	}
	return nil
}

// response checks a message without "method".
func (m *Message) response(hasID bool) error {
	switch {
	case !hasID:
		return invalid(`invalid request: a message without "method" is a response and has an "id"`)
	case (m.result == nil) == (m.err == nil):
		return invalid(`invalid request: a response has either "result" or "error"`)
	case m.err != nil && m.err[0] != '{':
		return invalid(`invalid request: "error" is not an object`)
	case m.result != nil && string(m.ID) == "null":
		return invalid(`invalid request: a result's "id" is not null`)
	}
	m.Kind = Response
	return nil
}

// callParams is what a tools/call needs of its params, read as object walks them.
type callParams struct {
	name    []byte // the raw "name"; nil when absent
	badName bool   // a "name" that is not a string, or one sent twice
	meta    []byte // the raw "_meta", the first (as lookup reads it); nil when absent
	args    []byte // the raw "arguments", the first; nil when absent
	twice   bool   // "arguments" sent more than once
	task    bool   // the first "task" is an object
	taskSet bool   // "task" seen
}

// member reads one member of params.
func (c *callParams) member(k, v []byte) {
	switch string(text(k)) {
	case "name":
		c.badName = c.badName || c.name != nil || !isString(v)
		c.name = v
	case "_meta":
		if c.meta == nil {
			c.meta = v
		}
	case "arguments":
		c.twice = c.twice || c.args != nil
		if c.args == nil {
			c.args = v
		}
	case "task":
		if !c.taskSet {
			c.taskSet, c.task = true, v[0] == '{'
		}
	}
}

// tool reads params.name of a tools/call (c, read from its params): the tool is what the gateway
// guards, so a name that is missing, not a string or sent twice (one tool for the gateway, another
// for the server) is refused.
func (m *Message) tool(c *callParams) error {
	if len(m.Params) == 0 || m.Params[0] != '{' || c.name == nil || c.badName {
		err := &Error{Code: InvalidParams, Message: `invalid params: tools/call needs params with one string "name"`}
		if m.Kind == Notification { // no id to answer for
			return err
		}
		return &RequestError{ID: m.ID, Err: err}
	}
	m.Tool, m.meta, m.args, m.argsTwice, m.asksTask = string(text(c.name)), c.meta, c.args, c.twice, c.task
	return nil
}

// Meta returns the raw JSON value of params._meta[name] (nil when absent).
func (m *Message) Meta(name string) []byte {
	meta := m.meta // a tools/call's, which tool read with its params (Parse returns no tools/call whose tool failed)
	if m.Method != methodToolsCall {
		meta = lookup(m.Params, "_meta")
	}
	return lookup(meta, name)
}

// CutArgument finds params.arguments[name] of a tools/call read from body, and returns its raw
// value (nil when absent) and body without that member, every other byte of the message as sent
// but the white space around the member (body itself when there is none, so that a call without
// it costs nothing). The member is cut wherever it occurs: a server must never see it. An error
// says that the message holds it ambiguously: "arguments" sent twice in params, or name twice in
// arguments (the gateway and the server could read different values).
func (m *Message) CutArgument(body []byte, name string) (val, rest []byte, err error) {
	if m.Method != methodToolsCall || len(m.args) == 0 || m.args[0] != '{' || lookup(m.args, name) == nil {
		return nil, body, nil
	}
	if m.argsTwice {
		return nil, body, errors.New(`params holds "arguments" more than once`)
	}
	off, ok := offsetIn(body, m.args)
	if !ok {
		return nil, body, errors.New("the message was not read from this body")
	}
	args, vals := cutMembers(m.args, name)
	if len(vals) > 1 {
		return nil, body, fmt.Errorf("arguments hold %q %d times", name, len(vals))
	}
	rest = make([]byte, 0, len(body)-len(m.args)+len(args))
	rest = append(append(append(rest, body[:off]...), args...), body[off+len(m.args):]...)
	return vals[0], rest, nil
}

// AsksForTask reports whether m, a tools/call, asks for a task (2025-11-25: params.task is an
// object).
func (m *Message) AsksForTask() bool { return m.asksTask }

// DeclaresExtension reports whether m declares the extension ext (e.g.
// "io.modelcontextprotocol/tasks") in its per-request client capabilities (2026-07-28:
// params._meta["io.modelcontextprotocol/clientCapabilities"].extensions).
func (m *Message) DeclaresExtension(ext string) bool {
	caps := m.Meta("io.modelcontextprotocol/clientCapabilities")
	return lookup(lookup(caps, "extensions"), ext) != nil
}

// CancelledRequestID returns params.requestId of a notifications/cancelled (raw), nil otherwise.
func (m *Message) CancelledRequestID() []byte {
	if m.Kind != Notification || m.Method != methodCancelled {
		return nil
	}
	return lookup(m.Params, "requestId")
}

// methodName is b as a string, without allocating for the methods a tools/call exchange carries
// most often (a replay of a guarded call parses one per request).
func methodName(b []byte) string {
	switch string(b) { // compiled without a conversion
	case methodToolsCall:
		return methodToolsCall
	case methodCancelled:
		return methodCancelled
	case "notifications/progress":
		return "notifications/progress"
	case "tools/list":
		return "tools/list"
	}
	return string(b)
}
