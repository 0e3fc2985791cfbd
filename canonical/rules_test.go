package canonical

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func jsonRequest(body string) *Request {
	return &Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
}

// ruleCase is a body under a rule and the body part it must give.
type ruleCase struct {
	name   string
	fields Fields
	body   string
	want   string
}

func runRuleCases(t *testing.T, tests []ruleCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := bodyPart(t, tt.fields, jsonRequest(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("body part\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	meta := Fields{Defaults: []Default{dflt(t, "/metadata", `{}`)}}
	runRuleCases(t, []ruleCase{
		{"absent member added", meta, `{"name":"w1"}`, `{"metadata":{},"name":"w1"}`},
		{"present member kept", meta, `{"name":"w1","metadata":{"a":1}}`, `{"metadata":{"a":1},"name":"w1"}`},
		{"null is present", meta, `{"name":"w1","metadata":null}`, `{"metadata":null,"name":"w1"}`},
		{"value in canonical form", Fields{Defaults: []Default{dflt(t, "/n", ` { "b" : 1.0, "a" : [ 1e0 ] } `)}}, `{}`, `{"n":{"a":[1],"b":1}}`},
		{"absent ancestors created", Fields{Defaults: []Default{dflt(t, "/options/notify/email", `true`)}}, `{"a":1}`, `{"a":1,"options":{"notify":{"email":true}}}`},
		{"present ancestor extended", Fields{Defaults: []Default{dflt(t, "/options/notify", `true`)}}, `{"options":{"x":1}}`, `{"options":{"notify":true,"x":1}}`},
		{"ancestor not an object", Fields{Defaults: []Default{dflt(t, "/options/notify", `true`)}}, `{"options":"none"}`, `{"options":"none"}`},
		{"parent is an array", Fields{Defaults: []Default{dflt(t, "/items/3", `0`)}}, `{"items":[1]}`, `{"items":[1]}`},
		{"through an array element", Fields{Defaults: []Default{dflt(t, "/items/0/qty", `1`)}}, `{"items":[{"sku":"a"}]}`, `{"items":[{"qty":1,"sku":"a"}]}`},
		{"missing array element", Fields{Defaults: []Default{dflt(t, "/items/1/qty", `1`)}}, `{"items":[{"sku":"a"}]}`, `{"items":[{"sku":"a"}]}`},
		{"top level not an object", meta, `[1]`, `[1]`},
		{"ancestor default before descendant", Fields{Defaults: []Default{dflt(t, "/a/y", `2`), dflt(t, "/a", `{"x":1}`)}}, `{}`, `{"a":{"x":1,"y":2}}`},
		{"member name with escapes", Fields{Defaults: []Default{dflt(t, "/a~1b~0c", `1`)}}, `{}`, `{"a/b~c":1}`},
		{"inserted in member order", Fields{Defaults: []Default{dflt(t, "/b", `2`)}}, `{"c":3,"a":1}`, `{"a":1,"b":2,"c":3}`},
	})
}

// TestC07MetadataDefault is case C07 of docs/cases.md: {"name":"w1"} and {"name":"w1","metadata":{}} are one
// effect when /metadata defaults to {}, and two without the rule.
func TestC07MetadataDefault(t *testing.T) {
	t.Parallel()
	with, err := Compile(Fields{Defaults: []Default{dflt(t, "/metadata", `{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := jsonRequest(`{"name":"w1"}`), jsonRequest(`{"name":"w1","metadata":{}}`)
	if fingerprintOf(t, with, a) != fingerprintOf(t, with, b) {
		t.Error("with the rule: the retry conflicts")
	}
	if fingerprintOf(t, nil, a) == fingerprintOf(t, nil, b) {
		t.Error("without the rule: the two bodies replay")
	}
}

func TestSets(t *testing.T) {
	t.Parallel()
	labels := Fields{Sets: []Pointer{mustPointer(t, "/labels")}}
	runRuleCases(t, []ruleCase{
		{"sorted", labels, `{"labels":["b","c","a"]}`, `{"labels":["a","b","c"]}`},
		{"duplicates dropped", labels, `{"labels":["b","a","b","a"]}`, `{"labels":["a","b"]}`},
		{"equal after canonicalization", labels, `{"labels":[1.0,1,1e0,{"b":1,"a":2},{"a":2,"b":1.0}]}`, `{"labels":[1,{"a":2,"b":1}]}`},
		{"mixed kinds", labels, `{"labels":["a",null,2,true,[1],{}]}`, `{"labels":["a",2,[1],null,true,{}]}`},
		{"not an array", labels, `{"labels":"a,b"}`, `{"labels":"a,b"}`},
		{"absent", labels, `{"x":1}`, `{"x":1}`},
		{"empty", labels, `{"labels":[]}`, `{"labels":[]}`},
		{"nested sets, inner first", Fields{Sets: []Pointer{mustPointer(t, "/g"), mustPointer(t, "/g/0/tags")}},
			`{"g":[{"tags":["y","x"]},{"tags":["x","y"]}]}`, `{"g":[{"tags":["x","y"]}]}`},
		{"array element", Fields{Sets: []Pointer{mustPointer(t, "/m/1")}}, `{"m":[[2,1],[2,1]]}`, `{"m":[[2,1],[1,2]]}`},
	})
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"trim", Fields{Normalize: []Normalization{normRule(t, "/t", "trim")}}, `{"t":" \t\n a  b \u00a0\u3000"}`, `{"t":"a  b"}`},
		{"collapse_space", Fields{Normalize: []Normalization{normRule(t, "/t", "collapse_space")}}, `{"t":"  a \t\n b\u2003\u2003c "}`, `{"t":" a b c "}`},
		{"collapse_space keeps single spaces", Fields{Normalize: []Normalization{normRule(t, "/t", "collapse_space")}}, `{"t":"a b c"}`, `{"t":"a b c"}`},
		{"trim then collapse", Fields{Normalize: []Normalization{normRule(t, "/t", "trim", "collapse_space")}}, `{"t":"  Disk   full\ton db-1 \n"}`, `{"t":"Disk full on db-1"}`},
		{"casefold", Fields{Normalize: []Normalization{normRule(t, "/t", "casefold")}}, `{"t":"Straße ΣΑΣ Jane@Example.COM"}`, `{"t":"strasse σασ jane@example.com"}`},
		{"casefold of Cherokee, whose folding is uppercase", Fields{Normalize: []Normalization{normRule(t, "/t", "casefold")}}, `{"t":"\u13a0\uab70\u13f8\u13f0"}`, "{\"t\":\"\u13a0\u13a0\u13f0\u13f0\"}"},
		{"nfc", Fields{Normalize: []Normalization{normRule(t, "/t", "nfc")}}, `{"t":"Cafe\u0301 \u212b"}`, `{"t":"Café Å"}`},
		{"nfc, casefold, nfc", Fields{Normalize: []Normalization{normRule(t, "/t", "nfc", "casefold", "nfc")}}, `{"t":"CAFE\u0301"}`, `{"t":"café"}`},
		{"zero width space is not white space", Fields{Normalize: []Normalization{normRule(t, "/t", "trim")}}, `{"t":"\u200ba\u200b"}`, "{\"t\":\"\u200ba\u200b\"}"},
		{"array of strings", Fields{Normalize: []Normalization{normRule(t, "/tags", "trim", "casefold")}}, `{"tags":[" Bug","FEATURE ",3,null,{"a":" A "}]}`, `{"tags":["bug","feature",3,null,{"a":" A "}]}`},
		{"not a string", Fields{Normalize: []Normalization{normRule(t, "/t", "trim")}}, `{"t":{" a ":" b "}}`, `{"t":{" a ":" b "}}`},
		{"absent", Fields{Normalize: []Normalization{normRule(t, "/t", "trim")}}, `{"x":" a "}`, `{"x":" a "}`},
		{"member names untouched", Fields{Normalize: []Normalization{normRule(t, "/ T ", "trim")}}, `{" T ":" a "}`, `{" T ":"a"}`},
	})
}

// TestRuleOrder checks the documented order: format, defaults, exclude, normalize, sets, include.
func TestRuleOrder(t *testing.T) {
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"normalize before sets", Fields{
			Sets:      []Pointer{mustPointer(t, "/labels")},
			Normalize: []Normalization{normRule(t, "/labels", "trim", "casefold")},
		}, `{"labels":["bug ","Bug","feature"]}`, `{"labels":["bug","feature"]}`},
		{"defaults before exclude", Fields{
			Defaults: []Default{dflt(t, "/trace", `"x"`)},
			Exclude:  []Pointer{mustPointer(t, "/trace")},
		}, `{"a":1}`, `{"a":1}`},
		{"defaults before normalize", Fields{
			Defaults:  []Default{dflt(t, "/title", `"  Untitled "`)},
			Normalize: []Normalization{normRule(t, "/title", "trim")},
		}, `{}`, `{"title":"Untitled"}`},
		{"defaults and sets before include", Fields{
			Include:  []Pointer{mustPointer(t, "/labels"), mustPointer(t, "/title")},
			Defaults: []Default{dflt(t, "/labels", `["b","a"]`)},
			Sets:     []Pointer{mustPointer(t, "/labels")},
		}, `{"title":"x","other":1}`, `{"/labels":["a","b"],"/title":"x"}`},
		{"exclude before sets", Fields{
			Exclude: []Pointer{mustPointer(t, "/l/0")},
			Sets:    []Pointer{mustPointer(t, "/l")},
		}, `{"l":["z","b","a"]}`, `{"l":["a","b"]}`},
	})
}

func TestFormats(t *testing.T) {
	t.Parallel()
	form := &Request{Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("a=2&a=1&b=%20x")}
	tests := []struct {
		name   string
		fields Fields
		req    *Request
		want   string
	}{
		{"json whatever the type", Fields{Format: FormatJSON}, &Request{Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(`{"b":1,"a":2}`)}, `{"a":2,"b":1}`},
		{"json without a type", Fields{Format: FormatJSON}, &Request{Body: []byte(`[1.0]`)}, `[1]`},
		{"form whatever the type", Fields{Format: FormatForm}, form, `{"a":["2","1"],"b":[" x"]}`},
		{"form rules", Fields{Format: FormatForm, Sets: []Pointer{mustPointer(t, "/a")}, Normalize: []Normalization{normRule(t, "/b", "trim")}}, form, `{"a":["1","2"],"b":["x"]}`},
		{"form body under json", Fields{Format: FormatForm}, &Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"a":1}`)}, `{"{\"a\":1}":[""]}`},
		{"empty body stays null", Fields{Format: FormatGraphQL, Defaults: []Default{dflt(t, "/x", `1`)}}, &Request{}, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := *tt.req // two rows share form: each subtest sets its own copy
			req.Tool, req.Method = "t", "POST"
			got, err := bodyPart(t, tt.fields, &req)
			if err != nil || got != tt.want {
				t.Errorf("body part %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// TestRulesOnOpaqueBody checks that each body rule, like include and exclude, refuses a body that
// is neither JSON nor a form rather than fingerprint its hash.
func TestRulesOnOpaqueBody(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]Fields{
		"sets":      {Sets: []Pointer{mustPointer(t, "/a")}},
		"defaults":  {Defaults: []Default{dflt(t, "/a", `1`)}},
		"normalize": {Normalize: []Normalization{normRule(t, "/a", "trim")}},
	} {
		_, err := bodyPart(t, f, &Request{Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("a")})
		if !errors.Is(err, ErrInvalidBody) || !strings.Contains(err.Error(), "not JSON, a form or multipart/form-data") {
			t.Errorf("%s: %v, want the not-JSON error", name, err)
		}
	}
	// Without body rules the hash stays, and a format other than "" never hashes.
	if got, err := bodyPart(t, Fields{Query: []string{"q"}}, &Request{Body: []byte("a")}); err != nil || !strings.HasPrefix(got, `"sha256:`) {
		t.Errorf("opaque body without rules: %s, %v", got, err)
	}
	if _, err := bodyPart(t, Fields{Format: FormatJSON}, &Request{Body: []byte("a")}); !errors.Is(err, ErrInvalidBody) {
		t.Errorf("format json on a non-JSON body: %v", err)
	}
}

// TestRulesLeaveCanonicalizerAlone runs the rules concurrently over one Canonicalizer: a default
// value must be copied into each document, never shared and then sorted or normalized in place.
func TestRulesLeaveCanonicalizerAlone(t *testing.T) {
	t.Parallel()
	c, err := Compile(Fields{
		Defaults:  []Default{dflt(t, "/labels", `[" b","a ","b"]`), dflt(t, "/meta", `{"k":" V "}`)},
		Normalize: []Normalization{normRule(t, "/labels", "trim"), normRule(t, "/meta/k", "trim", "casefold")},
		Sets:      []Pointer{mustPointer(t, "/labels")},
	})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"body":{"labels":["a","b"],"meta":{"k":"v"}},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				doc, err := c.Document(jsonRequest(`{}`))
				if err != nil || string(doc) != want {
					t.Errorf("Document() = %s, %v; want %s", doc, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := string(appendValue(nil, &c.defaults[0].val)); got != `[" b","a ","b"]` {
		t.Errorf("default value changed to %s", got)
	}
}

// TestZeroRulesKeepFingerprints checks that Fields whose new members are zero give the documents
// they gave before the rules existed (the golden files hold more of them).
func TestZeroRulesKeepFingerprints(t *testing.T) {
	t.Parallel()
	c, err := Compile(Fields{Include: []Pointer{mustPointer(t, "/title")}, Sets: []Pointer{}, Defaults: []Default{}, Normalize: []Normalization{}})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.Document(jsonRequest(`{"title":" x ","y":1}`))
	const want = `{"body":{"/title":" x "},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`
	if err != nil || string(doc) != want {
		t.Errorf("Document() = %s, %v; want %s", doc, err, want)
	}
}

func TestCheckFormatAndNormalization(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"", "json", "form", "graphql", "jsonrpc"} {
		if err := CheckFormat(f); err != nil {
			t.Errorf("CheckFormat(%q) = %v", f, err)
		}
	}
	for _, op := range []string{"trim", "collapse_space", "casefold", "nfc"} {
		if err := CheckNormalization(op); err != nil {
			t.Errorf("CheckNormalization(%q) = %v", op, err)
		}
	}
	if err := CheckNormalization(""); err == nil || err.Error() != `"": unknown normalization (want trim, collapse_space, casefold or nfc)` {
		t.Errorf("CheckNormalization(\"\") = %v", err)
	}
	if err := CheckFormat("yaml"); err == nil || err.Error() != `"yaml": unknown format (want json, form, multipart, graphql or jsonrpc)` {
		t.Errorf("CheckFormat(\"yaml\") = %v", err)
	}
}
