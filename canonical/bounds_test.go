package canonical

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/internal/allocs"
)

// allocated returns the bytes f allocates (internal/allocs: the least of three calls): every
// allocation, so an upper bound of what f holds at its peak.
func allocated(f func()) int64 {
	return int64(allocs.Bytes(3, f))
}

// arrayBody returns a JSON array of about size bytes whose elements are each the JSON text elem.
func arrayBody(size int, elem string) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for b.Len() < size-len(elem)-1 {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// objectBody returns a JSON object of n members with short distinct names, in an order that is not
// theirs (the sort's scratch grows with the object's members).
func objectBody(n int) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%x":0`, (i*7919)%n)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// duplicateLast returns the JSON object obj with a member named as its first added last.
func duplicateLast(obj []byte) []byte {
	return append(obj[:len(obj)-1:len(obj)-1], `,"0":1}`...)
}

// graphqlSelections returns a GraphQL request of about size bytes: a mutation of aliased fields,
// each with a string argument of about 150 bytes (1 MiB holds about 85000 tokens).
func graphqlSelections(size int) []byte {
	var q strings.Builder
	q.WriteString("mutation Batch {")
	for i := 0; q.Len() < size-200; i++ {
		fmt.Fprintf(&q, ` t%d: createTicket(title: \"Printer on floor %d is out of toner; checked the tray twice, still empty; the order for a new cartridge went out on Monday\") { id }`, i, i)
	}
	q.WriteString("}")
	return []byte(`{"query":"` + q.String() + `","variables":{}}`)
}

// graphqlShortFields returns a GraphQL request whose document is a query of n-2 short fields (n
// tokens), the document with the most syntax tree per byte.
func graphqlShortFields(n int) []byte {
	var q strings.Builder
	q.WriteString("{")
	for i := range n - 2 {
		fmt.Fprintf(&q, " f%d", i)
	}
	q.WriteString("}")
	return []byte(`{"query":"` + q.String() + `"}`)
}

// TestMemoryBound measures a fingerprint's memory (docs/fingerprint.md#bounds): Document allocates
// at most MemoryBound for 1 MiB bodies of many shapes, and a body over the value budget is refused
// having allocated a small fraction of its size.
func TestMemoryBound(t *testing.T) {
	const mib = 1 << 20
	rules := Fields{
		Exclude:   []Pointer{mustPointer(t, "/trace_id")},
		Sets:      []Pointer{mustPointer(t, "/labels"), mustPointer(t, "/comments")},
		Defaults:  []Default{{mustPointer(t, "/metadata"), []byte(`{}`)}},
		Normalize: []Normalization{{mustPointer(t, "/title"), []string{"trim", "collapse_space", "nfc", "casefold", "nfc"}}},
	}
	tests := []struct {
		name    string
		fields  Fields
		ct      string
		body    []byte
		graphql bool
		refused error // ErrBodyTooComplex, refused before the tree is built; ErrInvalidBody, after
	}{
		{"ticket with comments", Fields{}, "application/json", benchBody(mib), false, nil},
		{"array of 100-byte strings", Fields{}, "application/json", arrayBody(mib, `"`+strings.Repeat("x", 98)+`"`), false, nil},
		{"array of numbers to rewrite, at the budget", Fields{}, "application/json", arrayBody(mib, "1.0000000e0"), false, nil},
		{"object of short members, at the budget", Fields{}, "application/json", objectBody(DefaultMaxValues / 2), false, nil},
		{"object of short members, a duplicate last", Fields{}, "application/json", duplicateLast(objectBody(DefaultMaxValues / 2)), false, ErrInvalidBody},
		{"array of escaped strings", Fields{}, "application/json", arrayBody(mib, `"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"`), false, nil},
		{"rules of every kind", rules, "application/json", benchBody(mib), false, nil},
		{"include", Fields{Include: []Pointer{mustPointer(t, "/title")}}, "application/json", benchBody(mib), false, nil},
		{"include, object of short members at the budget", Fields{Include: []Pointer{mustPointer(t, "/title")}}, "application/json", objectBody(DefaultMaxValues - 10), false, nil},
		{"graphql document", Fields{Format: FormatGraphQL}, "application/json", graphqlSelections(mib), true, nil},
		{"graphql document of short fields, at the budget", Fields{Format: FormatGraphQL}, "application/json", graphqlShortFields(99_990), true, nil},
		{"graphql variables", Fields{Format: FormatGraphQL}, "application/json", benchGraphQLBody(mib), true, nil},
		{"multipart of small fields, at the budget", Fields{}, "multipart/form-data; boundary=b", multipartFields(DefaultMaxValues / multipartPartValues), false, nil},
		{"multipart of one large file", Fields{}, "multipart/form-data; boundary=b", multipartFile(mib), false, nil},
		{"multipart of small fields, over the budget", Fields{}, "multipart/form-data; boundary=b", multipartFields(DefaultMaxValues/multipartPartValues + 1), false, ErrBodyTooComplex},
		{"array of small numbers, over the budget", Fields{}, "application/json", arrayBody(mib, "1"), false, ErrBodyTooComplex},
		{"graphql document, over the budget", Fields{Format: FormatGraphQL}, "application/json", graphqlSelections(4 * mib), true, ErrBodyTooComplex},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(tt.fields)
			if err != nil {
				t.Fatal(err)
			}
			r := &Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {tt.ct}}, Body: tt.body}
			var derr error
			got := allocated(func() { _, derr = c.Document(r) })
			bound := c.MemoryBound(len(tt.body), 0)
			t.Logf("%d-byte body: %d bytes allocated (%.1f× the body), bound %d", len(tt.body), got, float64(got)/float64(len(tt.body)), bound)
			if tt.refused != nil {
				if !errors.Is(derr, tt.refused) {
					t.Fatalf("Document: %v, want %v", derr, tt.refused)
				}
				if tt.refused == ErrBodyTooComplex && !tt.graphql && got > int64(len(tt.body))/4 {
					t.Errorf("refused having allocated %d bytes, want at most a quarter of the %d-byte body", got, len(tt.body))
				}
				if got > bound { // the query string is read before its tokens are counted; a duplicate found with the tree
					t.Errorf("refused having allocated %d bytes, over MemoryBound %d", got, bound)
				}
				return
			}
			if derr != nil {
				t.Fatal(derr)
			}
			if got > bound {
				t.Errorf("allocated %d bytes, over MemoryBound %d", got, bound)
			}
		})
	}
}

