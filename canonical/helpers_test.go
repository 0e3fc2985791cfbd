package canonical

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"pgregory.net/rapid"
)

// benchBody returns a deterministic JSON object of about size bytes: a ticket with a list of
// comments, the shape of a typical tool call.
func benchBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"title":"Printer on floor 3 is out of toner","priority":2,"customer_id":"C-10293",` +
		`"labels":["hardware","printer","floor-3"],"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","comments":[`)
	for i := 0; b.Len() < size-2; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"author":"agent-%d","score":%s,"text":"Checked the tray \u00e9 twice; still empty (%d).","resolved":%t,"parent":null}`,
			i, i%7, strconv.FormatFloat(float64(i)*1.25, 'g', -1, 64), i, i%2 == 0)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// benchResponse returns a deterministic JSON response of about size bytes: the fields a receipt
// reads (/id and /url) first, then the ticket that benchBody makes.
func benchResponse(size int) []byte {
	const head = `{"id":"TCK-10293","url":"https://tickets.example/TCK-10293","status":"open","ticket":`
	return []byte(head + string(benchBody(size-len(head)-1)) + "}")
}

// benchGraphQLBody returns a deterministic GraphQL issueCreate request of about size bytes: a
// mutation with a short selection set, and variables holding a description and a list of
// comments.
func benchGraphQLBody(size int) []byte {
	var v strings.Builder
	v.WriteString(`{"input":{"teamId":"9cfb482a-81e3-4154-b5b9-2c805e70a02d","title":"Printer on floor 3 is out of toner","priority":2,` +
		`"labelIds":["l3","l1","l2"],"comments":[`)
	const query = `mutation IssueCreate($input: IssueCreateInput!) {\n  # create the issue\n  issueCreate(input: $input) {\n    success\n    issue { id identifier title url team { key } labels { nodes { id name } } }\n  }\n}`
	for i := 0; v.Len()+len(query) < size-64; i++ {
		if i > 0 {
			v.WriteByte(',')
		}
		fmt.Fprintf(&v, `{"author":"agent-%d","text":"Checked the tray \u00e9 twice; still empty (%d).","score":%s}`,
			i%7, i, strconv.FormatFloat(float64(i)*1.25, 'g', -1, 64))
	}
	v.WriteString("]}}")
	return []byte(`{"query":"` + query + `","operationName":"IssueCreate","variables":` + v.String() + `}`)
}

