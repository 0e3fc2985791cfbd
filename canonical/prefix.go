package canonical

import (
	"bytes"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// LookupPrefixes returns the values at the JSON Pointers ps (RFC 6901) in data, a JSON text
// (RFC 8259) that may have been cut off at any byte, as when a response body is larger than the
// gateway keeps. It reads data once, in document order, without building a tree, and stops as
// soon as every pointer is settled: its value read whole, or proven absent (a member missing from
// its whole object, an element missing from its whole array, a token that is no array index, a
// token into a string, number or literal).
//
// The result has one string per pointer: values[i] is the value at ps[i] as Lookup gives it, a
// JSON string's own (unescaped) value or the canonical text of any other value (as Canonicalize
// gives it: the number 1.50 is "1.5", an object has its members sorted); or "" when ps[i] is the
// zero Pointer, absent, cut off, or read after bytes that are not JSON (as Canonicalize judges
// them: a syntax error, invalid UTF-8, an escaped lone surrogate, a member name repeated in one
// object). A value is whole once its last byte is in data; a number, which nothing closes, only
// once a byte follows it. An empty string and an absent value both give "".
//
// Pointers may repeat, share a prefix (/data/id and /data/url) or lead into arrays (/items/0/id,
// where a token names an element only as a decimal index without leading zeros); a token names
// a member after unescaping, "~1" as "/" and "~0" as "~" (RFC 6901 §4).
//
// Unlike Lookup, LookupPrefixes does not judge what it leaves unread: whatever follows the last
// value it needs (the cut, bytes that are not JSON, a second member of the same name) changes
// nothing, so of a repeated member name the first occurrence gives the value. A repeat read
// before every pointer is settled ends the pass, like any other bytes that are not JSON. On a
// whole valid JSON text without repeated names, each value is the one Lookup gives, or "" where
// Lookup reports not found.
//
// It allocates the result and one string per value found (an object or array also costs
// Canonicalize's allocations); its tokenizer and scratch are pooled.
func LookupPrefixes(data []byte, ps ...Pointer) []string {
	values := make([]string, len(ps))
	lookupPrefixes(data, ps, values, nil)
	return values
}

// lookupPrefixes is LookupPrefixes writing into values (of len(ps)), and when found is not nil
// (of len(ps) too), reporting there which pointers were found.
func lookupPrefixes(data []byte, ps []Pointer, values []string, found []bool) {
	s := prefixScans.Get().(*prefixScan)
	s.lookup(data, ps, values, found)
	prefixScans.Put(s)
}

// lookup is one pass of lookupPrefixes on s, which it leaves ready for the next pass and holding
// no reference to data.
func (s *prefixScan) lookup(data []byte, ps []Pointer, values []string, found []bool) {
	s.start(data, ps)
	if s.pending > 0 {
		s.value(ps, values, 0)
	}
	for i := range found {
		found[i] = s.depth[i] == depthFound
	}
	s.dec.Reset(noInput) // drop the references to data
	s.in, s.data = bytes.Buffer{}, nil
	if cap(s.buf) > 64<<10 {
		s.buf = nil
	}
}

// prefixScan is the state of one pass of LookupPrefixes.
//
// A pointer is live at a value when its first reference tokens name the path to that value. For
// each pointer, depth is the depth of the deepest value on the current path at which it is live
// (the root is at depth 0), or depthFound or depthAbsent once settled; at is the offset in its text
// of the "/" that starts its next token, or its length when the value at that depth is its target.
// A pointer that goes into a member or element is always settled by the end of that value: names
// in an object are unique (the tokenizer ends the pass at a repeat) and so are array indexes.
type prefixScan struct {
	dec       *jsontext.Decoder
	in        bytes.Buffer // holds data, which dec then reads in place
	data      []byte
	at, depth []int
	pending   int    // pointers not settled
	buf       []byte // scratch for unescaped names and for values
}

const (
	depthFound  = -1
	depthAbsent = -2 // or cut off, or behind bytes that are not JSON
)

// prefixScans holds prefixScans between calls, so their tokenizer and scratch are reused.
var prefixScans = sync.Pool{New: func() any { return newPrefixScan() }}

// newPrefixScan returns a prefixScan with its tokenizer, for a first pass.
func newPrefixScan() *prefixScan { return &prefixScan{dec: jsontext.NewDecoder(noInput)} }

// start readies s for a pass over data for ps.
func (s *prefixScan) start(data []byte, ps []Pointer) {
	s.data, s.pending = data, 0
	s.at, s.depth = s.at[:0], s.depth[:0]
	for _, p := range ps {
		d := 0
		if p.IsZero() {
			d = depthAbsent
		} else {
			s.pending++
		}
		s.at, s.depth = append(s.at, 0), append(s.depth, d)
	}
	if s.pending > 0 {
		s.in = *bytes.NewBuffer(data)
		s.dec.Reset(&s.in)
	}
}

// settle marks pointer i found or absent.
func (s *prefixScan) settle(i int, found bool) {
	s.depth[i] = depthAbsent
	if found {
		s.depth[i] = depthFound
	}
	s.pending--
}

// value reads the next value of data, at depth d, and settles the pointers live at it. It reports
// whether the pass goes on: false once every pointer is settled, or when data ends or turns out
// not to be JSON.
func (s *prefixScan) value(ps []Pointer, values []string, d int) bool {
	targets, deeper := 0, 0
	for i := range ps {
		if s.depth[i] == d {
			if s.at[i] == len(ps[i].s) {
				targets++
			} else {
				deeper++
			}
		}
	}
	if targets == 0 && deeper == 0 {
		return s.dec.SkipValue() == nil
	}
	prev := int(s.dec.InputOffset())
	kind := s.dec.PeekKind() // 0 on an error, which the next read returns
	ok := false
	switch {
	case kind == '{' && deeper > 0:
		ok = s.object(ps, values, d)
	case kind == '[' && deeper > 0:
		ok = s.array(ps, values, d)
	default: // a value no pointer goes into: a scalar (no token names a part of it), or a target
		s.settleDeeper(ps, d)
		if s.pending == 0 {
			return false
		}
		ok = s.dec.SkipValue() == nil
	}
	if !ok || targets == 0 {
		return ok
	}
	end := int(s.dec.InputOffset())
	if kind == '0' && end == len(s.data) {
		return false // the number may go on past the cut; nothing follows it, so the pass is over
	}
	start := prev // after the value or name before it, then white space and a ',' or ':'
	for isSpace(s.data[start]) || s.data[start] == ',' || s.data[start] == ':' {
		start++
	}
	v, ok := s.text(kind, s.data[start:end])
	for i := range ps {
		if s.depth[i] == d && s.at[i] == len(ps[i].s) {
			if ok {
				values[i] = v
			}
			s.settle(i, ok)
		}
	}
	return s.pending > 0
}

// object reads an object at depth d into which pointers go, as value does.
func (s *prefixScan) object(ps []Pointer, values []string, d int) bool {
	if _, err := s.dec.ReadToken(); err != nil {
		return false
	}
	for s.dec.PeekKind() == '"' {
		raw, err := s.dec.ReadValue()
		if err != nil {
			return false // a repeated name, say
		}
		name := raw[1 : len(raw)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			if s.buf, err = jsontext.AppendUnquote(s.buf[:0], raw); err != nil {
				return false
			}
			name = s.buf
		}
		into := false
		for i := range ps {
			if s.depth[i] == d && s.at[i] < len(ps[i].s) {
				tok, next := token(ps[i].s, s.at[i])
				if unescapeToken(tok) == string(name) {
					s.depth[i], s.at[i] = d+1, next
					into = true
				}
			}
		}
		if !s.child(ps, values, d, into) {
			return false
		}
	}
	if _, err := s.dec.ReadToken(); err != nil { // '}', or the error PeekKind met
		return false
	}
	s.settleDeeper(ps, d) // the pointers still live here name members the object lacks
	return s.pending > 0
}

// array reads an array at depth d into which pointers go, as value does.
func (s *prefixScan) array(ps []Pointer, values []string, d int) bool {
	if _, err := s.dec.ReadToken(); err != nil {
		return false
	}
	for i := range ps {
		if s.depth[i] == d && s.at[i] < len(ps[i].s) {
			// A token that is no index (or one past any array data can hold) names no element.
			if tok, _ := token(ps[i].s, s.at[i]); !isIndex(tok, len(s.data)) {
				s.settle(i, false)
			}
		}
	}
	if s.pending == 0 {
		return false
	}
	for n := 0; s.dec.PeekKind() != ']'; n++ { // on an error PeekKind gives 0 and the read fails
		into := false
		for i := range ps {
			if s.depth[i] == d && s.at[i] < len(ps[i].s) {
				tok, next := token(ps[i].s, s.at[i])
				if j, ok := arrayIndex(tok, n+1); ok && j == n {
					s.depth[i], s.at[i] = d+1, next
					into = true
				}
			}
		}
		if !s.child(ps, values, d, into) {
			return false
		}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return false
	}
	s.settleDeeper(ps, d) // the pointers still live here index past the end
	return s.pending > 0
}

// child reads a member's value or an element of a value at depth d, which pointers go into when
// into is true.
func (s *prefixScan) child(ps []Pointer, values []string, d int, into bool) bool {
	if !into {
		return s.dec.SkipValue() == nil
	}
	return s.value(ps, values, d+1) && s.pending > 0
}

// settleDeeper marks absent the pointers live at depth d that go deeper.
func (s *prefixScan) settleDeeper(ps []Pointer, d int) {
	for i := range ps {
		if s.depth[i] == d && s.at[i] < len(ps[i].s) {
			s.settle(i, false)
		}
	}
}

// text returns the value of the raw JSON value of the given kind as LookupPrefixes gives it.
func (s *prefixScan) text(kind jsontext.Kind, raw []byte) (string, bool) {
	switch kind {
	case '"':
		if bytes.IndexByte(raw, '\\') < 0 {
			return string(raw[1 : len(raw)-1]), true
		}
		var err error
		s.buf, err = jsontext.AppendUnquote(s.buf[:0], raw)
		return string(s.buf), err == nil
	case '0':
		s.buf = appendNumber(s.buf[:0], raw)
		return string(s.buf), true
	case 'n':
		return "null", true
	case 't':
		return "true", true
	case 'f':
		return "false", true
	}
	c, err := Canonicalize(raw)
	return string(c), err == nil
}

// token returns the reference token of the pointer text p that starts after the "/" at i, still
// escaped, and the offset of the "/" after it (len(p) for the last token).
func token(p string, i int) (tok string, next int) {
	i++
	if j := strings.IndexByte(p[i:], '/'); j >= 0 {
		return p[i : i+j], i + j
	}
	return p[i:], len(p)
}

// isIndex reports whether tok spells an array index (as arrayIndex reads them) below n.
func isIndex(tok string, n int) bool {
	_, ok := arrayIndex(tok, n)
	return ok
}
