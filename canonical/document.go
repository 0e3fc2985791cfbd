package canonical

import (
	"cmp"
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
// (docs/contract.md §2, fingerprint). The zero Fields fingerprints the whole body and no query parameter
// or header.
type Fields struct {
	// Include lists the body members to keep (RFC 6901 pointers). Empty means the whole body.
	// Otherwise the body part of the document is an object whose member names are the pointers'
	// strings and whose values are the values they point at after every other rule, e.g.
	// {"/priority":1,"/title":"x"}; a pointer that matches nothing is left out, so an absent
	// member differs from a null one.
	Include []Pointer
	// Exclude lists body members to drop (RFC 6901 pointers). Every pointer is resolved against
	// the body as the format read it and Defaults completed it, and the matches are removed
	// together: a pointer to an array element removes that element, one that matches nothing is
	// ignored.
	Exclude []Pointer
	// Query lists the query parameter names (case-sensitive) that belong to the effect.
	Query []string
	// Headers lists the request header names (case-insensitive, RFC 9110 field names) that belong
	// to the effect.
	Headers []string
	// Sets lists arrays of the body that are compared as sets (RFC 6901 pointers): their elements
	// are sorted by their canonical JSON text (byte order) and repeated elements are dropped, so
	// order and duplicates never matter. Deeper pointers apply first, so a set inside the
	// elements of another is sorted before the outer one compares them. A pointer that matches
	// nothing or a value that is not an array changes nothing. Empty means no array is a set.
	Sets []Pointer
	// Defaults lists body members that count as a value when they are absent (docs/cases.md C07: with /metadata
	// defaulting to {}, {"name":"w1"} and {"name":"w1","metadata":{}} are one effect). They apply
	// in the order of their pointers' text, so a default for /a applies before one for /a/b,
	// whatever the list order. Empty means none. See Default.
	Defaults []Default
	// Normalize lists strings of the body whose spelling does not matter (Unicode white space,
	// case, normalization form), applied in the order of their pointers' text. Empty means none.
	// See Normalization.
	Normalize []Normalization
	// Format says how the body is read: "" (the default) by its Content-Type, as Document says;
	// "json" or "form" as that whatever the Content-Type; "graphql" as a GraphQL request and
	// "jsonrpc" as a JSON-RPC 2.0 request, both sent as JSON whatever the Content-Type. The body
	// part of a graphql or jsonrpc request is rewritten before any other rule applies, and the
	// pointers of every rule name members of the rewritten body; see Document.
	Format string
}

// Default is one rule of Fields.Defaults: when the object member at Pointer is absent, the body
// counts as if it held Value. Its ancestors that are absent are created as objects, so a default
// for /options/notify also applies to a body without /options; when an ancestor is present but
// not an object (or an array element is missing), or the member's parent is an array, the rule
// does nothing. A member that is present, even as null, is never replaced. An empty body stays
// null.
type Default struct {
	// Pointer names the member (RFC 6901); it must be set.
	Pointer Pointer
	// Value is the JSON text (RFC 8259) the absent member counts as, e.g. []byte("{}"); it must be
	// one valid JSON text (as Canonicalize judges it).
	Value []byte
}

// Normalization is one rule of Fields.Normalize: the string at Pointer, or every string element
// of the array at Pointer, is rewritten by Ops in order before fingerprinting. Values of other
// kinds, and member names, are left as they are. The operations are
//
//   - "trim": remove Unicode white space (the White_Space property: space, tab, line breaks,
//     NBSP, U+2000–U+200A, U+3000, ...) at both ends;
//   - "collapse_space": replace each run of Unicode white space with one U+0020 SPACE;
//   - "casefold": Unicode full case folding (golang.org/x/text/cases.Fold, with Cherokee folded
//     to uppercase as CaseFolding.txt says), so "Straße", "STRASSE" and "strasse" are equal;
//   - "nfc": Unicode Normalization Form C (golang.org/x/text/unicode/norm.NFC), so "é" written
//     as one code point or as "e" and U+0301 is equal.
//
// For a comparison that ignores both case and normalization form, write [nfc, casefold, nfc]:
// case folding preserves canonical equivalence only on normalized input.
type Normalization struct {
	// Pointer names the string or array of strings (RFC 6901); it must be set.
	Pointer Pointer
	// Ops are applied in order; at least one, each one of trim, collapse_space, casefold, nfc.
	Ops []string
}

// Canonicalizer computes canonical documents under one Fields rule. It is immutable and safe for
// concurrent use. A nil or zero Canonicalizer is the one of the zero Fields.
type Canonicalizer struct {
	format    string
	include   []compiledPointer // sorted by compareUTF16 of the pointer text
	exclude   []compiledPointer
	defaults  []compiledDefault       // sorted by pointer text: ancestors before descendants
	normalize []compiledNormalization // sorted by pointer text
	sets      []compiledPointer       // deepest first, then by pointer text
	query     []string                // sorted by compareUTF16
	headers   []string                // lower case, sorted
	rules     []byte                  // Rules' text, made once by Compile
}

type compiledPointer struct {
	text string   // as written, e.g. "/a~1b"
	toks []string // unescaped reference tokens
	at   string   // "/body" + text, the pointer of Explain's steps
}

func compilePointer(p Pointer) compiledPointer {
	return compiledPointer{text: p.s, toks: p.tokens(), at: "/body" + p.s}
}

// Compile validates f and returns its Canonicalizer. Every pointer must be set (non-zero) and
// listed once per list; query names must be non-empty UTF-8 and listed once; header names must be
// RFC 9110 tokens and listed once regardless of case; a default's value must be one JSON text; a
// normalization needs at least one op, each one CheckNormalization accepts; the format must be
// one CheckFormat accepts. Errors name the list and index, e.g. `include[1]: duplicate JSON
// Pointer "/title"`, `headers[0]: "X Account": invalid header name`, `defaults[0]: "/metadata":
// value is not one JSON text: unexpected end of JSON input at offset 1` or `normalize[0]:
// "/title": ops[1]: "upper": unknown normalization (want trim, collapse_space, casefold or nfc)`.
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
	if c.sets, err = compilePointers("sets", f.Sets); err != nil {
		return nil, err
	}
	if c.defaults, err = compileDefaults(f.Defaults); err != nil {
		return nil, err
	}
	if c.normalize, err = compileNormalizations(f.Normalize); err != nil {
		return nil, err
	}
	if err := CheckFormat(f.Format); err != nil {
		return nil, fmt.Errorf("format: %w", err)
	}
	c.format = f.Format
	slices.SortFunc(c.include, func(a, b compiledPointer) int { return compareUTF16(a.text, b.text) })
	slices.SortFunc(c.sets, func(a, b compiledPointer) int {
		return cmp.Or(cmp.Compare(len(b.toks), len(a.toks)), strings.Compare(a.text, b.text))
	})
	slices.SortFunc(c.query, compareUTF16)
	slices.Sort(c.headers)
	c.rules = c.rulesText()
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
		out = append(out, compilePointer(p))
	}
	return out, nil
}