// mustPointer parses a JSON Pointer that a test knows to be valid.
func mustPointer(tb testing.TB, s string) Pointer {
	tb.Helper()
	p, err := ParsePointer(s)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// fingerprintOf is the fingerprint of the document c makes of r.
func fingerprintOf(tb testing.TB, c *Canonicalizer, r *Request) string {
	tb.Helper()
	doc, err := c.Document(r)
	if err != nil {
		tb.Fatal(err)
	}
	return Fingerprint(doc)
}

// fuzzSeeds returns the golden inputs and bodies, and a few malformed texts.
func fuzzSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	for _, c := range goldenCases(tb) {
		if c.Request != nil {
			seeds = append(seeds, c.request(tb).Body)
		} else {
			seeds = append(seeds, c.input())
		}
	}
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1,"\u0062":2}}`, "\"\xff\"", `"\ud800"`, `{"a":1}x`,
		`1 2`, `[1,]`, `-0.0e-0`, `1E+999999999999999999999999`, `123456789012345678901234567890.123e-45`,
		// GraphQL and JSON-RPC requests, for the formats of FuzzDocument.
		`{"query":"mutation M($i: In!) { c(input: $i) { id ... on T { x } } } fragment F on T { y }","variables":{"i":{"t":" x "}},"extensions":{}}`,
		`{"query":"{ a(","operationName":1}`, `[{"query":"{ a }"}]`, `{"query":"query A { a } query B { b }","operationName":"B","variables":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"title":" T "},"_meta":{"progressToken":1}}}`,
		`[{"jsonrpc":"2.0","method":"m"}]`, `{"method":1}`, `{"jsonrpc":"2.0","method":"m","params":[1,"a"]}`,
		`{"items":[3,1,2,1],"title":" Stra\u00dfe  \u212b ","meta":null}`} {
		seeds = append(seeds, []byte(s))
	}
	payloads, err := filepath.Glob("../examples/payloads/*.json")
	if err != nil {
		tb.Fatal(err)
	}
	forms, err := filepath.Glob("../examples/payloads/*.form")
	if err != nil {
		tb.Fatal(err)
	}
	payloads = append(payloads, forms...)
	for _, file := range payloads {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	return seeds
}

// goldenFile is one file of testdata/golden: cases whose expected canonical bytes and fingerprint
// were checked by hand. A case has either an input JSON text ("json", embedded as is, or "text",
// its exact bytes as a string) for Canonicalize, or a request and fields for Document.
type goldenFile struct {
	Cases []goldenCase `json:"cases"`
}

// goldenCase is one case of a golden file.
type goldenCase struct {
	Name        string          `json:"name"`
	JSON        json.RawMessage `json:"json,omitempty"`
	Text        *string         `json:"text,omitempty"`
	Fields      *goldenFields   `json:"fields,omitempty"`
	Request     *goldenRequest  `json:"request,omitempty"`
	Canonical   string          `json:"canonical"`
	Fingerprint string          `json:"fingerprint"`
}

// goldenFields are the fields a Document case compiles, as a route would name them.
type goldenFields struct {
	Include   []string                   `json:"include"`
	Exclude   []string                   `json:"exclude"`
	Query     []string                   `json:"query"`
	Headers   []string                   `json:"headers"`
	Sets      []string                   `json:"sets"`
	Defaults  map[string]json.RawMessage `json:"defaults"` // pointer: value, embedded as is
	Normalize map[string][]string        `json:"normalize"`
	Format    string                     `json:"format"`
}

// goldenRequest is the request of a Document case.
type goldenRequest struct {
	Tool       string              `json:"tool"`
	Method     string              `json:"method"`
	PathParams map[string]string   `json:"path_params"`
	Query      string              `json:"query"`   // a raw query string
	Headers    map[string][]string `json:"headers"` // added with http.Header.Add
	Body       *string             `json:"body"`
	BodyJSON   json.RawMessage     `json:"body_json"` // embedded as is
	BodyBase64 string              `json:"body_base64"`
}

// goldenCases returns every case of testdata/golden/*.json, named file/case.
func goldenCases(tb testing.TB) map[string]goldenCase {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files: %v", err)
	}
	cases := make(map[string]goldenCase)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		var g goldenFile
		if err := json.Unmarshal(data, &g); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		for _, c := range g.Cases {
			name := filepath.Base(file[:len(file)-len(".json")]) + "/" + c.Name
			if _, dup := cases[name]; dup || c.Name == "" {
				tb.Fatalf("%s: case name %q is empty or not unique", file, c.Name)
			}
			if (c.JSON != nil || c.Text != nil) == (c.Request != nil) {
				tb.Fatalf("%s: case %q needs exactly one of json, text and request", file, c.Name)
			}
			cases[name] = c
		}
	}
	return cases
}

// input returns the JSON text of a Canonicalize case.
func (c goldenCase) input() []byte {
	if c.Text != nil {
		return []byte(*c.Text)
	}
	return c.JSON
}

// compile returns the Canonicalizer of a Document case.
func (c goldenCase) compile(tb testing.TB) *Canonicalizer {
	tb.Helper()
	var f Fields
	if c.Fields != nil {
		for _, s := range c.Fields.Include {
			f.Include = append(f.Include, mustPointer(tb, s))
		}
		for _, s := range c.Fields.Exclude {
			f.Exclude = append(f.Exclude, mustPointer(tb, s))
		}
		f.Query, f.Headers = c.Fields.Query, c.Fields.Headers
		for _, s := range c.Fields.Sets {
			f.Sets = append(f.Sets, mustPointer(tb, s))
		}
		for p, v := range c.Fields.Defaults {
			f.Defaults = append(f.Defaults, Default{mustPointer(tb, p), v})
		}
		for p, ops := range c.Fields.Normalize {
			f.Normalize = append(f.Normalize, Normalization{mustPointer(tb, p), ops})
		}
		f.Format = c.Fields.Format
	}
	can, err := Compile(f)
	if err != nil {
		tb.Fatal(err)
	}
	return can
}

// request returns the Request of a Document case.
func (c goldenCase) request(tb testing.TB) *Request {
	tb.Helper()
	g := c.Request
	q, err := url.ParseQuery(g.Query)
	if err != nil {
		tb.Fatal(err)
	}
	h := make(http.Header)
	for name, vals := range g.Headers {
		for _, v := range vals {
			h.Add(name, v)
		}
	}
	r := &Request{Tool: g.Tool, Method: g.Method, PathParams: g.PathParams, Query: q, Header: h}
	switch {
	case g.Body != nil:
		r.Body = []byte(*g.Body)
	case g.BodyJSON != nil:
		r.Body = g.BodyJSON
	case g.BodyBase64 != "":
		if r.Body, err = base64.StdEncoding.DecodeString(g.BodyBase64); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// pointers parses JSON Pointers that a test knows to be valid.
func pointers(tb testing.TB, ss ...string) []Pointer {
	tb.Helper()
	ps := make([]Pointer, len(ss))
	for i, s := range ss {
		ps[i] = mustPointer(tb, s)
	}
	return ps
}

// jvalue is a generated JSON value, kept apart from its spelling so that one value can be written
// many ways.
type jvalue struct {
	kind  byte     // 'n', 't', 'f', '"', '0', '{', '['
	str   string   // kindString
	num   jnumber  // kindNumber
	names []string // kindObject: unique member names
	kids  []jvalue // kindObject: member values; kindArray: elements
}

// jnumber is the value (-1)^neg × digits × 10^exp.
type jnumber struct {
	neg    bool
	digits string // decimal digits without leading zeros, or "0"
	exp    int
}

// genValue generates a JSON value nested at most depth levels; the root is an object when
// object is true.
func genValue(depth int, object bool) *rapid.Generator[jvalue] {
	return rapid.Custom(func(t *rapid.T) jvalue {
		kinds := []byte{'n', 't', 'f', '"', '0', '"', '0'}
		if depth > 0 {
			kinds = append(kinds, '{', '[')
		}
		k := rapid.SampledFrom(kinds).Draw(t, "kind")
		if object {
			k = '{'
		}
		v := jvalue{kind: k}
		switch k {
		case '"':
			v.str = genString().Draw(t, "string")
		case '0':
			v.num = genNumber().Draw(t, "number")
		case '{':
			v.names = rapid.SliceOfNDistinct(genString(), 0, 5, rapid.ID[string]).Draw(t, "names")
			for i := range v.names {
				v.kids = append(v.kids, genValue(depth-1, false).Draw(t, fmt.Sprintf("member%d", i)))
			}
		case '[':
			v.kids = rapid.SliceOfN(genValue(depth-1, false), 0, 4).Draw(t, "elements")
		}
		return v
	})
}

// genString generates strings that mix ASCII, white space, escapes-worthy characters, accents
// (precomposed and combining), and characters outside the BMP.
func genString() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringMatching(`[a-c /~"\\]{0,6}`),
		rapid.StringOf(rapid.SampledFrom([]rune{'a', 'Z', ' ', '\t', '\n', '\u00a0', '\u0000', '\u001f', '"', '\\', '/', 'é', 'e', '\u0301', 'ß', 'Σ', '\u2028', '\ufeff', '\U0001f600', '\U00010000'})),
		rapid.String(),
	)
}

