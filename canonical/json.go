package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// node is one parsed JSON value, kept in canonical form: numbers as their canonical text,
// object members sorted by compareUTF16.
type node struct {
	kind byte   // kindNull, kindFalse, kindTrue, kindString, kindNumber, kindObject, kindArray
	str  string // kindString: the value; kindNumber: the canonical text
	kids []member
}

// member is an object member, or an array element (with an empty name).
type member struct {
	name string
	val  node
}

const (
	kindNull    = 'n'
	kindFalse   = 'f'
	kindTrue    = 't'
	kindString  = '"'
	kindNumber  = '0'
	kindObject  = '{'
	kindArray   = '['
	kindDeleted = 'x' // marked by an Exclude pointer, then dropped from its parent
)

// Canonicalize returns the canonical form of the JSON text data (RFC 8259): RFC 8785 member
// order, white space and string escapes, with numbers in the exact-decimal form of the package
// comment. Leading and trailing white space is allowed; anything else after the value is an error.
// Errors wrap ErrInvalidBody and name the problem and where it is (the containing object for a
// duplicated member name, else the byte offset), e.g. `invalid body: duplicate member "title" at
// /customer` or `invalid body: invalid character ',' at start of value at offset 13`: duplicated
// member names (compared after unescaping), invalid UTF-8, escaped lone surrogates, syntax
// errors, nesting deeper than 10000 and data after the value.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := parse(data)
	if err != nil {
		return nil, err
	}
	return appendValue(make([]byte, 0, len(data)), &v), nil
}

// Lookup returns the value at p in the JSON text data (RFC 8259) as a string: a JSON string's own
// (unescaped) value, or the canonical JSON text of any other value (so the number 1.50 is "1.5",
// true is "true" and an object is its canonical text). ok is false when data is not one valid JSON
// text (as Canonicalize judges it), when p is absent from it, or when p is the zero Pointer.
func Lookup(data []byte, p Pointer) (value string, ok bool) {
	if p.IsZero() {
		return "", false
	}
	root, err := parse(data)
	if err != nil {
		return "", false
	}
	v := resolve(&root, p.tokens())
	if v == nil {
		return "", false
	}
	if v.kind == kindString {
		return strings.Clone(v.str), true // not a slice of the parser's copy of data
	}
	return string(appendValue(nil, v)), true
}

// LookupJSON returns the canonical JSON text of the value at p in the JSON text data (a string
// quoted, unlike Lookup). ok is false when data is not valid JSON or p is absent.
func LookupJSON(data []byte, p Pointer) (value []byte, ok bool) {
	if p.IsZero() {
		return nil, false
	}
	root, err := parse(data)
	if err != nil {
		return nil, false
	}
	v := resolve(&root, p.tokens())
	if v == nil {
		return nil, false
	}
	return appendValue(nil, v), true
}

// LookupLenient is LookupJSON for JSON text a server wrote rather than a request the gateway
// fingerprints: data is read as encoding/json reads it (a member named twice has its last value;
// invalid UTF-8 and lone surrogates become U+FFFD), as most clients of an API read its answers.
// The value is returned as canonical JSON text. ok is false when data is not one JSON value or p
// is absent or the zero Pointer.
func LookupLenient(data []byte, p Pointer) (value []byte, ok bool) {
	if p.IsZero() {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.InputOffset() < int64(len(bytes.TrimRight(data, " \t\r\n"))) {
		return nil, false
	}
	for _, tok := range p.tokens() {
		switch x := v.(type) {
		case map[string]any:
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, ok := arrayIndex(tok, len(x))
			if !ok {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	b, err := json.Marshal(v)
	if err == nil {
		b, err = Canonicalize(b)
	}
	return b, err == nil
}

// resolve returns the value at the reference tokens toks below v (RFC 6901 §4), or nil when there
// is none. Values marked deleted are absent.
func resolve(v *node, toks []string) *node {
	for _, tok := range toks {
		switch v.kind {
		case kindObject:
			i, found := slices.BinarySearchFunc(v.kids, tok, func(m member, name string) int {
				return compareUTF16(m.name, name)
			})
			if !found {
				return nil
			}
			v = &v.kids[i].val
		case kindArray:
			i, found := arrayIndex(tok, len(v.kids))
			if !found {
				return nil
			}
			v = &v.kids[i].val
		default:
			return nil
		}
		if v.kind == kindDeleted {
			return nil
		}
	}
	return v
}

// appendValue appends the canonical JSON text of v to dst.
func appendValue(dst []byte, v *node) []byte {
	switch v.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindFalse:
		return append(dst, "false"...)
	case kindTrue:
		return append(dst, "true"...)
	case kindString:
		return appendString(dst, v.str)
	case kindNumber:
		return append(dst, v.str...)
	case kindObject:
		dst = append(dst, '{')
		for i := range v.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, v.kids[i].name)
			dst = append(dst, ':')
			dst = appendValue(dst, &v.kids[i].val)
		}
		return append(dst, '}')
	case kindArray:
		dst = append(dst, '[')
		for i := range v.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, &v.kids[i].val)
		}
		return append(dst, ']')
	}
	panic("canonical: appendValue of a deleted or invalid value") // unreachable: exclude drops them
}