// Format is the format the body is read in (Fields.Format): "" (by Content-Type) or a Format
// constant.
func (c *Canonicalizer) Format() string { return c.format }

// hasBodyRules reports whether any rule names members of the body.
func (c *Canonicalizer) hasBodyRules() bool {
	return len(c.include) > 0 || len(c.exclude) > 0 || len(c.sets) > 0 || len(c.defaults) > 0 || len(c.normalize) > 0
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
	// MaxValues bounds the values of a JSON body (every string, number, literal, object and
	// array) and, for the graphql format, its JSON values plus the tokens of its document: a body
	// with more is refused with an error wrapping ErrBodyTooComplex before any tree is built
	// (docs/fingerprint.md#bounds). 0 means DefaultMaxValues (100000).
	MaxValues int
}

// Document returns the canonical document of r (docs/contract.md §3): the canonical JSON text of
//
//	{"body":B,"headers":{"x-account":["a"]},"method":"POST","path":{"id":"7"},"query":{"dry_run":["1"]},"tool":"create_ticket"}
//
// "path" holds every path parameter; "query" and "headers" hold, as arrays of values in the order
// sent, only the listed names that are present (an absent one is an absent member, never null);
// header names are lower-cased. An empty body is null whatever its type, format and the Fields.
// Otherwise B is the body read by the Fields' Format:
//
//   - "" (the default) reads it by the Content-Type media type (RFC 2045 parsing, parameters
//     ignored): application/json and any type with the +json suffix (RFC 6839) as "json";
//     application/x-www-form-urlencoded as "form"; any other body, including one without a
//     Content-Type, as the string "sha256:" + hex(SHA-256(body)), which is an error when the
//     Fields have body rules (Include, Exclude, Sets, Defaults or Normalize);
//   - "json": the body's JSON text;
//   - "form": an object mapping each field name to the array of its values in order, e.g.
//     a=1&a=2&b= is {"a":["1","2"],"b":[""]};
//   - "graphql": a GraphQL-over-HTTP request, the JSON object {"query", "operationName",
//     "variables", "extensions"}, becomes {"document":D,"operationName":N,"variables":V}. D is the
//     "query" document parsed by a GraphQL parser (github.com/vektah/gqlparser/v2) and printed
//     canonically: comments, descriptions, commas and white space dropped; "{ ... }" written as
//     "query{...}"; the definitions, the fields and fragments of every selection set (by response
//     name, then arguments), the arguments, the variable definitions and the fields of input
//     object values sorted, and repeated identical selections dropped; everything else kept as
//     written, argument values included (so 1.0 and 1 differ, as GraphQL's Int and Float do). N
//     is "operationName", or, when that is absent or null, the name of the document's only
//     operation (null when it is anonymous or there are several). V is "variables" in canonical
//     JSON, {} when absent or null. "extensions" (persisted-query hashes, tracing) and any other
//     member never count. A body that is not an object, a batch (an array), a "query" that is not
//     a string (including persisted-query requests that send only the hash), or a document that
//     does not parse is an error;
//   - "jsonrpc": a JSON-RPC 2.0 request {"jsonrpc","id","method","params"} becomes
//     {"method":M,"params":P}, "params" left out when absent; "id", "jsonrpc" and any other member
//     never count, so a retry under a new id is the same effect. For the Model Context Protocol's
//     "tools/call" method, "params._meta" (progress tokens and other request metadata) never
//     counts either, so a tools/call is fingerprinted by its tool name and arguments. A batch
//     (an array), a body that is not an object or a "method" that is not a string is an error.
//
// Then the rules apply to the body part, in this order: Defaults (absent members added), Exclude
// (members dropped), Normalize (strings rewritten), Sets (arrays sorted and deduplicated) and
// last Include, which projects the body onto the listed members (see Fields). Every pointer of
// every rule names a member of the body part as the format made it, e.g. /variables/input/title
// for graphql or /params/arguments/title for jsonrpc.
//
// r must not be nil; Document does not modify it. Document returns the same document as Explain.
// Errors wrap ErrInvalidBody, e.g. `invalid body: duplicate member "title" at /customer`,
// `invalid body: invalid UTF-8 at offset 6`, `invalid body: data after the top-level value at
// offset 13`, `invalid body: fields are fingerprinted but the body is not JSON, a form or
// multipart/form-data (Content-Type "text/plain")`, `invalid body: jsonrpc: batches are not supported` or
// `invalid body: graphql: invalid document at line 1, column 9: Expected Name, found <EOF>`.
func (c *Canonicalizer) Document(r *Request) ([]byte, error) {
	return c.document(r, nil)
}

// document computes r's document, recording each step of the rules in tr when it is not nil.
func (c *Canonicalizer) document(r *Request, tr *trace) ([]byte, error) {
	if c == nil {
		c = &Canonicalizer{}
	}
	body, err := c.body(r, tr)
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
		tr.listed("/headers/", name, len(vals))
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
		tr.listed("/query/", name, len(vals))
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

// Fingerprint returns the effect fingerprint of the canonical document doc (docs/contract.md §3):
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