// genNumber generates JSON numbers, from 0 to 26 significant digits and exponents of ±30.
func genNumber() *rapid.Generator[jnumber] {
	return rapid.Custom(func(t *rapid.T) jnumber {
		n := jnumber{
			neg:    rapid.Bool().Draw(t, "neg"),
			digits: rapid.StringMatching(`0|[1-9][0-9]{0,25}`).Draw(t, "digits"),
			exp:    rapid.IntRange(-30, 30).Draw(t, "exp"),
		}
		n.digits = strings.TrimRight(n.digits, "0") // the exponent carries trailing zeros
		if n.digits == "" {
			n.digits = "0"
		}
		return n
	})
}

// spellJSON writes v as JSON text, drawing every choice of spelling from t: white space between
// tokens, member order, escapes in strings and names, and the form of numbers.
func spellJSON(t *rapid.T, v jvalue) string {
	var b strings.Builder
	spellValue(t, &b, v)
	space(t, &b)
	return b.String()
}

// space writes white space that JSON allows between tokens, often none.
func space(t *rapid.T, b *strings.Builder) {
	b.WriteString(rapid.SampledFrom([]string{"", "", " ", "\n", "\t", "\r\n  "}).Draw(t, "space"))
}

// spellValue writes v after white space, as spellJSON does.
func spellValue(t *rapid.T, b *strings.Builder, v jvalue) {
	space(t, b)
	switch v.kind {
	case 'n':
		b.WriteString("null")
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case '"':
		spellString(t, b, v.str)
	case '0':
		b.WriteString(spellNumber(t, v.num))
	case '[':
		b.WriteByte('[')
		for i, e := range v.kids {
			if i > 0 {
				space(t, b)
				b.WriteByte(',')
			}
			spellValue(t, b, e)
		}
		space(t, b)
		b.WriteByte(']')
	case '{':
		b.WriteByte('{')
		order := make([]int, len(v.names))
		for i := range order {
			order[i] = i
		}
		order = rapid.Permutation(order).Draw(t, "order")
		for i, j := range order {
			if i > 0 {
				space(t, b)
				b.WriteByte(',')
			}
			space(t, b)
			spellString(t, b, v.names[j])
			space(t, b)
			b.WriteByte(':')
			spellValue(t, b, v.kids[j])
		}
		space(t, b)
		b.WriteByte('}')
	}
}

