package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalize checks that Canonicalize never panics, is deterministic and idempotent, keeps
// the meaning of its input, and accepts every JSON text that encoding/json accepts unless it has
// a duplicated member name, invalid UTF-8 or an escaped lone surrogate.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		out2, err2 := Canonicalize(in)
		if !bytes.Equal(out, out2) || (err == nil) != (err2 == nil) {
			t.Fatalf("not deterministic: %q, %v then %q, %v", out, err, out2, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidBody) || !strings.HasPrefix(err.Error(), "invalid body: ") {
				t.Fatalf("error does not wrap ErrInvalidBody: %v", err)
			}
			if json.Valid(in) && utf8.Valid(in) && !hasLoneSurrogate(in) && !hasDuplicateNames(t, in) {
				t.Fatalf("valid JSON rejected: %q: %v", in, err)
			}
			return
		}
		if hasDuplicateNames(t, in) {
			t.Fatalf("duplicated member names accepted: %q -> %q", in, out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		if !sameJSON(t, in, out) {
			t.Fatalf("meaning changed: %q -> %q", in, out)
		}
		for _, p := range []string{"/0", "/a", "/a/0"} {
			Lookup(in, mustPointer(t, p))
		}
	})
}

// FuzzDocument checks that Document never panics and is deterministic, and that what it returns is
// canonical JSON, whatever the body and its type, under Fields that project and select.
func FuzzDocument(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, "application/json")
	}
	f.Add([]byte("a=1&a=2&b=%C3%A9"), "application/x-www-form-urlencoded")
	f.Add([]byte("hello"), "text/plain")
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=title\r\n\r\nx\r\n--b\r\ncontent-type: text/plain\r\nContent-Disposition: form-data; name=\"items\"; filename=a\r\n\r\n1\r\n--b--\r\n"), "multipart/form-data; boundary=b")
	f.Add([]byte(`{"items":[1,2,3],"title":"x","meta":{"at":1}}`), "application/problem+json")
	c, err := Compile(Fields{
		Include: []Pointer{mustPointer(f, "/items"), mustPointer(f, "/title"), mustPointer(f, "/a/0"), mustPointer(f, "/1")},
		Exclude: []Pointer{mustPointer(f, "/items/0"), mustPointer(f, "/items/2"), mustPointer(f, "/meta"), mustPointer(f, "/a/1")},
		Query:   []string{"q"},
		Headers: []string{"X-A"},
	})
	if err != nil {
		f.Fatal(err)
	}
	// The same body under each format, with rules of every kind on the members they make.
	rules := Fields{
		Sets:      []Pointer{mustPointer(f, "/items"), mustPointer(f, "/variables/i/l"), mustPointer(f, "/params/arguments/tags")},
		Defaults:  []Default{{mustPointer(f, "/meta"), []byte(`{}`)}, {mustPointer(f, "/params/arguments/x/y"), []byte(`[1]`)}},
		Normalize: []Normalization{{mustPointer(f, "/title"), []string{"trim", "collapse_space", "nfc", "casefold", "nfc"}}, {mustPointer(f, "/variables/i/t"), []string{"trim"}}},
		Exclude:   []Pointer{mustPointer(f, "/items/0")},
	}
	formats := []*Canonicalizer{c}
	for _, format := range []string{"", FormatJSON, FormatForm, FormatMultipart, FormatGraphQL, FormatJSONRPC} {
		ff := rules
		ff.Format = format
		fc, err := Compile(ff)
		if err != nil {
			f.Fatal(err)
		}
		formats = append(formats, fc)
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		r := &Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {contentType}, "X-A": {contentType}}, Body: body}
		for _, c := range formats {
			doc, err := c.Document(r)
			doc2, steps, err2 := c.Explain(r)
			if !bytes.Equal(doc, doc2) || (err == nil) != (err2 == nil) {
				t.Fatalf("not deterministic, or Explain differs: %q, %v then %q, %v", doc, err, doc2, err2)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidBody) {
					t.Fatalf("error does not wrap ErrInvalidBody: %v", err)
				}
				continue
			}
			if len(steps) == 0 {
				t.Fatalf("Explain gives no step")
			}
			if again, err := Canonicalize(doc); err != nil || !bytes.Equal(again, doc) {
				t.Fatalf("document is not canonical: %q -> %q, %v", doc, again, err)
			}
		}
	})
}

