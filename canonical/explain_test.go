package canonical

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

func TestExplain(t *testing.T) {
	t.Parallel()
	c, err := Compile(Fields{
		Include:   []Pointer{mustPointer(t, "/title"), mustPointer(t, "/labels"), mustPointer(t, "/metadata"), mustPointer(t, "/due")},
		Exclude:   []Pointer{mustPointer(t, "/trace_id"), mustPointer(t, "/nothing")},
		Sets:      []Pointer{mustPointer(t, "/labels"), mustPointer(t, "/title"), mustPointer(t, "/gone")},
		Defaults:  []Default{dflt(t, "/metadata", `{}`), dflt(t, "/title", `""`), dflt(t, "/title/x", `1`)},
		Normalize: []Normalization{normRule(t, "/title", "trim", "casefold"), normRule(t, "/labels", "trim"), normRule(t, "/n", "nfc"), normRule(t, "/absent", "trim")},
		Query:     []string{"dry_run", "page"},
		Headers:   []string{"X-Account", "X-Org"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{
		Tool: "create_ticket", Method: "POST",
		Query:  url.Values{"dry_run": {"1"}},
		Header: http.Header{"Content-Type": {"application/json"}, "X-Account": {"a", "b"}},
		Body:   []byte(`{"title":" Printer ","labels":["b ","a"],"trace_id":"t1","n":1}`),
	}
	doc, steps, err := c.Explain(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{"/body/metadata", "defaulted", "defaults: absent, counts as {}"},
		{"/body/title/x", "absent", "defaults: an ancestor is not an object; nothing added"},
		{"/body/trace_id", "excluded", "exclude: removed"},
		{"/body/nothing", "absent", "exclude: nothing to remove"},
		{"/body/absent", "absent", "normalize: nothing at this pointer"},
		{"/body/labels", "normalized", "normalize: trim on each of 2 strings of the array (1 changed)"},
		{"/body/n", "normalized", "normalize: nfc does not apply: not a string or an array; left as is"},
		{"/body/title", "normalized", "normalize: trim, casefold (changed)"},
		{"/body/gone", "absent", "sets: nothing at this pointer"},
		{"/body/labels", "set", "sets: 2 elements compared as a set of 2"},
		{"/body/title", "set", "sets: not an array; left as is"},
		{"/body/due", "absent", "include: nothing at this pointer; left out of the document"},
		{"/body/labels", "included", `include: the body member "/labels"`},
		{"/body/metadata", "included", `include: the body member "/metadata"`},
		{"/body/title", "included", `include: the body member "/title"`},
		{"/headers/x-account", "included", "listed header, 2 value(s)"},
		{"/headers/x-org", "absent", "listed header not sent"},
		{"/query/dry_run", "included", "listed query parameter, 1 value(s)"},
		{"/query/page", "absent", "listed query parameter not sent"},
	}
	if !slices.Equal(steps, want) {
		t.Errorf("steps:")
		for _, s := range steps {
			t.Errorf("\t%+v", s)
		}
	}
	if d, err := c.Document(r); err != nil || string(d) != string(doc) {
		t.Errorf("Document() = %s, %v; Explain's document %s", d, err, doc)
	}
	const wantDoc = `{"body":{"/labels":["a","b"],"/metadata":{},"/title":"printer"},"headers":{"x-account":["a","b"]},"method":"POST","path":{},"query":{"dry_run":["1"]},"tool":"create_ticket"}`
	if string(doc) != wantDoc {
		t.Errorf("document %s, want %s", doc, wantDoc)
	}
}

func TestExplainFormats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fields Fields
		req    *Request
		want   []Step
	}{
		{"empty body", Fields{}, &Request{}, []Step{{"/body", "absent", "empty body: null whatever the rules"}}},
		{"opaque body", Fields{}, &Request{Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("x")},
			[]Step{{"/body", "included", "the Content-Type is not JSON, a form or multipart/form-data: the SHA-256 of the bytes"}}},
		{"graphql", Fields{Format: FormatGraphQL}, &Request{Body: []byte(`{"query":"query Q { a }","extensions":{},"x":1}`)}, []Step{
			{"/body/extensions", "excluded", "graphql: extensions (persisted-query hashes, tracing) never count"},
			{"/body/x", "excluded", "graphql: not a member of a GraphQL request; never counts"},
			{"/body/document", "normalized", "graphql: the query document, parsed and printed canonically (comments, white space and the order of selections, arguments and variables dropped)"},
			{"/body/operationName", "defaulted", "graphql: absent or null: the name of the document's only operation"},
			{"/body/variables", "defaulted", "graphql: absent or null: counts as {}"},
			{"/body", "included", "the whole body (no include pointers)"},
		}},
		{"jsonrpc", Fields{Format: FormatJSONRPC}, &Request{Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{},"name":"n"},"a/b":0}`)}, []Step{
			{"/body/a~1b", "excluded", "jsonrpc: not a member of a JSON-RPC request; never counts"},
			{"/body/id", "excluded", "jsonrpc: the request id never counts"},
			{"/body/jsonrpc", "excluded", "jsonrpc: the protocol version never counts"},
			{"/body/params/_meta", "excluded", "jsonrpc: MCP tools/call: _meta (progress token and other metadata) never counts"},
			{"/body/params/arguments", "defaulted", "jsonrpc: MCP tools/call: absent, counts as {}"},
			{"/body", "included", "the whole body (no include pointers)"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(tt.fields)
			if err != nil {
				t.Fatal(err)
			}
			tt.req.Tool, tt.req.Method = "t", "POST"
			_, steps, err := c.Explain(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(steps, tt.want) {
				t.Errorf("steps:")
				for _, s := range steps {
					t.Errorf("\t%#v", s)
				}
			}
		})
	}
}

// TestExplainMatchesDocument checks, over every golden request and with rules of every kind,
// that Explain's document and error are Document's.
func TestExplainMatchesDocument(t *testing.T) {
	t.Parallel()
	rules := []Fields{
		{},
		{Sets: []Pointer{mustPointer(t, "/labels")}, Defaults: []Default{dflt(t, "/metadata", `{}`)},
			Normalize: []Normalization{normRule(t, "/title", "trim", "collapse_space", "casefold", "nfc")}, Exclude: []Pointer{mustPointer(t, "/trace_id")}},
		{Format: FormatJSON, Include: []Pointer{mustPointer(t, "/title")}},
		{Format: FormatGraphQL},
		{Format: FormatJSONRPC},
	}
	for name, gc := range goldenCases(t) {
		if gc.Request == nil {
			continue
		}
		for i, f := range rules {
			c, err := Compile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := gc.request(t)
			doc, errD := c.Document(r)
			edoc, _, errE := c.Explain(r)
			if string(doc) != string(edoc) || (errD == nil) != (errE == nil) || errD != nil && errD.Error() != errE.Error() {
				t.Errorf("%s, rules %d: Document %s, %v; Explain %s, %v", name, i, doc, errD, edoc, errE)
			}
		}
	}
}

func TestEscapeToken(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"a": "a", "a/b": "a~1b", "~": "~0", "~/": "~0~1", "": ""} {
		if got := escapeToken(in); got != want {
			t.Errorf("escapeToken(%q) = %q, want %q", in, got, want)
		}
	}
}
