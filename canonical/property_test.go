package canonical

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

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