// sortMembers sorts an object's members by their names' UTF-16 code units (RFC 8785 §3.2.3), and
// returns order, scratch it may grow, for the next call. It sorts the members' indices and then
// moves each member once, into its place: a member holds pointers, and each move of one costs the
// garbage collector's write barriers while it marks, which a sort's many swaps multiplied (a fifth
// of the time of canonicalizing a ticket list). Duplicated names end up side by side.
func sortMembers(kids []member, order []int32) []int32 {
	if len(kids) < 2 {
		return order
	}
	if cap(order) < len(kids) {
		order = make([]int32, len(kids))
	}
	order = order[:len(kids)]
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareUTF16(kids[a].name, kids[b].name) })
	// Place kids[order[i]] at i, one cycle of the permutation at a time; order[i] = -1 once placed.
	for start := range order {
		if order[start] < 0 {
			continue
		}
		held := kids[start]
		i := start
		for int(order[i]) != start {
			next := int(order[i])
			kids[i], order[i] = kids[next], -1
			i = next
		}
		kids[i], order[i] = held, -1
	}
	return order
}

// parser reads one JSON text into a tree of nodes in two passes (docs/fingerprint.md#bounds). The
// first reads it with the strict jsontext tokenizer, which rejects invalid UTF-8 and lone
// surrogates, and only counts: the values, against the budget, and the members or elements of
// each object and array. The second builds the tree from the valid text with a plain scanner,
// every object's and array's members carved from one slab allocated at its exact size, so the
// tree costs MemoryBound and nothing grows. Duplicated member names (compared after unescaping)
// are found where the second pass sorts an object's members (or, in the values it skips under
// Fields.Include, their names): they meet. jsontext would find them in the first pass by keeping
// every name of an object, and a map of them past 64, which cost a wide object more than its tree.
type parser struct {
	dec    *jsontext.Decoder
	src    []byte
	srcStr string  // a copy of src, so strings and numbers that need no rewriting cost no allocation
	open   []frame // the first pass's open objects and arrays
	counts []int32 // members or elements of each object and array, in the order they open
	next   int     // the second pass's position in counts
	pos    int     // the second pass's offset in src
	slab   []member
	buf    []byte  // scratch for number text and escaped strings
	order  []int32 // scratch of sortMembers

	// The first duplicated member name the second pass met, in the first object it completed
	// that has one, and where: the tokens of the objects and arrays around it, innermost first.
	dup     string
	dupSeen bool
	dupPath []string
	names   []string // the names of the skipped objects around the second pass (skip)
}

// frame is an object or array the first pass is inside.
type frame struct {
	count int32 // its index in counts
	obj   bool  // an object, not an array
	name  bool  // an object whose next token is a member name
}

// parsers holds parsers between calls, so their tokenizer, stacks and scratch are reused.
var parsers = sync.Pool{New: func() any { return &parser{dec: jsontext.NewDecoder(noInput)} }}

// maxPooledScratch bounds the scratch a pooled parser keeps; a long string's is dropped.
const maxPooledScratch = 64 << 10

// noInput is the reader of an idle parser's tokenizer; it is never read.
var noInput = bytes.NewReader(nil)

// parse parses data as exactly one JSON text, with no value budget. Errors wrap ErrInvalidBody.
func parse(data []byte) (node, error) {
	v, _, err := parseBounded(data, math.MaxInt, nil)
	return v, err
}

// parseBounded parses data as exactly one JSON text of at most budget values, building only the
// values that sel selects (all of them when sel is nil), and returns how many values it holds.
// Errors wrap ErrInvalidBody, or ErrBodyTooComplex once the text holds more than budget values.
func parseBounded(data []byte, budget int, sel *selection) (node, int, error) {
	p := parsers.Get().(*parser)
	defer p.release()
	p.src = data
	values, err := p.count(budget)
	if err != nil {
		return node{}, values, err
	}
	p.srcStr = string(data)
	p.next, p.pos = 0, 0
	if sel == nil {
		p.slab = make([]member, values-1) // every value but the root is a member or element
	}
	v := p.node(sel)
	if p.dupSeen {
		return node{}, values, p.duplicateError()
	}
	return v, values, nil
}

