package canonical

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// graphqlRequest returns a request whose body is the GraphQL-over-HTTP object of the members
// given (values as JSON texts), sent without a Content-Type: the format decides.
func graphqlRequest(members string) *Request {
	return &Request{Tool: "t", Method: "POST", Body: []byte("{" + members + "}")}
}

func graphqlFields() Fields { return Fields{Format: FormatGraphQL} }

// printedDocument returns the canonical document text that Document makes of the GraphQL query q.
func printedDocument(tb testing.TB, q string) (string, error) {
	tb.Helper()
	qj, _ := json.Marshal(q)
	part, err := bodyPart(tb, graphqlFields(), graphqlRequest(`"query":`+string(qj)))
	if err != nil {
		return "", err
	}
	var b struct{ Document string }
	if err := json.Unmarshal([]byte(part), &b); err != nil {
		tb.Fatal(err)
	}
	return b.Document, nil
}

func TestGraphQLPrint(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, query, want string }{
		{"shorthand query", `{ a }`, `query{a}`},
		{"comments, commas and white space", "query Q(\n  # the id\n  $id: ID!, $n: Int = 10,\n) {\n  node(id: $id) { ... on Issue { id, title } } # done\n}", `query Q($id:ID!,$n:Int=10){node(id:$id){... on Issue{id title}}}`},
		{"fields sorted by response name", `{ c b a: z }`, `query{a:z b c}`},
		{"alias equal to the name", `{ a: a b }`, `query{a b}`},
		{"same name, sorted by arguments", `{ f(x: 2) f(x: 1) }`, `query{f(x:1) f(x:2)}`},
		{"arguments sorted", `{ f(b: 2, a: 1) }`, `query{f(a:1,b:2)}`},
		{"input object fields sorted", `{ f(in: {z: 1, a: {y: 2, b: 3}}) }`, `query{f(in:{a:{b:3,y:2},z:1})}`},
		{"list order kept", `{ f(l: [3, 1, 2]) }`, `query{f(l:[3,1,2])}`},
		{"values kept as written", `{ f(i: 1, f: 1.0, e: 1e3, s: "x", b: true, n: null, en: OPEN, v: $v) }`, `query{f(b:true,e:1e3,en:OPEN,f:1.0,i:1,n:null,s:"x",v:$v)}`},
		{"block string is a string", "{ f(s: \"\"\"\n    two\n    lines\n\"\"\") }", `query{f(s:"two\nlines")}`},
		{"string escapes", `{ f(s: "\u00e9\t\"\\") }`, `query{f(s:"é\t\"\\")}`},
		{"variables sorted", `query ($b: [Int!]!, $a: String = "x" @d) { a }`, `query($a:String="x" @d,$b:[Int!]!){a}`},
		{"directives kept in order", `{ a @skip(if: false) @include(if: true) }`, `query{a @skip(if:false) @include(if:true)}`},
		{"fragments", `query { ...F ... @include(if: true) { b } a } fragment F on T @d { x y }`, `fragment F on T @d{x y} query{... @include(if:true){b} ...F a}`},
		{"repeated selection dropped", `{ a { x } b a { x } }`, `query{a{x} b}`},
		{"differing repeated fields kept", `{ a { y } a { x } }`, `query{a{x} a{y}}`},
		{"definitions sorted", `mutation B { b } query A { a }`, `mutation B{b} query A{a}`},
		{"description dropped", `"""create it""" mutation M { a }`, `mutation M{a}`},
		{"subscription", `subscription S { events(first: 1) { id } }`, `subscription S{events(first:1){id}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := printedDocument(t, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("printed\n got %s\nwant %s", got, tt.want)
			}
			if again, err := printedDocument(t, got); err != nil || again != got {
				t.Errorf("printing the printed document gives %s, %v", again, err)
			}
		})
	}
}

// TestGraphQLInvariance checks what never changes a GraphQL request's fingerprint, and what does.
func TestGraphQLInvariance(t *testing.T) {
	t.Parallel()
	c, err := Compile(graphqlFields())
	if err != nil {
		t.Fatal(err)
	}
	const (
		query = `"query":"mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id identifier url } } }"`
		vars  = `"variables":{"input":{"teamId":"T","title":"Disk full","priority":2}}`
	)
	want := fingerprintOf(t, c, graphqlRequest(query+","+vars))
	same := map[string]string{
		"member order":        vars + "," + query,
		"operation name sent": query + "," + vars + `,"operationName":"IssueCreate"`,
		"selection order":     `"query":"mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { issue { url identifier id } success } }",` + vars,
		"comments and commas": `"query":"mutation IssueCreate(\n  $input: IssueCreateInput!,\n) {\n  # retried\n  issueCreate(input: $input) {\n    success,\n    issue { id, identifier, url }\n  }\n}\n",` + vars,
		"variables re-spelt":  query + `,"variables":{"input":{"priority":2.0,"title":"Disk\u0020full","teamId":"T"}}`,
		"extensions":          query + "," + vars + `,"extensions":{"persistedQuery":{"version":1,"sha256Hash":"abc"},"tracing":true}`,
		"unknown member":      query + "," + vars + `,"doc_id":"x"`,
	}
	for name, members := range same {
		t.Run("same/"+name, func(t *testing.T) {
			t.Parallel()
			if got := fingerprintOf(t, c, graphqlRequest(members)); got != want {
				t.Errorf("fingerprint changed")
			}
		})
	}
	differ := map[string]string{
		"variable value":      query + `,"variables":{"input":{"teamId":"T","title":"Disk full","priority":1}}`,
		"variable added":      query + `,"variables":{"input":{"teamId":"T","title":"Disk full","priority":2,"labelIds":[]}}`,
		"no variables":        query,
		"operation name":      query + "," + vars + `,"operationName":"Other"`,
		"selection":           `"query":"mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id } } }",` + vars,
		"alias":               `"query":"mutation IssueCreate($input: IssueCreateInput!) { created: issueCreate(input: $input) { success issue { id identifier url } } }",` + vars,
		"operation type":      `"query":"query IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id identifier url } } }",` + vars,
		"variable definition": `"query":"mutation IssueCreate($input: IssueCreateInput) { issueCreate(input: $input) { success issue { id identifier url } } }",` + vars,
	}
	for name, members := range differ {
		t.Run("differ/"+name, func(t *testing.T) {
			t.Parallel()
			if got := fingerprintOf(t, c, graphqlRequest(members)); got == want {
				t.Errorf("fingerprint did not change")
			}
		})
	}
	// Argument values count as written.
	lit := func(v string) string {
		return fingerprintOf(t, c, graphqlRequest(`"query":"mutation { issueCreate(input: {title: \"x\", priority: `+v+`}) { success } }"`))
	}
	if lit("1") == lit("2") || lit("1") == lit("1.0") {
		t.Error("argument values do not count")
	}
}

func TestGraphQLBody(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, members, want string }{
		{"anonymous operation", `"query":"{ a }"`, `{"document":"query{a}","operationName":null,"variables":{}}`},
		{"only operation's name", `"query":"query Q { a }","variables":null`, `{"document":"query Q{a}","operationName":"Q","variables":{}}`},
		{"several operations", `"query":"query A { a } query B { b }"`, `{"document":"query A{a} query B{b}","operationName":null,"variables":{}}`},
		{"operation name sent", `"query":"query A { a } query B { b }","operationName":"B"`, `{"document":"query A{a} query B{b}","operationName":"B","variables":{}}`},
		{"null operation name", `"query":"query A { a }","operationName":null`, `{"document":"query A{a}","operationName":"A","variables":{}}`},
		{"variables canonical", `"query":"{ a }","variables":{"b":1.50,"a":"\u0041"}`, `{"document":"query{a}","operationName":null,"variables":{"a":"A","b":1.5}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := bodyPart(t, graphqlFields(), graphqlRequest(tt.members))
			if err != nil || got != tt.want {
				t.Errorf("body part\n got %s, %v\nwant %s", got, err, tt.want)
			}
		})
	}
	// Rules name members of the body part.
	got, err := bodyPart(t, Fields{
		Format:    FormatGraphQL,
		Include:   []Pointer{mustPointer(t, "/variables/input/title"), mustPointer(t, "/document")},
		Normalize: []Normalization{normRule(t, "/variables/input/title", "trim")},
	}, graphqlRequest(`"query":"mutation { c(input: $input) { id } }","variables":{"input":{"title":" x ","at":"now"}}`))
	const want = `{"/document":"mutation{c(input:$input){id}}","/variables/input/title":"x"}`
	if err != nil || got != want {
		t.Errorf("with rules: %s, %v; want %s", got, err, want)
	}
}

func TestGraphQLErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, want string }{
		{"batch", `[{"query":"{ a }"}]`, `invalid body: graphql: batches are not supported`},
		{"not an object", `"{ a }"`, `invalid body: graphql: the body is not a GraphQL request object`},
		{"no query", `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"abc"}}}`, `invalid body: graphql: "query" is not a string (requests that send only a persisted-query hash are not supported)`},
		{"null query", `{"query":null}`, `invalid body: graphql: "query" is not a string (requests that send only a persisted-query hash are not supported)`},
		{"syntax error", `{"query":"mutation {"}`, `invalid body: graphql: invalid document at line 1, column 11: Expected Name, found <EOF>`},
		{"syntax error on line 2", `{"query":"query Q {\n  a(x: ) }"}`, `invalid body: graphql: invalid document at line 2, column 8: Unexpected )`},
		{"empty document", `{"query":""}`, `invalid body: graphql: the document has no operation`},
		{"fragments only", `{"query":"fragment F on T { a }"}`, `invalid body: graphql: the document has no operation`},
		{"schema definition", `{"query":"type T { a: Int }"}`, `invalid body: graphql: invalid document at line 1, column 1: Unexpected Name "type"`},
		{"operation name not a string", `{"query":"{ a }","operationName":1}`, `invalid body: graphql: "operationName" is not a string or null`},
		{"variables not an object", `{"query":"{ a }","variables":[1]}`, `invalid body: graphql: "variables" is not an object or null`},
		{"too deep", `{"query":"{` + strings.Repeat("a{", 1000) + "b" + strings.Repeat("}", 1001) + `"}`, `invalid body: graphql: invalid document at line 1, column 2001: exceeded maximum nesting depth of 1000`},
		{"not JSON", `query { a }`, `invalid body: invalid character 'q' at start of value at offset 0`},
	}
	c, err := Compile(graphqlFields())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := c.Document(&Request{Tool: "t", Method: "POST", Body: []byte(tt.body)})
			if err == nil || !errors.Is(err, ErrInvalidBody) || err.Error() != tt.want {
				t.Errorf("Document() = %s, %v\nwant error %s", doc, err, tt.want)
			}
		})
	}
}

