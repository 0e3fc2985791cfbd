package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrInvalidBody is wrapped by every error about a body that cannot be canonicalized: a JSON body
// that is not one valid JSON text (RFC 8259; duplicated member names, invalid UTF-8, trailing
// data, ...), a form body that does not parse or is not UTF-8, or a body of another type on a
// route that fingerprints body fields. The gateway answers such a request with 400 invalid-body.
// A request part other than the body that cannot be written as JSON (a query, header or path
// value that is not valid UTF-8) also matches ErrInvalidBody with errors.Is; its message starts
// with "invalid request: ".
var ErrInvalidBody = errors.New("invalid body")

// Fields names the parts of a request that belong to its effect: a route's fingerprint rule
// (contract §2, fingerprint). The zero Fields fingerprints the whole body and no query parameter
// or header.
type Fields struct {
	// Include lists the body members to keep (RFC 6901 pointers). Empty means the whole body.
	// Otherwise the body part of the document is an object whose member names are the pointers'
	// strings and whose values are the values they point at, e.g. {"/priority":1,"/title":"x"}; a
	// pointer that matches nothing is left out, so an absent member differs from a null one.
	Include []Pointer
	// Exclude lists body members to drop (RFC 6901 pointers). Every pointer is resolved against
	// the body as sent and the matches are removed together, before Include picks members: a
	// pointer to an array element removes that element, one that matches nothing is ignored.
	Exclude []Pointer
	// Query lists the query parameter names (case-sensitive) that belong to the effect.
	Query []string
	// Headers lists the request header names (case-insensitive, RFC 9110 field names) that belong
	// to the effect.
	Headers []string
}

// Canonicalizer computes canonical documents under one Fields rule. It is immutable and safe for
// concurrent use. A nil or zero Canonicalizer is the one of the zero Fields.
type Canonicalizer struct {
	include []compiledPointer // sorted by compareUTF16 of the pointer text
	exclude []compiledPointer
	query   []string // sorted by compareUTF16
	headers []string // lower case, sorted
}

type compiledPointer struct {
	text string
	toks []string
}

// Compile validates f and returns its Canonicalizer. Every pointer must be set (non-zero) and
// listed once per list; query names must be non-empty UTF-8 and listed once; header names must be
// RFC 9110 tokens and listed once regardless of case. Errors name the list and index, e.g.
// `include[1]: duplicate JSON Pointer "/title"` or `headers[0]: "X Account": invalid header name`.
// Compile keeps no reference to f's slices.
func Compile(f Fields) (*Canonicalizer, error) {
	c := &Canonicalizer{}
	var err error
	if c.include, err = compilePointers("include", f.Include); err != nil {
		return nil, err
	}
	if c.exclude, err = compilePointers("exclude", f.Exclude); err != nil {
		return nil, err
	}
	for i, name := range f.Query {
		switch {
		case name == "":
			return nil, fmt.Errorf("query[%d]: empty query parameter name", i)
		case !utf8.ValidString(name):
			return nil, fmt.Errorf("query[%d]: %q: query parameter name is not valid UTF-8", i, name)
		case slices.Contains(c.query, name):
			return nil, fmt.Errorf("query[%d]: duplicate query parameter %q", i, name)
		}
		c.query = append(c.query, name)
	}
	for i, name := range f.Headers {
		lower := strings.ToLower(name)
		switch {
		case !isToken(name):
			return nil, fmt.Errorf("headers[%d]: %q: invalid header name", i, name)
		case slices.Contains(c.headers, lower):
			return nil, fmt.Errorf("headers[%d]: duplicate header %q", i, name)
		}
		c.headers = append(c.headers, lower)
	}
	slices.SortFunc(c.include, func(a, b compiledPointer) int { return compareUTF16(a.text, b.text) })
	slices.SortFunc(c.query, compareUTF16)
	slices.Sort(c.headers)
	return c, nil
}

func compilePointers(list string, ps []Pointer) ([]compiledPointer, error) {
	out := make([]compiledPointer, 0, len(ps))
	for i, p := range ps {
		if p.IsZero() {
			return nil, fmt.Errorf("%s[%d]: unset JSON Pointer", list, i)
		}
		if slices.ContainsFunc(out, func(c compiledPointer) bool { return c.text == p.s }) {
			return nil, fmt.Errorf("%s[%d]: duplicate JSON Pointer %q", list, i, p.s)
		}
		out = append(out, compiledPointer{text: p.s, toks: p.tokens()})
	}
	return out, nil
}

// Request is what the canonicalizer reads of one HTTP request.
type Request struct {
	// Tool is the route's name.
	Tool string
	// Method is the HTTP method, taken as is (methods are case-sensitive).
	Method string
	// PathParams holds every path parameter of the route; nil means none.
	PathParams map[string]string
	// Query holds the parsed query string; only the names the Fields list are read.
	Query url.Values
	// Header holds the request headers, read with http.Header.Values (canonical keys); only the
	// names the Fields list are read, and Content-Type, which decides how Body is read.
	Header http.Header
	// Body is the whole request body; nil and empty are the same.
	Body []byte
}