// spellString writes s as a JSON string, each character raw, as a \uXXXX escape (a surrogate
// pair above U+FFFF; hex digits in either case) or as its short escape.
func spellString(t *rapid.T, b *strings.Builder, s string) {
	short := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	b.WriteByte('"')
	for _, r := range s {
		mustEscape := r < 0x20 || r == '"' || r == '\\'
		switch way := rapid.IntRange(0, 2).Draw(t, "escape"); {
		case way == 0 && !mustEscape:
			b.WriteRune(r)
		case way == 1 && short[r] != "":
			b.WriteString(short[r])
		default:
			format := `\u%04x`
			if rapid.Bool().Draw(t, "upper") {
				format = `\u%04X`
			}
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(b, format+format, hi, lo)
			} else {
				fmt.Fprintf(b, format, r)
			}
		}
	}
	b.WriteByte('"')
}

// spellNumber writes n in one of its many JSON forms: 1, 1.0, 10e-1, 0.1E+1, ...
func spellNumber(t *rapid.T, n jnumber) string {
	zeros := strings.Repeat("0", rapid.IntRange(0, 3).Draw(t, "zeros"))
	if n.digits == "0" { // 0, 0.00, 0e7, -0.0E-2
		s := "0"
		if zeros != "" {
			s += "." + zeros
		}
		if rapid.Bool().Draw(t, "zero exp") {
			s += fmt.Sprintf("e%d", rapid.IntRange(-3, 3).Draw(t, "exp"))
		}
		if n.neg {
			s = "-" + s
		}
		return s
	}
	digits := n.digits + zeros
	exp := n.exp - len(zeros)
	var mant string
	switch p := rapid.IntRange(0, len(digits)).Draw(t, "point"); {
	case p == 0: // 0.ddd
		mant = "0." + digits
		exp += len(digits)
	case p == len(digits):
		mant = digits
		if rapid.Bool().Draw(t, "dot zero") {
			mant += ".0"
		}
	default:
		mant = digits[:p] + "." + digits[p:]
		exp += len(digits) - p
	}
	s := mant
	if exp != 0 || rapid.Bool().Draw(t, "e0") {
		s += rapid.SampledFrom([]string{"e", "E"}).Draw(t, "e")
		if exp >= 0 {
			s += rapid.SampledFrom([]string{"", "+"}).Draw(t, "plus")
		}
		s += fmt.Sprint(exp)
	}
	if n.neg {
		s = "-" + s
	}
	return s
}

// allPaths returns the pointers of every value of v below at, the root excluded; with
// membersOnly, only those that name no array element on the way.
func allPaths(v jvalue, at string, membersOnly bool) []string {
	var out []string
	if at != "" {
		out = append(out, at)
	}
	switch v.kind {
	case '{':
		for i, name := range v.names {
			out = append(out, allPaths(v.kids[i], at+"/"+escapeToken(name), membersOnly)...)
		}
	case '[':
		if membersOnly {
			break
		}
		for i, e := range v.kids {
			out = append(out, allPaths(e, fmt.Sprintf("%s/%d", at, i), membersOnly)...)
		}
	}
	return out
}

// rapidPointer parses a JSON Pointer that a property knows to be valid.
func rapidPointer(t *rapid.T, s string) Pointer {
	p, err := ParsePointer(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bodyPart returns the "body" member of r's document under f, and Document's error.
func bodyPart(tb testing.TB, f Fields, r *Request) (string, error) {
	tb.Helper()
	c, err := Compile(f)
	if err != nil {
		tb.Fatal(err)
	}
	doc, err := c.Document(r)
	if err != nil {
		return "", err
	}
	var d struct{ Body json.RawMessage }
	if err := json.Unmarshal(doc, &d); err != nil {
		tb.Fatal(err)
	}
	return string(d.Body), nil
}

// dflt is the Default of the member at pointer p when absent: v, a JSON text.
func dflt(tb testing.TB, p, v string) Default { return Default{mustPointer(tb, p), []byte(v)} }

// normRule is the Normalization of the member at pointer p by ops.
func normRule(tb testing.TB, p string, ops ...string) Normalization {
	return Normalization{mustPointer(tb, p), ops}
}
