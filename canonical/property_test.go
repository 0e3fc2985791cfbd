package canonical

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf16"

	"pgregory.net/rapid"
)

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

func space(t *rapid.T, b *strings.Builder) {
	b.WriteString(rapid.SampledFrom([]string{"", "", " ", "\n", "\t", "\r\n  "}).Draw(t, "space"))
}

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

// leafPaths returns the pointers of the scalars of v below at.
func leafPaths(v jvalue, at string) []string {
	switch v.kind {
	case '{':
		var out []string
		for i, name := range v.names {
			out = append(out, leafPaths(v.kids[i], at+"/"+escapeToken(name))...)
		}
		return out
	case '[':
		var out []string
		for i, e := range v.kids {
			out = append(out, leafPaths(e, fmt.Sprintf("%s/%d", at, i))...)
		}
		return out
	}
	return []string{at}
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

// namedChange is what DifferingFields names for a change of the scalar at toks in v when the
// rules include toks[:included] (0: the whole body): the included value descended into through
// objects, arrays named whole, as a pointer into the body ("body" for the whole of it).
func namedChange(v jvalue, toks []string, included int) string {
	at := ""
	for i, tok := range toks {
		if i >= included && v.kind != '{' {
			break
		}
		at += "/" + escapeToken(tok)
		if v.kind == '{' {
			for j, name := range v.names {
				if name == tok {
					v = v.kids[j]
				}
			}
		} else {
			var k int
			fmt.Sscan(tok, &k)
			v = v.kids[k]
		}
	}
	if at == "" {
		return "body"
	}
	return at
}

// changeLeaf returns v with the scalar at the pointer tokens toks replaced by a different value.
func changeLeaf(v jvalue, toks []string) jvalue {
	if len(toks) == 0 {
		switch v.kind {
		case '"':
			return jvalue{kind: '"', str: v.str + "x"}
		case '0':
			n := v.num
			n.digits += "1" // d×10^e becomes (10d+1)×10^e, never equal
			if n.digits == "01" {
				n.digits = "1"
			}
			return jvalue{kind: '0', num: n}
		case 't':
			return jvalue{kind: 'f'}
		case 'f':
			return jvalue{kind: 't'}
		default:
			return jvalue{kind: '0', num: jnumber{digits: "0"}}
		}
	}
	c := v
	c.kids = append([]jvalue(nil), v.kids...)
	if v.kind == '{' {
		for i, name := range v.names {
			if name == toks[0] {
				c.kids[i] = changeLeaf(v.kids[i], toks[1:])
			}
		}
		return c
	}
	var i int
	fmt.Sscan(toks[0], &i)
	c.kids[i] = changeLeaf(v.kids[i], toks[1:])
	return c
}

// genFields draws body rules over the pointers of v (and a few that match nothing). With
// idempotent, the rules are those that give the same body part when applied to their own
// result: no include or exclude (which remove), and no pointer through an array element (whose
// index a set may change).
func genFields(t *rapid.T, v jvalue, withInclude, idempotent bool) Fields {
	paths := append(allPaths(v, "", idempotent), "/absent", "/absent/deeper")
	if !idempotent {
		paths = append(paths, "/0")
	}
	pick := func(label string) []Pointer {
		chosen := rapid.SliceOfNDistinct(rapid.SampledFrom(paths), 0, 3, rapid.ID[string]).Draw(t, label)
		ps := make([]Pointer, len(chosen))
		for i, s := range chosen {
			p, err := ParsePointer(s)
			if err != nil {
				t.Fatalf("generated pointer %q: %v", s, err)
			}
			ps[i] = p
		}
		return ps
	}
	var f Fields
	if withInclude {
		f.Include = pick("include")
	}
	if !idempotent {
		f.Exclude = pick("exclude")
	}
	f.Sets = pick("sets")
	for _, p := range pick("defaults") {
		f.Defaults = append(f.Defaults, Default{p, []byte(rapid.SampledFrom([]string{`{}`, `[]`, `null`, `" A  b "`, `[2,1,2]`, `{"k":[" x"]}`}).Draw(t, "default"))})
	}
	ops := rapid.SliceOfN(rapid.SampledFrom([]string{"trim", "collapse_space", "casefold", "nfc"}), 1, 4)
	if idempotent {
		// Case folding's output is not always in NFC, so [nfc, casefold] is not a fixed point
		// (NFC then composes what folding decomposed); the documented [nfc, casefold, nfc] is.
		ops = rapid.SampledFrom([][]string{{"trim"}, {"collapse_space"}, {"casefold"}, {"nfc"},
			{"trim", "collapse_space"}, {"nfc", "casefold", "nfc"}, {"trim", "collapse_space", "nfc", "casefold", "nfc"}})
	}
	for _, p := range pick("normalize") {
		f.Normalize = append(f.Normalize, Normalization{p, ops.Draw(t, "ops")})
	}
	return f
}

func documentOf(t *rapid.T, c *Canonicalizer, body string) []byte {
	doc, err := c.Document(&Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)})
	if err != nil {
		t.Fatalf("Document(%q): %v", body, err)
	}
	return doc
}

// TestPropertySpellingNeverMatters: re-ordering members, re-spacing, re-escaping strings and
// re-formatting numbers never change the canonical form, nor the fingerprint under any rules.
func TestPropertySpellingNeverMatters(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(3, false).Draw(t, "value")
		a, b := spellJSON(t, v), spellJSON(t, v)
		ca, err := Canonicalize([]byte(a))
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", a, err)
		}
		cb, err := Canonicalize([]byte(b))
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", b, err)
		}
		if string(ca) != string(cb) {
			t.Fatalf("two spellings of one value differ:\n%s -> %s\n%s -> %s", a, ca, b, cb)
		}
		c, err := Compile(genFields(t, v, rapid.Bool().Draw(t, "include"), false))
		if err != nil {
			t.Fatal(err)
		}
		if da, db := documentOf(t, c, a), documentOf(t, c, b); string(da) != string(db) {
			t.Fatalf("two spellings of one value get two documents:\n%s\n%s", da, db)
		}
	})
}