// hasDuplicateNames reports whether the valid JSON text data has an object with a member name
// twice (compared after unescaping), using encoding/json as an independent reader.
func hasDuplicateNames(tb testing.TB, data []byte) bool {
	tb.Helper()
	type frame struct {
		object  bool
		wantKey bool
		names   map[string]bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			tb.Fatalf("encoding/json cannot read the text it called valid: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				if top != nil && top.object {
					top.wantKey = true
				}
				stack = append(stack, &frame{object: tok == '{', wantKey: true, names: map[string]bool{}})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.object && top.wantKey {
				if top.names[tok] {
					return true
				}
				top.names[tok] = true
				top.wantKey = false
			} else if top != nil && top.object {
				top.wantKey = true
			}
		default:
			if top != nil && top.object {
				top.wantKey = true
			}
		}
	}
}

// hasLoneSurrogate reports whether the valid JSON text data escapes a UTF-16 surrogate that is
// not part of a pair (such as "\ud800"), which encoding/json accepts and Canonicalize rejects.
func hasLoneSurrogate(data []byte) bool {
	unit := func(i int) (rune, bool) { // the \uXXXX escape at data[i:], if any
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range data[i+2 : i+6] {
			switch {
			case '0' <= c && c <= '9':
				r = r<<4 | rune(c-'0')
			case 'a' <= c && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case 'A' <= c && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			}
		}
		return r, true
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		r, ok := unit(i)
		if !ok {
			i++ // a two-character escape such as \\ or \"
			continue
		}
		switch {
		case 0xdc00 <= r && r <= 0xdfff:
			return true
		case 0xd800 <= r && r <= 0xdbff:
			low, ok := unit(i + 6)
			if !ok || low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 6
		}
		i += 5
	}
	return false
}

// sameJSON reports whether the JSON texts a and b have the same meaning: equal strings, literals,
// arrays in order, objects member by member, and numbers of equal exact value.
func sameJSON(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	decode := func(data []byte) any {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			tb.Fatalf("encoding/json cannot read %q: %v", data, err)
		}
		return v
	}
	return sameValue(decode(a), decode(b))
}

func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		if hugeExponent(string(a)) || hugeExponent(string(b)) {
			return true // big.Rat would need memory in proportion to the exponent
		}
		x, okx := new(big.Rat).SetString(string(a))
		y, oky := new(big.Rat).SetString(string(b))
		return okx && oky && x.Cmp(y) == 0
	default:
		return a == b
	}
}

func hugeExponent(n string) bool {
	i := strings.IndexAny(n, "eE")
	return i >= 0 && len(strings.TrimLeft(n[i+1:], "+-0")) > 4
}

func TestFuzzHelpers(t *testing.T) {
	t.Parallel()
	dup := map[string]bool{
		`{"a":1,"b":2}`:               false,
		`{"a":1,"a":2}`:               true,
		`{"a":{"a":1},"b":{"a":1}}`:   false,
		`[{"a":"a","b":"a"}]`:         false,
		`{"a":[{"x":1}],"a\u0000":1}`: false,
		`{"a":{"b":[]},"a":1}`:        true,
		`{"x":{"k":"k","k":"k"}}`:     true,
		`{"\u0061":1,"a":2}`:          true,
	}
	for in, want := range dup {
		if got := hasDuplicateNames(t, []byte(in)); got != want {
			t.Errorf("hasDuplicateNames(%s) = %t, want %t", in, got, want)
		}
	}
	lone := map[string]bool{
		`"\ud83d\ude00"`:   false,
		`"\ud83d"`:         true,
		`"\ude00"`:         true,
		`"\ud83d\u0041"`:   true,
		`"\\ud83d"`:        false,
		`"\\\ud83d"`:       true,
		`"a\u0041\uD800x"`: true,
	}
	for in, want := range lone {
		if got := hasLoneSurrogate([]byte(in)); got != want {
			t.Errorf("hasLoneSurrogate(%s) = %t, want %t", in, got, want)
		}
	}
}
