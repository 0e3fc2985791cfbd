package mcpwire

import (
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
// other, they replay a stored result with no copy of it made (issue 14: a replay of a tools/call
// costs no more than one of an HTTP response). The caller must not modify them.
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
// replay of a kind: http route with fingerprint format jsonrpc, docs/contract.md §7). It returns
// the message as the three pieces whose concatenation it is, none a copy: the bytes of msg before
// its id, id, and the bytes after it, so that a replay writes the stored response as it is, as
// EnvelopeParts lets an MCP replay do.
func ReplaceID(msg, id []byte) ([3][]byte, error) {
	if !validID(id) {
		return [3][]byte{}, invalid("replace id: the id is not a JSON string or number")
	}
	m, err := Parse(msg)
	switch {
	case err != nil:
		return [3][]byte{}, err
	case m.Kind != Response:
		return [3][]byte{}, invalid("replace id: not a JSON-RPC response")
	}
	// m.ID aliases msg: its offset is where the old id starts.
	at := cap(msg) - cap(m.ID)
	return [3][]byte{msg[:at:at], id, msg[at+len(m.ID):]}, nil
}