// duplicateError is the error of the duplicated member name the second pass met, worded as the
// first pass words it: the name, and the JSON Pointer of its object (RFC 6901).
func (p *parser) duplicateError() error {
	where := "at the top level"
	if len(p.dupPath) > 0 {
		var b strings.Builder
		for i := len(p.dupPath) - 1; i >= 0; i-- {
			b.WriteByte('/')
			b.WriteString(strings.ReplaceAll(strings.ReplaceAll(p.dupPath[i], "~", "~0"), "/", "~1"))
		}
		where = "at " + b.String()
	}
	return fmt.Errorf("%w: duplicate member %q %s", ErrInvalidBody, p.dup, where)
}

// release drops p's references to the data and returns it to parsers.
func (p *parser) release() {
	p.dec.Reset(noInput)
	p.src, p.srcStr = nil, ""
	p.open, p.counts = p.open[:0], p.counts[:0]
	p.slab = nil
	clear(p.dupPath) // its tokens are slices of the body
	p.dup, p.dupSeen, p.dupPath = "", false, p.dupPath[:0]
	if cap(p.buf) > maxPooledScratch {
		p.buf = nil
	}
	if cap(p.order) > maxPooledScratch/4 {
		p.order = nil
	}
	if cap(p.names) > maxPooledScratch/16 {
		p.names = nil
	}
	parsers.Put(p)
}

// count is the first pass: it validates data, counts its values (ErrBodyTooComplex past budget)
// and records in p.counts the members or elements of each object and array. Duplicated member
// names are left to the second pass.
func (p *parser) count(budget int) (int, error) {
	p.dec.Reset(bytes.NewBuffer(p.src), jsontext.AllowDuplicateNames(true))
	values := 0
	for {
		tok, err := p.dec.ReadToken()
		if err != nil {
			return values, p.error(err)
		}
		k := tok.Kind()
		if k == '}' || k == ']' {
			p.open = p.open[:len(p.open)-1]
			if len(p.open) == 0 {
				break
			}
			continue
		}
		if n := len(p.open); n > 0 {
			top := &p.open[n-1]
			if top.name { // a member name, not a value
				top.name = false
				continue
			}
			p.counts[top.count]++
			top.name = top.obj
		}
		if values++; values > budget {
			return values, fmt.Errorf("%w: more than %d values", ErrBodyTooComplex, budget)
		}
		if k == '{' || k == '[' {
			p.open = append(p.open, frame{count: int32(len(p.counts)), obj: k == '{', name: k == '{'})
			p.counts = append(p.counts, 0)
		} else if len(p.open) == 0 {
			break // a scalar at the top level
		}
	}
	end := p.dec.InputOffset()
	if _, err := p.dec.ReadToken(); err == io.EOF {
		return values, nil
	}
	for end < int64(len(p.src)) && isSpace(p.src[end]) {
		end++
	}
	return values, fmt.Errorf("%w: data after the top-level value at offset %d", ErrInvalidBody, end)
}

// node is the second pass: it builds the value at p.pos, which the first pass found valid, and
// the values below it that sel selects (all of them when sel is nil).
func (p *parser) node(sel *selection) node {
	p.skipSpace()
	switch c := p.src[p.pos]; c {
	case '{', '[':
		n := int(p.counts[p.next])
		p.next++
		p.pos++
		var kids []member
		switch {
		case n == 0:
		case len(p.slab) >= n:
			kids, p.slab = p.slab[:n:n], p.slab[n:]
		default:
			kids = make([]member, n) // under a selection, which builds few values: no slab
		}
		for i := range kids {
			p.skipSpace()
			if i > 0 {
				p.pos++ // ','
				p.skipSpace()
			}
			sub, want := sel, true
			if c == '{' {
				kids[i].name = p.string()
				p.skipSpace()
				p.pos++ // ':'
				sub, want = sel.member(kids[i].name)
			} else {
				sub, want = sel.element(i, n)
			}
			seen := p.dupSeen
			if want {
				kids[i].val = p.node(sub)
			} else {
				p.skip() // never built: left the zero node
			}
			p.wayToDuplicate(seen, c, kids[i].name, i)
		}
		p.skipSpace()
		p.pos++ // '}' or ']'
		if c == '{' {
			p.order = sortMembers(kids, p.order)
			for i := 1; i < len(kids) && !p.dupSeen; i++ {
				if kids[i].name == kids[i-1].name {
					p.dup, p.dupSeen = kids[i].name, true
				}
			}
		}
		return node{kind: c, kids: kids}
	case '"':
		return node{kind: kindString, str: p.string()}
	case 't':
		p.pos += len("true")
		return node{kind: kindTrue}
	case 'f':
		p.pos += len("false")
		return node{kind: kindFalse}
	case 'n':
		p.pos += len("null")
		return node{kind: kindNull}
	default:
		start := p.pos
		p.skipScalar()
		p.buf = appendNumber(p.buf[:0], p.src[start:p.pos])
		if string(p.buf) == p.srcStr[start:p.pos] {
			return node{kind: kindNumber, str: p.srcStr[start:p.pos]}
		}
		return node{kind: kindNumber, str: string(p.buf)}
	}
}