// TestPropertyIncludedScalarsMatter: changing any scalar that the rules include always changes
// the fingerprint (rules that can merge values, sets and normalize, left out).
func TestPropertyIncludedScalarsMatter(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(3, true).Draw(t, "value")
		leaves := leafPaths(v, "")
		if len(leaves) == 0 || leaves[0] == "" {
			t.Skip("no member")
		}
		leaf := rapid.SampledFrom(leaves).Draw(t, "leaf")
		p, err := ParsePointer(leaf)
		if err != nil {
			t.Fatal(err)
		}
		toks := p.tokens()
		changed := changeLeaf(v, toks)
		var f Fields
		included := 0 // how many of toks the include pointer has
		switch rapid.IntRange(0, 2).Draw(t, "rule") {
		case 1: // include the leaf's top-level member
			f.Include = []Pointer{rapidPointer(t, "/"+escapeToken(toks[0]))}
			included = 1
		case 2: // include the leaf itself, and add defaults elsewhere
			f.Include = []Pointer{p}
			f.Defaults = []Default{{rapidPointer(t, "/absent"), []byte(`{}`)}}
			included = len(toks)
		}
		c, err := Compile(f)
		if err != nil {
			t.Fatal(err)
		}
		before, after := documentOf(t, c, spellJSON(t, v)), documentOf(t, c, spellJSON(t, changed))
		if Fingerprint(before) == Fingerprint(after) {
			t.Fatalf("changing %s does not change the document %s", leaf, before)
		}
		if d, want := c.DifferingFields(before, after, 0), namedChange(v, toks, included); len(d) != 1 || d[0] != want {
			t.Fatalf("DifferingFields = %q between %s and %s, want [%q]", d, before, after, want)
		}
	})
}

// TestPropertyIdempotent: canonical JSON is a fixed point, and so is the body part that the rules
// make, sent again as the body (for the rules that can be: see genFields). Explain always agrees
// with Document, and nothing panics.
func TestPropertyIdempotent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(3, false).Draw(t, "value")
		text := spellJSON(t, v)
		once, err := Canonicalize([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if twice, err := Canonicalize(once); err != nil || string(twice) != string(once) {
			t.Fatalf("Canonicalize is not idempotent: %s -> %s, %v", once, twice, err)
		}
		f := genFields(t, v, false, true)
		c, err := Compile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := documentOf(t, c, text)
		edoc, _, err := c.Explain(&Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(text)})
		if err != nil || string(edoc) != string(doc) {
			t.Fatalf("Explain = %s, %v; Document %s", edoc, err, doc)
		}
		body := bodyOfDocument(t, doc)
		if again := bodyOfDocument(t, documentOf(t, c, body)); again != body {
			t.Fatalf("the rules are not idempotent under %+v:\n%s\n%s", f, body, again)
		}
	})
}

// bodyOfDocument returns the text of the "body" member of a canonical document.
func bodyOfDocument(t *rapid.T, doc []byte) string {
	s := string(doc)
	end := strings.LastIndex(s, `,"headers":{`)
	if !strings.HasPrefix(s, `{"body":`) || end < 0 {
		t.Fatalf("not a document: %s", doc)
	}
	return s[len(`{"body":`):end]
}

// TestPropertyArbitraryInput: any bytes under any format and rules either canonicalize or fail
// with ErrInvalidBody, and never panic.
func TestPropertyArbitraryInput(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		body := rapid.OneOf(rapid.SliceOf(rapid.Byte()), rapid.Map(genValue(2, false), func(v jvalue) []byte {
			return []byte(fmt.Sprintf(`{"query":%q,"method":"tools/call","params":%s}`, "{ a }", canonicalText(v)))
		})).Draw(t, "body")
		format := rapid.SampledFrom([]string{"", FormatJSON, FormatForm, FormatGraphQL, FormatJSONRPC}).Draw(t, "format")
		c, err := Compile(Fields{Format: format, Sets: []Pointer{rapidPointer(t, "/params")}, Normalize: []Normalization{{rapidPointer(t, "/params/0"), []string{"casefold"}}}})
		if err != nil {
			t.Fatal(err)
		}
		ct := rapid.SampledFrom([]string{"application/json", "application/x-www-form-urlencoded", "text/plain"}).Draw(t, "type")
		_, err = c.Document(&Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {ct}}, Body: body})
		if err != nil && !strings.HasPrefix(err.Error(), "invalid body: ") {
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// canonicalText writes v in its simplest spelling (for building bodies, not as a reference).
func canonicalText(v jvalue) string {
	switch v.kind {
	case 'n':
		return "null"
	case 't':
		return "true"
	case 'f':
		return "false"
	case '"':
		return string(appendString(nil, v.str))
	case '0':
		return fmt.Sprintf("%se%d", v.num.digits, v.num.exp)
	case '[':
		parts := make([]string, len(v.kids))
		for i, k := range v.kids {
			parts[i] = canonicalText(k)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	parts := make([]string, len(v.kids))
	for i, k := range v.kids {
		parts[i] = string(appendString(nil, v.names[i])) + ":" + canonicalText(k)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// rapidPointer parses a JSON Pointer that a property knows to be valid.
func rapidPointer(t *rapid.T, s string) Pointer {
	p, err := ParsePointer(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