// FuzzGraphQLDocument checks that any query string either fails with ErrInvalidBody or gives a
// printed document that prints to itself (the canonical form is a fixed point) and keeps the
// fingerprint when sent in its place.
func FuzzGraphQLDocument(f *testing.F) {
	for _, q := range []string{
		`{ a }`, `mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id } } }`,
		`query Q($a: [Int!]! = [1, 2] @d) @op { x: f(b: {c: "\u00e9", d: """blk"""}, e: ENUM) @skip(if: $a) { ... on T { g } ...F } } fragment F on T { h }`,
		"# comment\n{ a, b, c }", `{ a(x: 1.0e-3) a(x: 1) }`, `subscription { s }`, `query { a(s: "\\u0000\\n") }`,
	} {
		f.Add(q)
	}
	c, err := Compile(graphqlFields())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		qj, err := json.Marshal(q)
		if err != nil {
			return
		}
		doc, err := c.Document(graphqlRequest(`"query":` + string(qj)))
		if err != nil {
			if !errors.Is(err, ErrInvalidBody) {
				t.Fatalf("error does not wrap ErrInvalidBody: %v", err)
			}
			return
		}
		var d struct{ Body struct{ Document string } }
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		printed := d.Body.Document
		pj, _ := json.Marshal(printed)
		again, err := c.Document(graphqlRequest(`"query":` + string(pj)))
		if err != nil {
			t.Fatalf("the printed document %q does not parse: %v", printed, err)
		}
		if string(again) != string(doc) {
			t.Fatalf("printing is not idempotent:\n%s\n%s", doc, again)
		}
	})
}
