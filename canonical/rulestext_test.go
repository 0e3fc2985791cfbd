package canonical

import (
	"net/http"
	"testing"
)

// TestRulesText: a rule set's text is canonical (the same rules listed in another order give the
// same text), CompileRules makes a Canonicalizer that fingerprints every request as the first,
// and the zero rules are "{}".
func TestRulesText(t *testing.T) {
	t.Parallel()
	f := Fields{
		Format:    FormatJSON,
		Include:   []Pointer{mustPointer(t, "/title"), mustPointer(t, "/labels"), mustPointer(t, "/meta")},
		Exclude:   []Pointer{mustPointer(t, "/meta/trace")},
		Query:     []string{"dry_run", "a"},
		Headers:   []string{"X-Account", "Accept-Language"},
		Sets:      []Pointer{mustPointer(t, "/labels")},
		Defaults:  []Default{{mustPointer(t, "/meta"), []byte(`{ "b": 1.50, "a": [] }`)}},
		Normalize: []Normalization{{mustPointer(t, "/title"), []string{"trim", "casefold"}}},
	}
	reordered := f
	reordered.Include = []Pointer{mustPointer(t, "/meta"), mustPointer(t, "/title"), mustPointer(t, "/labels")}
	reordered.Query = []string{"a", "dry_run"}
	reordered.Headers = []string{"accept-language", "x-account"}
	c1, err := Compile(f)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := Compile(reordered)
	if string(c1.Rules()) != string(c2.Rules()) {
		t.Errorf("the same rules in another order: %s and %s", c1.Rules(), c2.Rules())
	}
	again, err := CompileRules(c1.Rules())
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Rules()) != string(c1.Rules()) {
		t.Errorf("CompileRules(Rules()) has the text %s, want %s", again.Rules(), c1.Rules())
	}
	r := &Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"application/json"}, "X-Account": {"acme"}},
		Body: []byte(`{"title":" Disk ","labels":["b","a","b"],"meta":{"trace":"x"}}`)}
	d1, err1 := c1.Document(r)
	d2, err2 := again.Document(r)
	if err1 != nil || err2 != nil || string(d1) != string(d2) {
		t.Errorf("documents %s (%v) and %s (%v) differ", d1, err1, d2, err2)
	}
	zero, _ := Compile(Fields{})
	if string(zero.Rules()) != "{}" || string((*Canonicalizer)(nil).Rules()) != "{}" {
		t.Errorf("the zero rules: %s", zero.Rules())
	}
	if _, err := CompileRules([]byte(`{"include":["title"]}`)); err == nil {
		t.Error("CompileRules of a bad pointer: no error")
	}
}

// TestReadsField: which fields a rule set's documents hold.
func TestReadsField(t *testing.T) {
	t.Parallel()
	included, _ := Compile(Fields{Include: []Pointer{mustPointer(t, "/fields/summary"), mustPointer(t, "/labels")}, Query: []string{"a/b"}, Headers: []string{"X-Account"}})
	excluded, _ := Compile(Fields{Exclude: []Pointer{mustPointer(t, "/trace"), mustPointer(t, "/meta/id")}})
	graphql, _ := Compile(Fields{Format: FormatGraphQL, Exclude: []Pointer{mustPointer(t, "/document")}})
	for _, tc := range []struct {
		c     *Canonicalizer
		field string
		want  bool
	}{
		{included, "method", true}, {included, "tool", true}, {included, "body", true}, {included, "path/id", true},
		{included, "query/a~1b", true}, {included, "query/c", false},
		{included, "headers/x-account", true}, {included, "headers/accept", false},
		{included, "/fields/summary", true}, {included, "/fields/summary/lang", true}, {included, "/fields", true},
		{included, "/fields/description", false}, {included, "/labelsx", false},
		{excluded, "/title", true}, {excluded, "/trace", false}, {excluded, "/trace/span", false},
		{excluded, "/meta", true}, {excluded, "/meta/id", false}, {excluded, "/meta/name", true},
		{graphql, "/query", false}, {graphql, "/variables/input/title", true},
	} {
		if got := tc.c.ReadsField(tc.field); got != tc.want {
			t.Errorf("%s: ReadsField(%q) = %v, want %v", tc.c.Rules(), tc.field, got, tc.want)
		}
	}
}

// TestLookupLenient: an answer's value at a pointer, read as encoding/json reads it, as canonical
// JSON text.
func TestLookupLenient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		data, ptr, want string
		ok              bool
	}{
		{`{"a":{"b":[1,{"c":1.50}]}}`, "/a/b/1/c", `1.5`, true},
		{`{"a":"x","a":"y"}`, "/a", `"y"`, true},
		{"{\"a\":\"caf\xe9\"}", "/a", "\"caf\uFFFD\"", true},
		{`{"a":null}`, "/a", `null`, true},
		{`{"a":[1]}`, "/a/01", ``, false},
		{`{"a":1}`, "/b", ``, false},
		{`{"a":1} {}`, "/a", ``, false},
		{`not json`, "/a", ``, false},
	} {
		got, ok := LookupLenient([]byte(tc.data), mustPointer(t, tc.ptr))
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("LookupLenient(%q, %s) = %s, %v; want %s, %v", tc.data, tc.ptr, got, ok, tc.want, tc.ok)
		}
	}
}
