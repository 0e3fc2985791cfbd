package mcpwire

import (
	"bytes"
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// The scanner below walks bytes that isJSON has already accepted, so it only finds the spans of
// top-level members and values; it never decodes what it skips.

// isJSON reports whether b is one JSON value, in UTF-8 with valid escapes (RFC 8259 §8.1, RFC 7493
// §2.1). Names sent twice are checked where they matter (Parse), not everywhere: a message that
// passes through is the server's to judge. jsontext validates without allocating, about twice as
// fast as encoding/json's Valid.
func isJSON(b []byte) bool {
	return jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true))
}

// ws returns the index of the first byte at or after i that is not JSON white space (RFC 8259 §2).
func ws(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// trimSpace returns b without the JSON white space at either end.
func trimSpace(b []byte) []byte {
	b = trimRight(b)
	return b[ws(b, 0):]
}

// trimRight returns b without the JSON white space at its end.
func trimRight(b []byte) []byte {
	end := len(b)
	for end > 0 && (b[end-1] == ' ' || b[end-1] == '\t' || b[end-1] == '\n' || b[end-1] == '\r') {
		end--
	}
	return b[:end]
}

// stringEnd returns the index just past the string that starts at b[i] (a '"'). It jumps from
// quote to quote (bytes.IndexByte, which reads many bytes at a time: argument strings are often
// long) and counts the backslashes before each: an odd count escapes it.
func stringEnd(b []byte, i int) int {
	start := i + 1
	for i = start; i < len(b) && i < start+16; i++ { // short strings (names, ids): byte by byte
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	for ; ; i++ {
		j := bytes.IndexByte(b[min(i, len(b)):], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		k := i
		for k > start && b[k-1] == '\\' {
			k--
		}
		if (i-k)%2 == 0 {
			return i + 1
		}
	}
}

// valueEnd returns the index just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default: // number or literal: runs to a delimiter
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return len(b)
	}
}

// iter walks the members of an object or the elements of an array: b is the raw container.
type iter struct {
	b []byte
	i int
}

func newIter(container []byte) iter { return iter{b: container, i: 1} }

// member returns the next member of an object: its name as sent (quotes included) and its value.
func (it *iter) member() (name, val []byte, ok bool) {
	if name, ok = it.name(); !ok {
		return nil, nil, false
	}
	return name, it.value(), true
}

// name returns the name of the next member of an object, as sent (quotes included), and stops at
// its value, for value or members to read.
func (it *iter) name() (name []byte, ok bool) {
	it.i = ws(it.b, it.i)
	if it.i >= len(it.b) || it.b[it.i] == '}' {
		return nil, false
	}
	if it.b[it.i] == ',' {
		it.i = ws(it.b, it.i+1)
	}
	end := stringEnd(it.b, it.i)
	name = it.b[it.i:end]
	it.i = ws(it.b, ws(it.b, end)+1) // past the ':'
	return name, true
}

// value returns the value it stops at, and moves past it.
func (it *iter) value() []byte {
	end := valueEnd(it.b, it.i)
	val := it.b[it.i:end]
	it.i = end
	return val
}

// members returns the object it stops at, and moves past it, handing each of its members to each
// on the way: one walk finds the object's end and reads its members.
func (it *iter) members(each func(name, val []byte)) []byte {
	in := newIter(it.b[it.i:])
	for k, v, ok := in.member(); ok; k, v, ok = in.member() {
		each(k, v)
	}
	end := it.i + in.i + 1 // in stops at the object's '}'
	obj := it.b[it.i:end]
	it.i = end
	return obj
}

// element returns the next element of an array.
func (it *iter) element() (val []byte, ok bool) {
	it.i = ws(it.b, it.i)
	if it.i >= len(it.b) || it.b[it.i] == ']' {
		return nil, false
	}
	if it.b[it.i] == ',' {
		it.i = ws(it.b, it.i+1)
	}
	end := valueEnd(it.b, it.i)
	val = it.b[it.i:end]
	it.i = end
	return val, true
}

// text returns the bytes a JSON string stands for (quotes included in q): q's own bytes when it
// has no escape, else the decoded value (the rare path: escapes in names and ids).
func text(q []byte) []byte {
	if bytes.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1]
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return nil
	}
	return []byte(s)
}

// lookup returns the value of the first member called name of the object obj, nil when obj is not
// an object or has no such member.
func lookup(obj []byte, name string) []byte {
	if len(obj) == 0 || obj[0] != '{' {
		return nil
	}
	it := newIter(obj)
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		if string(text(k)) == name {
			return v
		}
	}
	return nil
}

// offsetIn returns where inner, a slice of outer's bytes, starts in outer; ok is false when inner
// is empty or not a slice of outer's bytes.
func offsetIn(outer, inner []byte) (off int, ok bool) {
	off = cap(outer) - cap(inner) // slices of one array: cap(outer[i:]) == cap(outer) - i
	if len(inner) == 0 || off < 0 || off+len(inner) > len(outer) || &outer[off] != &inner[0] {
		return 0, false
	}
	return off, true
}

// cutMembers returns obj, a JSON object, without its members called name, and their values: the
// other members byte for byte, joined by commas without the white space that stood between them.
func cutMembers(obj []byte, name string) (rest []byte, vals [][]byte) {
	rest = append(make([]byte, 0, len(obj)), '{')
	for i := 1; ; {
		if i = ws(obj, i); i >= len(obj) || obj[i] == '}' {
			break
		}
		if obj[i] == ',' {
			i = ws(obj, i+1)
		}
		start, end := i, stringEnd(obj, i)
		k := obj[start:end]
		i = ws(obj, ws(obj, end)+1) // past the ':'
		end = valueEnd(obj, i)
		if string(text(k)) == name {
			vals = append(vals, obj[i:end])
		} else {
			if len(rest) > 1 {
				rest = append(rest, ',')
			}
			rest = append(rest, obj[start:end]...)
		}
		i = end
	}
	return append(rest, '}'), vals
}

// isString and isNumber tell a raw value's type by its first byte.
func isString(v []byte) bool { return len(v) > 0 && v[0] == '"' }
func isNumber(v []byte) bool { return len(v) > 0 && (v[0] == '-' || '0' <= v[0] && v[0] <= '9') }