// Document returns the canonical document of r (contract §3): the canonical JSON text of
//
//	{"body":B,"headers":{"x-account":["a"]},"method":"POST","path":{"id":"7"},"query":{"dry_run":["1"]},"tool":"create_ticket"}
//
// "path" holds every path parameter; "query" and "headers" hold, as arrays of values in the order
// sent, only the listed names that are present (an absent one is an absent member, never null);
// header names are lower-cased. B depends on the Content-Type media type (RFC 2045 parsing,
// parameters ignored):
//
//   - an empty body is null whatever the type, and stays null whatever the Fields;
//   - application/json and any type with the +json suffix (RFC 6839): the body's JSON text, then
//     projected by Exclude and Include (see Fields);
//   - application/x-www-form-urlencoded: an object mapping each field name to the array of its
//     values in order, e.g. a=1&a=2&b= is {"a":["1","2"],"b":[""]}, then projected likewise;
//   - any other non-empty body, including one without a Content-Type: the string
//     "sha256:" + hex(SHA-256(body)), which is an error when the Fields have Include or Exclude
//     pointers.
//
// r must not be nil; Document does not modify it. Errors wrap ErrInvalidBody, e.g.
// `invalid body: duplicate member "title" at /customer`, `invalid body: invalid UTF-8 at offset
// 6`, `invalid body: data after the top-level value at offset 13` or `invalid body: fields are
// fingerprinted but the body is not JSON or a form (Content-Type "text/plain")`.
func (c *Canonicalizer) Document(r *Request) ([]byte, error) {
	if c == nil {
		c = &Canonicalizer{}
	}
	body, err := c.body(r)
	if err != nil {
		return nil, err
	}
	dst := make([]byte, 0, 256+len(r.Body))
	dst = append(dst, `{"body":`...)
	dst = appendValue(dst, &body)

	dst = append(dst, `,"headers":{`...)
	n := 0
	for _, name := range c.headers {
		vals := r.Header.Values(name)
		if len(vals) == 0 {
			continue
		}
		if dst, err = appendStrings(dst, n, name, vals, "header"); err != nil {
			return nil, err
		}
		n++
	}

	if !utf8.ValidString(r.Method) {
		return nil, invalidRequest("method %q is not valid UTF-8", r.Method)
	}
	dst = append(dst, `},"method":`...)
	dst = appendString(dst, r.Method)

	dst = append(dst, `,"path":{`...)
	names := make([]string, 0, len(r.PathParams))
	for name, val := range r.PathParams {
		if !utf8.ValidString(name) || !utf8.ValidString(val) {
			return nil, invalidRequest("path parameter %q is not valid UTF-8", name)
		}
		names = append(names, name)
	}
	slices.SortFunc(names, compareUTF16)
	for i, name := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, name)
		dst = append(dst, ':')
		dst = appendString(dst, r.PathParams[name])
	}

	dst = append(dst, `},"query":{`...)
	n = 0
	for _, name := range c.query {
		vals := r.Query[name]
		if len(vals) == 0 {
			continue
		}
		if dst, err = appendStrings(dst, n, name, vals, "query parameter"); err != nil {
			return nil, err
		}
		n++
	}

	if !utf8.ValidString(r.Tool) {
		return nil, invalidRequest("tool %q is not valid UTF-8", r.Tool)
	}
	dst = append(dst, `},"tool":`...)
	dst = appendString(dst, r.Tool)
	return append(dst, '}'), nil
}

// appendStrings appends the n-th member name:[vals...] of an object being written.
func appendStrings(dst []byte, n int, name string, vals []string, what string) ([]byte, error) {
	if n > 0 {
		dst = append(dst, ',')
	}
	dst = appendString(dst, name)
	dst = append(dst, ':', '[')
	for i, v := range vals {
		if !utf8.ValidString(v) {
			return nil, invalidRequest("%s %q is not valid UTF-8", what, name)
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, v)
	}
	return append(dst, ']'), nil
}

// Fingerprint returns the effect fingerprint of the canonical document doc (contract §3):
// "sha256:" followed by the 64 lowercase hex digits of SHA-256(doc).
func Fingerprint(doc []byte) string {
	sum := sha256.Sum256(doc)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// invalidRequestError reports a request part other than the body that cannot be written as JSON.
// It matches ErrInvalidBody, so the gateway answers it the same way.
type invalidRequestError struct{ detail string }

func invalidRequest(format string, args ...any) error {
	return &invalidRequestError{detail: fmt.Sprintf(format, args...)}
}

func (e *invalidRequestError) Error() string        { return "invalid request: " + e.detail }
func (e *invalidRequestError) Is(target error) bool { return target == ErrInvalidBody }

// isToken reports whether s is an RFC 9110 §5.6.2 token, the syntax of a header field name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