// TestValueBudget: a body of exactly MaxValues values is read, one more is refused with
// ErrBodyTooComplex (not ErrInvalidBody) whatever the format, and a body whose syntax is invalid
// before it reaches the budget is still invalid. A duplicated member name is found when the tree
// is built, after the values are counted: a body over the budget is too complex wherever its
// duplicate is.
func TestValueBudget(t *testing.T) {
	tests := []struct {
		name   string
		format string
		body   string
		max    int
		want   error
	}{
		{"json at the budget", "", `{"a":[1,2],"b":null}`, 5, nil},
		{"json over the budget", "", `{"a":[1,2],"b":null}`, 4, ErrBodyTooComplex},
		{"scalar at the budget", "", `"x"`, 1, nil},
		{"invalid before the budget", "", `{"a":1,"a":2}`, 100, ErrInvalidBody},
		{"duplicate member past the budget", "", `[1,2,3,{"a":1,"a":2}]`, 3, ErrBodyTooComplex},
		// Duplicates are found when the tree is built, after the values are counted.
		{"duplicate member before the budget", "", `[{"a":1,"a":2},1,2,3]`, 4, ErrBodyTooComplex},
		{"jsonrpc over the budget", FormatJSONRPC, `{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}`, 5, ErrBodyTooComplex},
		{"jsonrpc at the budget", FormatJSONRPC, `{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}`, 7, nil},
		// 3 JSON values ({}, "query" and its string) and 4 tokens: { a b }.
		{"graphql at the budget", FormatGraphQL, `{"query":"{ a b }"}`, 6, nil},
		{"graphql tokens over the budget", FormatGraphQL, `{"query":"{ a b }"}`, 5, ErrBodyTooComplex},
		{"graphql variables over the budget", FormatGraphQL, `{"query":"{ a }","variables":{"x":[1,2,3]}}`, 6, ErrBodyTooComplex},
		{"form bodies have no budget", FormatForm, `a=1&b=2&c=3`, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(Fields{Format: tt.format})
			if err != nil {
				t.Fatal(err)
			}
			r := &Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(tt.body), MaxValues: tt.max}
			_, err = c.Document(r)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("Document: %v", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("Document: %v, want %v", err, tt.want)
			case errors.Is(err, ErrBodyTooComplex) && errors.Is(err, ErrInvalidBody):
				t.Fatalf("Document: %v matches ErrInvalidBody too", err)
			}
		})
	}
}

// TestIncludeBuildsOnlyItsMembers: a route whose only body rule is include reads only the members
// its pointers need, and gets the document a whole parse gives (an exclude of an absent member
// forces one).
func TestIncludeBuildsOnlyItsMembers(t *testing.T) {
	include := []Pointer{mustPointer(t, "/title"), mustPointer(t, "/comments/1"), mustPointer(t, "/comments/0/author"),
		mustPointer(t, "/labels/01"), mustPointer(t, "/labels/2/x"), mustPointer(t, "/a~1b"), mustPointer(t, "/missing/deep")}
	partial, err := Compile(Fields{Include: include})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Compile(Fields{Include: include, Exclude: []Pointer{mustPointer(t, "/nothing-here")}})
	if err != nil {
		t.Fatal(err)
	}
	if partial.selection() == nil || whole.selection() != nil {
		t.Fatal("the include-only route reads the whole body, or the other does not")
	}
	bodies := []string{
		string(benchBody(4 << 10)),
		`{"a/b":{"x":[1,{"y":"\u00e9"}]},"title":"t\"q","labels":["a","b",{"x":1e2}],"other":{"deep":[[[]]]}}`,
		`[1,2,3]`, `"title"`, `{}`, `{"title":{"z":1,"a":2},"comments":[]}`,
	}
	for _, body := range bodies {
		r := &Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
		got, err := partial.Document(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := whole.Document(r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("body %.60s:\ngot  %s\nwant %s", body, got, want)
		}
	}
	big := benchBody(1 << 20)
	r := &Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: big}
	p := allocated(func() { _, _ = partial.Document(r) })
	w := allocated(func() { _, _ = whole.Document(r) })
	t.Logf("1 MiB body: include-only %d bytes, whole parse %d bytes", p, w)
	if p*2 > w {
		t.Errorf("include-only allocated %d bytes, the whole parse %d: want at most half", p, w)
	}
}

// multipartFields is a multipart/form-data body (boundary b) of n one-byte fields of one name.
func multipartFields(n int) []byte {
	return []byte(strings.Repeat("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n", n) + "--b--\r\n")
}

// multipartFile is a multipart/form-data body (boundary b) of one file part of about size bytes.
func multipartFile(size int) []byte {
	return []byte("--b\r\nContent-Disposition: form-data; name=file; filename=a.bin\r\nContent-Type: application/octet-stream\r\n\r\n" +
		strings.Repeat("\x00", size) + "\r\n--b--\r\n")
}
