package canonical

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestDifferingFields checks how DifferingFields walks two documents: rows give the rules and the
// two documents.
func TestDifferingFields(t *testing.T) {
	t.Parallel()
	include := Fields{Include: pointers(t, "/amount", "/customer")}
	const base = `{"body":{"/amount":"10.00","/customer":{"id":"C-1","tier":"gold"}},"headers":{"x-account":["a"]},"method":"POST","path":{"org":"acme"},"query":{"dry_run":["1"]},"tool":"refund"}`
	tests := []struct {
		name   string
		fields Fields
		a, b   string
		limit  int
		want   []string
	}{
		{"equal", include, base, base, 0, nil},
		{"C05: an included member", include, base, `{"body":{"/amount":"99.00","/customer":{"id":"C-1","tier":"gold"}},"headers":{"x-account":["a"]},"method":"POST","path":{"org":"acme"},"query":{"dry_run":["1"]},"tool":"refund"}`, 0,
			[]string{"/amount"}},
		{"deepest member inside an included value", include, base, `{"body":{"/amount":"10.00","/customer":{"id":"C-2","tier":"gold"}},"headers":{"x-account":["a"]},"method":"POST","path":{"org":"acme"},"query":{"dry_run":["1"]},"tool":"refund"}`, 0,
			[]string{"/customer/id"}},
		{"an included member on one side only", include, base, `{"body":{"/customer":{"id":"C-1","tier":"gold"}},"headers":{"x-account":["a"]},"method":"POST","path":{"org":"acme"},"query":{"dry_run":["1"]},"tool":"refund"}`, 0,
			[]string{"/amount"}},
		{"parts outside the body have no leading slash", include, base, `{"body":{"/amount":"10.00","/customer":{"id":"C-1","tier":"gold"}},"headers":{"x-account":["b"]},"method":"PUT","path":{"org":"other"},"query":{},"tool":"refund2"}`, 0,
			[]string{"headers/x-account", "method", "path/org", "query/dry_run", "tool"}},
		{"part names escaped", Fields{}, `{"path":{"a/b":"1"},"query":{"c~d":["1"]}}`, `{"path":{"a/b":"2"},"query":{"c~d":["2"]}}`, 0, []string{"path/a~1b", "query/c~0d"}},
		{"whole body: member on one side only", Fields{}, `{"body":{"a":1}}`, `{"body":{"a":1,"b":null}}`, 0, []string{"/b"}},
		{"whole body: arrays named whole", Fields{}, `{"body":{"l":[1,2,{"a":1}]}}`, `{"body":{"l":[1,2,{"a":2}]}}`, 0, []string{"/l"}},
		{"whole body: names escaped", Fields{}, `{"body":{"a/b":1,"c~d":1}}`, `{"body":{"a/b":2,"c~d":2}}`, 0, []string{"/a~1b", "/c~0d"}},
		{"whole body: object against null", Fields{}, `{"body":{"a":1}}`, `{"body":null}`, 0, []string{"body"}},
		{"include: object against null", include, base, `{"body":null,"headers":{"x-account":["a"]},"method":"POST","path":{"org":"acme"},"query":{"dry_run":["1"]},"tool":"refund"}`, 0, []string{"body"}},
		{"include: both null", include, `{"body":null}`, `{"body":null,"tool":"x"}`, 0, []string{"tool"}},
		{"body on one side only", Fields{}, `{"body":{"a":1}}`, `{}`, 0, []string{"body"}},
		{"include: a document of other rules", include, `{"body":{"title":"a"}}`, `{"body":{"title":"b"}}`, 0, []string{"/title"}},
		{"limit", include, base, `{"body":{},"headers":{},"method":"GET","path":{},"query":{},"tool":"x"}`, 3,
			[]string{"/amount", "/customer", TruncatedMarker}},
		{"limit exactly met", Fields{}, `{"method":"GET","tool":"a"}`, `{"method":"PUT","tool":"b"}`, 2, []string{"method", "tool"}},
		{"limit of one", Fields{}, `{"method":"GET","tool":"a"}`, `{"method":"PUT","tool":"b"}`, 1, []string{TruncatedMarker}},
		{"not JSON", Fields{}, `{"a":1}`, `{"a":`, 0, []string{""}},
		{"top-level scalars", Fields{}, `1`, `2`, 0, []string{""}},
		{"same value, other spelling", Fields{}, `{"body":{"a":1.0}}`, `{"body":{"a":1}}`, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(tt.fields)
			if err != nil {
				t.Fatal(err)
			}
			got := c.DifferingFields([]byte(tt.a), []byte(tt.b), tt.limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("DifferingFields = %q, want %q", got, tt.want)
			}
			if back := c.DifferingFields([]byte(tt.b), []byte(tt.a), tt.limit); !slices.Equal(back, got) {
				t.Errorf("not symmetric: %q then %q", got, back)
			}
		})
	}
}

