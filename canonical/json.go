package canonical

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
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

// parser reads one JSON text into a tree of nodes with the strict jsontext tokenizer, which
// rejects duplicated member names (compared after unescaping), invalid UTF-8 and lone surrogates.
type parser struct {
	dec    *jsontext.Decoder
	src    []byte
	srcStr string   // a copy of src, so strings and numbers that need no rewriting cost no allocation
	stack  []member // the members and elements of the open objects and arrays
	buf    []byte   // scratch for number text
}

// parsers holds parsers between calls, so their tokenizer, stack and scratch are reused.
var parsers = sync.Pool{New: func() any { return &parser{dec: jsontext.NewDecoder(noInput)} }}

// noInput is the reader of an idle parser's tokenizer; it is never read.
var noInput = bytes.NewReader(nil)

// parse parses data as exactly one JSON text. Errors wrap ErrInvalidBody.
func parse(data []byte) (node, error) {
	p := parsers.Get().(*parser)
	defer func() {
		p.dec.Reset(noInput) // drop the references to data
		p.src, p.srcStr = nil, ""
		clear(p.stack)
		p.stack = p.stack[:0]
		parsers.Put(p)
	}()
	p.dec.Reset(bytes.NewBuffer(data))
	p.src, p.srcStr = data, string(data)
	v, err := p.node()
	if err != nil {
		return node{}, p.error(err)
	}
	end := p.dec.InputOffset()
	if _, err := p.dec.ReadToken(); err == io.EOF {
		return v, nil
	}
	for end < int64(len(data)) && isSpace(data[end]) {
		end++
	}
	return node{}, fmt.Errorf("%w: data after the top-level value at offset %d", ErrInvalidBody, end)
}

func (p *parser) node() (node, error) {
	prev := p.dec.InputOffset()
	tok, err := p.dec.ReadToken()
	if err != nil {
		return node{}, err
	}
	switch k := tok.Kind(); k {
	case '{':
		base := len(p.stack)
		for {
			prev := p.dec.InputOffset()
			name, err := p.dec.ReadToken()
			if err != nil {
				return node{}, err
			}
			if name.Kind() == '}' {
				break
			}
			m := member{name: p.string(name, prev)}
			if m.val, err = p.node(); err != nil {
				return node{}, err
			}
			p.stack = append(p.stack, m)
		}
		kids := p.pop(base)
		slices.SortFunc(kids, func(a, b member) int { return compareUTF16(a.name, b.name) })
		return node{kind: kindObject, kids: kids}, nil
	case '[':
		base := len(p.stack)
		for p.dec.PeekKind() != ']' {
			e, err := p.node()
			if err != nil {
				return node{}, err
			}
			p.stack = append(p.stack, member{val: e})
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return node{}, err
		}
		return node{kind: kindArray, kids: p.pop(base)}, nil
	case '"':
		return node{kind: kindString, str: p.string(tok, prev)}, nil
	case '0':
		start, end := p.span(prev)
		p.buf = appendNumber(p.buf[:0], p.src[start:end])
		if string(p.buf) == p.srcStr[start:end] {
			return node{kind: kindNumber, str: p.srcStr[start:end]}, nil
		}
		return node{kind: kindNumber, str: string(p.buf)}, nil
	default: // 'n', 't', 'f'
		return node{kind: byte(k)}, nil
	}
}

// span returns where the token just read starts and ends in src, given the end of the one before:
// only white space and one ',' or ':' can stand between them (RFC 8259 §2).
func (p *parser) span(prev int64) (start, end int) {
	start, end = int(prev), int(p.dec.InputOffset())
	for start < end && (isSpace(p.src[start]) || p.src[start] == ',' || p.src[start] == ':') {
		start++
	}
	return start, end
}

// string returns the value of the string token tok, read after offset prev.
func (p *parser) string(tok jsontext.Token, prev int64) string {
	start, end := p.span(prev)
	if bytes.IndexByte(p.src[start:end], '\\') < 0 {
		return p.srcStr[start+1 : end-1] // no escapes: the text is the value
	}
	return tok.String()
}

// pop removes the members above base from the stack and returns a copy of them.
func (p *parser) pop(base int) []member {
	if len(p.stack) == base {
		return nil
	}
	kids := slices.Clone(p.stack[base:])
	clear(p.stack[base:])
	p.stack = p.stack[:base]
	return kids
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