// string reads the string at p.pos and returns its value.
func (p *parser) string() string {
	start := p.pos
	if !p.skipString() {
		return p.srcStr[start+1 : p.pos-1] // no escapes: the text is the value
	}
	p.buf = slices.Grow(p.buf[:0], p.pos-start)                  // the value is never longer than its text
	p.buf, _ = jsontext.AppendUnquote(p.buf, p.src[start:p.pos]) // valid: the first pass read it
	return string(p.buf)
}

// skipString moves p.pos past the string at p.pos and reports whether it has escapes. The first
// pass found the string valid, so its closing quote is the first '"' that no backslash before it
// escapes: both are found with bytes.IndexByte, which reads many bytes at a time.
func (p *parser) skipString() (escaped bool) {
	p.pos++ // the opening quote
	for {
		rest := p.src[p.pos:]
		quote := bytes.IndexByte(rest, '"')
		backslash := bytes.IndexByte(rest[:quote], '\\')
		if backslash < 0 {
			p.pos += quote + 1
			return escaped
		}
		escaped = true
		p.pos += backslash + 2 // past the backslash and the byte it escapes; \uXXXX's digits are plain
	}
}

// wayToDuplicate adds member i of an object or array opened by c (named name, in an object) to
// the path of the duplicated member name when the second pass met it below that member: it had
// met none before reading it (seen false), and has one now.
func (p *parser) wayToDuplicate(seen bool, c byte, name string, i int) {
	if seen || !p.dupSeen {
		return
	}
	if c == '[' {
		name = strconv.Itoa(i)
	}
	p.dupPath = append(p.dupPath, name)
}

// skipScalar moves p.pos past the number or literal at p.pos.
func (p *parser) skipScalar() {
	for p.pos < len(p.src) && !isSpace(p.src[p.pos]) && p.src[p.pos] != ',' && p.src[p.pos] != '}' && p.src[p.pos] != ']' {
		p.pos++
	}
}

// skip moves p.pos past the value at p.pos without building it, and p.next past the objects and
// arrays in it. It finds a member name that one of its objects holds twice as node does (p.dup,
// with where): each object's names are gathered at the end of p.names, sorted and compared side by
// side, then dropped, so that only the names of the objects around p.pos are ever kept.
func (p *parser) skip() {
	p.skipSpace()
	switch c := p.src[p.pos]; c {
	case '"':
		p.skipString()
	case '{', '[':
		p.next++
		p.pos++
		base := len(p.names)
		for i := 0; ; i++ {
			p.skipSpace()
			if p.src[p.pos] == '}' || p.src[p.pos] == ']' {
				break
			}
			if i > 0 {
				p.pos++ // ','
				p.skipSpace()
			}
			name := ""
			if c == '{' {
				name = p.string()
				p.names = append(p.names, name)
				p.skipSpace()
				p.pos++ // ':'
			}
			seen := p.dupSeen
			p.skip()
			p.wayToDuplicate(seen, c, name, i)
		}
		p.pos++ // '}' or ']'
		if names := p.names[base:]; c == '{' && !p.dupSeen {
			slices.SortFunc(names, compareUTF16)
			for k := 1; k < len(names) && !p.dupSeen; k++ {
				if names[k] == names[k-1] {
					p.dup, p.dupSeen = names[k], true
				}
			}
		}
		clear(p.names[base:]) // slices of the body
		p.names = p.names[:base]
	default:
		p.skipScalar()
	}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) && isSpace(p.src[p.pos]) {
		p.pos++
	}
}

// error turns an error of the tokenizer into one that wraps ErrInvalidBody.
func (p *parser) error(err error) error {
	var se *jsontext.SyntacticError
	switch {
	case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
		where := "at the top level"
		if parent := se.JSONPointer.Parent(); parent != "" {
			where = "at " + string(parent)
		}
		return fmt.Errorf("%w: duplicate member %q %s", ErrInvalidBody, se.JSONPointer.LastToken(), where)
	case errors.As(err, &se) && errors.Is(se.Err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: unexpected end of JSON input at offset %d", ErrInvalidBody, len(p.src))
	case errors.As(err, &se):
		return fmt.Errorf("%w: %v at offset %d", ErrInvalidBody, se.Err, se.ByteOffset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("%w: unexpected end of JSON input at offset %d", ErrInvalidBody, len(p.src))
	default:
		return fmt.Errorf("%w: %v", ErrInvalidBody, err)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