// TestDifferingFieldsNames checks, for each format and each part of a request, the names a conflict
// gives (docs/fingerprint.md#what-a-conflict-says-differing_fields): a body field is a JSON Pointer
// into the request body as the route writes it, a part outside the body its name without a leading
// slash. Rows give the rules and two requests.
func TestDifferingFieldsNames(t *testing.T) {
	t.Parallel()
	const (
		jsonType = "application/json"
		formType = "application/x-www-form-urlencoded"
	)
	req := func(ct, body string) *Request {
		return &Request{Tool: "t", Method: http.MethodPost, Header: http.Header{"Content-Type": {ct}}, Body: []byte(body)}
	}
	with := func(r *Request, change func(*Request)) *Request { change(r); return r }
	const jira = `{"fields":{"summary":"Disk full","labels":["a","b"],"priority":{"name":"High"}}}`
	const mcp = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"x","priority":1},"_meta":{"progressToken":"p1"}}}`
	const gql = `{"query":"mutation Create($input: IssueInput!) { issueCreate(input: $input) { id } }","variables":{"input":{"title":"x","priority":1}}}`
	parts := Fields{Query: []string{"dry_run"}, Headers: []string{"X-Account"}}
	partsReq := func(change func(*Request)) *Request {
		return with(&Request{Tool: "t", Method: http.MethodPost, PathParams: map[string]string{"org": "acme"},
			Query: url.Values{"dry_run": {"1"}}, Header: http.Header{"X-Account": {"a"}}}, change)
	}
	tests := []struct {
		name   string
		fields Fields
		a, b   *Request
		want   []string
	}{
		{"json include: the pointer as written", Fields{Include: pointers(t, "/fields/summary")},
			req(jsonType, jira), req(jsonType, strings.Replace(jira, "Disk full", "Disk empty", 1)), []string{"/fields/summary"}},
		{"json include: deeper inside the included value", Fields{Include: pointers(t, "/fields")},
			req(jsonType, jira), req(jsonType, strings.Replace(jira, "High", "Low", 1)), []string{"/fields/priority/name"}},
		{"json include: an array named whole", Fields{Include: pointers(t, "/fields/labels")},
			req(jsonType, jira), req(jsonType, strings.Replace(jira, `"b"`, `"c"`, 1)), []string{"/fields/labels"}},
		{"json include: an escaped pointer as written", Fields{Include: pointers(t, "/a~1b/c~0d")},
			req(jsonType, `{"a/b":{"c~d":1}}`), req(jsonType, `{"a/b":{"c~d":2}}`), []string{"/a~1b/c~0d"}},
		{"json whole body", Fields{},
			req(jsonType, `{"title":"x","n":1}`), req(jsonType, `{"title":"y","n":1}`), []string{"/title"}},
		{"json whole body: a scalar body", Fields{},
			req(jsonType, `"x"`), req(jsonType, `"y"`), []string{"body"}},
		{"empty body", Fields{Include: pointers(t, "/title")},
			req(jsonType, `{"title":"x"}`), req(jsonType, ``), []string{"body"}},
		{"neither JSON nor a form: its hash", Fields{},
			req("text/plain", "a"), req("text/plain", "b"), []string{"body"}},
		{"form whole body", Fields{},
			req(formType, "amount=10&currency=usd"), req(formType, "amount=20&currency=usd"), []string{"/amount"}},
		{"form include", Fields{Format: FormatForm, Include: pointers(t, "/amount")},
			req(formType, "amount=10&currency=usd"), req(formType, "amount=20&currency=eur"), []string{"/amount"}},
		{"graphql: variables", Fields{Format: FormatGraphQL},
			req(jsonType, gql), req(jsonType, strings.Replace(gql, `"title":"x"`, `"title":"y"`, 1)), []string{"/variables/input/title"}},
		{"graphql: the document is the query member", Fields{Format: FormatGraphQL},
			req(jsonType, gql), req(jsonType, strings.Replace(gql, "{ id }", "{ id title }", 1)), []string{"/query"}},
		{"graphql include: the document is the query member", Fields{Format: FormatGraphQL, Include: pointers(t, "/document", "/variables/input")},
			req(jsonType, gql), req(jsonType, strings.Replace(strings.Replace(gql, "{ id }", "{ id title }", 1), `"priority":1`, `"priority":2`, 1)),
			[]string{"/query", "/variables/input/priority"}},
		{"jsonrpc: MCP tools/call arguments", Fields{Format: FormatJSONRPC},
			req(jsonType, mcp), req(jsonType, strings.Replace(mcp, `"title":"x"`, `"title":"y"`, 1)), []string{"/params/arguments/title"}},
		{"jsonrpc: the body's method is a body pointer", Fields{Format: FormatJSONRPC},
			req(jsonType, mcp), req(jsonType, strings.Replace(mcp, "tools/call", "tools/list", 1)), []string{"/method", "/params/_meta"}},
		{"jsonrpc: id and _meta never count", Fields{Format: FormatJSONRPC},
			req(jsonType, mcp), req(jsonType, strings.Replace(strings.Replace(mcp, `"id":1`, `"id":2`, 1), "p1", "p2", 1)), nil},
		{"method", parts, partsReq(func(*Request) {}), partsReq(func(r *Request) { r.Method = http.MethodPut }), []string{"method"}},
		{"path parameter", parts, partsReq(func(*Request) {}), partsReq(func(r *Request) { r.PathParams["org"] = "other" }), []string{"path/org"}},
		{"query parameter", parts, partsReq(func(*Request) {}), partsReq(func(r *Request) { r.Query.Set("dry_run", "0") }), []string{"query/dry_run"}},
		{"query parameter on one side only", parts, partsReq(func(*Request) {}), partsReq(func(r *Request) { r.Query = nil }), []string{"query/dry_run"}},
		{"header, lower-case", parts, partsReq(func(*Request) {}), partsReq(func(r *Request) { r.Header.Set("X-Account", "b") }), []string{"headers/x-account"}},
		{"tool", parts, partsReq(func(*Request) {}), partsReq(func(r *Request) { r.Tool = "other" }), []string{"tool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(tt.fields)
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.Document(tt.a)
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Document(tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.DifferingFields(a, b, 0); !slices.Equal(got, tt.want) {
				t.Errorf("DifferingFields = %q, want %q\n%s\n%s", got, tt.want, a, b)
			}
		})
	}
}

// TestDifferingFieldsNeverValues checks that no value of either document shows in the result.
func TestDifferingFieldsNeverValues(t *testing.T) {
	t.Parallel()
	a := `{"body":{"card":"4242424242424242","note":"secret-a"}}`
	b := `{"body":{"card":"4000056655665556","note":"secret-b","extra":"secret-c"}}`
	for _, p := range (*Canonicalizer)(nil).DifferingFields([]byte(a), []byte(b), 0) {
		for _, v := range []string{"4242", "4000", "secret"} {
			if strings.Contains(p, v) {
				t.Errorf("%q holds the value %q", p, v)
			}
		}
	}
}
