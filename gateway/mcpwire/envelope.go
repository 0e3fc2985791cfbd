package mcpwire

import (
	"bytes"
	"encoding/json"
	"strconv"
)

const envelopeHead = `{"jsonrpc":"2.0","id":`

// Envelope builds a replay: `{"jsonrpc":"2.0","id":` + id + `,` + member[1:]: a splice of bytes,
// never a re-encode (member is Final.Member, id the retry's id as sent; nil id: null).
func Envelope(id, member []byte) []byte {
	return AppendEnvelope(make([]byte, 0, len(envelopeHead)+max(len(id), 4)+len(member)), id, member)
}

// AppendEnvelope appends Envelope(id, member) to dst: no allocation when dst has room.
func AppendEnvelope(dst, id, member []byte) []byte {
	for _, part := range EnvelopeParts(id, member) {
		dst = append(dst, part...)
	}
	return dst
}

// EnvelopeParts returns the pieces whose concatenation is Envelope(id, member), none of them a
// copy: the head, the id (null when nil), a comma and member[1:] itself. Written one after the
// other, they replay a stored result with no copy of it made, so that a replay of a tools/call
// costs no more than one of an HTTP response (docs/performance.md#mcp-tool-calls). The caller must
// not modify them.
func EnvelopeParts(id, member []byte) [4][]byte {
	if len(id) == 0 {
		id = nullID
	}
	return [4][]byte{envelopeHeadBytes, id, comma, member[1:]}
}

// The constant parts of EnvelopeParts, allocated once.
var (
	envelopeHeadBytes = []byte(envelopeHead)
	nullID            = []byte("null")
	comma             = []byte(",")
)

func appendID(dst, id []byte) []byte {
	if len(id) == 0 {
		return append(dst, nullID...)
	}
	return append(dst, id...)
}

// ErrorMessage builds {"jsonrpc":"2.0","id":id,"error":{"code":…,"message":…,"data":…}} (id nil:
// "id":null; data omitted when nil or when it does not encode as JSON).
func ErrorMessage(id []byte, e *Error) []byte {
	b := appendID([]byte(envelopeHead), id)
	b = strconv.AppendInt(append(b, `,"error":{"code":`...), int64(e.Code), 10)
	msg, _ := json.Marshal(e.Message) // a string always encodes
	b = append(append(b, `,"message":`...), msg...)
	if e.Data != nil {
		if data, err := json.Marshal(e.Data); err == nil {
			b = append(append(b, `,"data":`...), data...)
		}
	}
	return append(b, "}}"...)
}

// ReplaceID returns msg (a JSON-RPC response) with its top-level id replaced by id (a JSON string
// or number), by splicing the bytes of the id member: everything else stays byte for byte (the
// replay of a kind: http route with fingerprint format jsonrpc, docs/contract.md §7). It is
// IDSpan and SpliceID: a replay that kept the span from when the response was stored splices
// without reading msg again.
func ReplaceID(msg, id []byte) ([3][]byte, error) {
	if !validID(id) {
		return [3][]byte{}, errNotAnID()
	}
	start, end, err := IDSpan(msg)
	if err != nil {
		return [3][]byte{}, err
	}
	return splice(msg, start, end, id), nil
}

// IDSpan returns where the top-level id of msg, a JSON-RPC response, lies: msg[start:end]. It
// reads the whole of msg (Parse); an error is an *Error.
func IDSpan(msg []byte) (start, end int, err error) {
	m, err := Parse(msg)
	switch {
	case err != nil:
		return 0, 0, err
	case m.Kind != Response:
		return 0, 0, invalid("replace id: not a JSON-RPC response")
	}
	// m.ID aliases msg: its offset is where the old id starts.
	start = cap(msg) - cap(m.ID)
	return start, start + len(m.ID), nil
}

// SpliceID returns msg with msg[start:end], its id as IDSpan found it, replaced by id (a JSON
// string or number), as the three pieces whose concatenation it is, none a copy: the bytes of msg
// before its id, id, and the bytes after it, so that a replay writes the stored response as it
// is, as EnvelopeParts lets an MCP replay do. It reads only the two ids and the bytes around the
// span: a span that is not the whole value, a JSON string, number or null (an error's id may be
// null), of a member named "id" is an error (a span kept with another body, or an id member whose
// name is escaped: IDSpan reads those). It trusts the span to be IDSpan's for msg, as a record
// keeps it: a member "id" nested in the result would pass.
func SpliceID(msg []byte, start, end int, id []byte) ([3][]byte, error) {
	switch {
	case !validID(id):
		return [3][]byte{}, errNotAnID()
	case start <= 0 || end <= start || end > len(msg) || !validID(msg[start:end]) && string(msg[start:end]) != "null" || !idMemberAround(msg, start, end):
		return [3][]byte{}, invalid("replace id: no id member at the span given")
	}
	return splice(msg, start, end, id), nil
}

func errNotAnID() error { return invalid("replace id: the id is not a JSON string or number") }

// splice returns the pieces of msg with msg[start:end] replaced by id.
func splice(msg []byte, start, end int, id []byte) [3][]byte {
	return [3][]byte{msg[:start:start], id, msg[end:]}
}

// idMemberAround reports whether msg[start:end] is the value of a member named "id" (unescaped):
// after the name and its colon, where a member starts ('{' or ',' before the name), and before
// the member ends (',' or '}'), white space allowed between them.
func idMemberAround(msg []byte, start, end int) bool {
	const name = `"id"`
	after := msg[ws(msg, end):]
	if len(after) == 0 || after[0] != ',' && after[0] != '}' {
		return false
	}
	b := trimRight(msg[:start])
	if len(b) == 0 || b[len(b)-1] != ':' {
		return false
	}
	b = trimRight(b[:len(b)-1])
	if !bytes.HasSuffix(b, []byte(name)) {
		return false
	}
	b = trimRight(b[:len(b)-len(name)])
	return len(b) > 0 && (b[len(b)-1] == '{' || b[len(b)-1] == ',')
}
