package canonical_test

import (
	"fmt"
	"log"
	"net/http"
	"net/url"

	"github.com/idemgateway/idemgateway/canonical"
)

func ExampleCanonicalizer_Document() {
	title, _ := canonical.ParsePointer("/title")
	priority, _ := canonical.ParsePointer("/priority")
	c, err := canonical.Compile(canonical.Fields{
		Include: []canonical.Pointer{title, priority},
		Query:   []string{"dry_run"},
		Headers: []string{"X-Account"},
	})
	if err != nil {
		log.Fatal(err)
	}
	r := &canonical.Request{
		Tool:       "create_ticket",
		Method:     http.MethodPost,
		PathParams: map[string]string{"queue": "it"},
		Query:      url.Values{"dry_run": {"false"}, "cache": {"no"}},
		Header: http.Header{
			"Content-Type": {"application/json"},
			"X-Account":    {"acme"},
			"Traceparent":  {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		},
		Body: []byte(`{"title": "Printer on floor 3", "priority": 2.0, "trace_id": "abc"}`),
	}
	doc, err := c.Document(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(doc))
	fmt.Println(canonical.Fingerprint(doc))
	// Output:
	// {"body":{"/priority":2,"/title":"Printer on floor 3"},"headers":{"x-account":["acme"]},"method":"POST","path":{"queue":"it"},"query":{"dry_run":["false"]},"tool":"create_ticket"}
	// sha256:b9524ebe91ffbfa8c338e8ca8c346d0c9dac62db39dd9399ff8171ac314982be
}

func ExampleCanonicalize() {
	out, err := canonical.Canonicalize([]byte(`{
		"b": [1.0, 1e0, 10e-1, -0, 9007199254740993, 1E-7, 1e400],
		"a": "\u0041\u00e9\ud83d\ude00"
	}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))

	_, err = canonical.Canonicalize([]byte(`{"customer": {"title": 1, "title": 2}}`))
	fmt.Println(err)
	// Output:
	// {"a":"Aé😀","b":[1,1,1,0,9007199254740993,1e-7,1e+400]}
	// invalid body: duplicate member "title" at /customer
}

func ExampleFingerprint() {
	fmt.Println(canonical.Fingerprint([]byte(`{}`)))
	// Output:
	// sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a
}

func ExampleLookup() {
	id, _ := canonical.ParsePointer("/ticket/id")
	total, _ := canonical.ParsePointer("/ticket/total")
	resp := []byte(`{"ticket": {"id": "T-1842", "total": 12.50}}`)
	v, ok := canonical.Lookup(resp, id)
	fmt.Println(v, ok)
	v, ok = canonical.Lookup(resp, total)
	fmt.Println(v, ok)
	// Output:
	// T-1842 true
	// 12.5 true
}

func ExampleLookupPrefixes() {
	id, _ := canonical.ParsePointer("/ticket/id")
	url, _ := canonical.ParsePointer("/ticket/url")
	total, _ := canonical.ParsePointer("/ticket/total")
	status, _ := canonical.ParsePointer("/ticket/status")
	// A response body cut off at the gateway's limit, inside a long description: status may
	// come after it.
	resp := []byte(`{"ticket": {"id": "T-1842", "url": "https://t.example/T-1842", "total": 12.50, "description": "The printer on flo`)
	for _, v := range canonical.LookupPrefixes(resp, id, url, total, status) {
		fmt.Printf("%q\n", v)
	}
	// Output:
	// "T-1842"
	// "https://t.example/T-1842"
	// "12.5"
	// ""
}

func ExampleParsePointer() {
	for _, s := range []string{"/customer/id", "/a~1b", "title", "/title~2"} {
		p, err := canonical.ParsePointer(s)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(p)
	}
	// Output:
	// /customer/id
	// /a~1b
	// error: "title": JSON Pointer must start with "/"
	// error: "/title~2": invalid JSON Pointer escape
}

func ExampleCanonicalizer_Explain() {
	metadata, _ := canonical.ParsePointer("/metadata")
	labels, _ := canonical.ParsePointer("/labels")
	title, _ := canonical.ParsePointer("/title")
	c, err := canonical.Compile(canonical.Fields{
		Defaults:  []canonical.Default{{Pointer: metadata, Value: []byte(`{}`)}},
		Normalize: []canonical.Normalization{{Pointer: title, Ops: []string{"trim", "collapse_space"}}},
		Sets:      []canonical.Pointer{labels},
	})
	if err != nil {
		log.Fatal(err)
	}
	doc, steps, err := c.Explain(&canonical.Request{
		Tool:   "create_issue",
		Method: http.MethodPost,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"title": "  Disk full  on db-1", "labels": ["db", "disk", "db"]}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(doc))
	for _, s := range steps {
		fmt.Printf("%s %s: %s\n", s.Pointer, s.Action, s.Detail)
	}
	// Output:
	// {"body":{"labels":["db","disk"],"metadata":{},"title":"Disk full on db-1"},"headers":{},"method":"POST","path":{},"query":{},"tool":"create_issue"}
	// /body/metadata defaulted: defaults: absent, counts as {}
	// /body/title normalized: normalize: trim, collapse_space (changed)
	// /body/labels set: sets: 3 elements compared as a set of 2
	// /body included: the whole body (no include pointers)
}

func ExampleCanonicalizer_DifferingFields() {
	amount, _ := canonical.ParsePointer("/amount")
	c, err := canonical.Compile(canonical.Fields{Include: []canonical.Pointer{amount}, Query: []string{"dry_run"}})
	if err != nil {
		log.Fatal(err)
	}
	doc := func(body, dryRun string) []byte {
		d, err := c.Document(&canonical.Request{
			Tool: "refund", Method: http.MethodPost, Query: url.Values{"dry_run": {dryRun}},
			Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body),
		})
		if err != nil {
			log.Fatal(err)
		}
		return d
	}
	first := doc(`{"amount": "10.00"}`, "false")
	reused := doc(`{"amount": "99.00"}`, "true")
	fmt.Println(c.DifferingFields(first, reused, 10))
	// Output:
	// [/amount query/dry_run]
}

func ExampleFields_graphql() {
	c, err := canonical.Compile(canonical.Fields{Format: canonical.FormatGraphQL})
	if err != nil {
		log.Fatal(err)
	}
	for _, body := range []string{
		`{"query": "mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id url } } }",
		  "variables": {"input": {"title": "Disk full"}}}`,
		`{"operationName": "IssueCreate", "extensions": {"persistedQuery": {"version": 1}},
		  "query": "mutation IssueCreate($input: IssueCreateInput!) {\n  # a retry\n  issueCreate(input: $input) { issue { url, id } success }\n}",
		  "variables": {"input": {"title": "Disk full"}}}`,
	} {
		doc, err := c.Document(&canonical.Request{Tool: "linear_issue_create", Method: http.MethodPost, Body: []byte(body)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(canonical.Fingerprint(doc))
	}
	doc, _ := c.Document(&canonical.Request{Tool: "t", Method: http.MethodPost, Body: []byte(`{"query": "{ b a }"}`)})
	fmt.Println(string(doc))
	// Output:
	// sha256:482071ea49ddbce033a49965be24e14381083163bd37e63db503808d9497c2ff
	// sha256:482071ea49ddbce033a49965be24e14381083163bd37e63db503808d9497c2ff
	// {"body":{"document":"query{a b}","operationName":null,"variables":{}},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}
}
