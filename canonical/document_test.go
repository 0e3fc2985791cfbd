package canonical

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fields Fields
		want   string
	}{
		{"unset include pointer", Fields{Include: []Pointer{{}}}, `include[0]: unset JSON Pointer`},
		{"duplicate include pointer", Fields{Include: []Pointer{mustPointer(t, "/a"), mustPointer(t, "/title"), mustPointer(t, "/title")}}, `include[2]: duplicate JSON Pointer "/title"`},
		{"unset exclude pointer", Fields{Exclude: []Pointer{mustPointer(t, "/a"), {}}}, `exclude[1]: unset JSON Pointer`},
		{"duplicate exclude pointer", Fields{Exclude: []Pointer{mustPointer(t, "/a"), mustPointer(t, "/a")}}, `exclude[1]: duplicate JSON Pointer "/a"`},
		{"empty query name", Fields{Query: []string{"a", ""}}, `query[1]: empty query parameter name`},
		{"query name not UTF-8", Fields{Query: []string{"\xff"}}, `query[0]: "\xff": query parameter name is not valid UTF-8`},
		{"duplicate query name", Fields{Query: []string{"page", "page"}}, `query[1]: duplicate query parameter "page"`},
		{"invalid header name", Fields{Headers: []string{"X Account"}}, `headers[0]: "X Account": invalid header name`},
		{"empty header name", Fields{Headers: []string{""}}, `headers[0]: "": invalid header name`},
		{"header name with colon", Fields{Headers: []string{"X-A:"}}, `headers[0]: "X-A:": invalid header name`},
		{"duplicate header name", Fields{Headers: []string{"X-Account", "x-account"}}, `headers[1]: duplicate header "x-account"`},
		{"unset set pointer", Fields{Sets: []Pointer{{}}}, `sets[0]: unset JSON Pointer`},
		{"duplicate set pointer", Fields{Sets: []Pointer{mustPointer(t, "/labels"), mustPointer(t, "/labels")}}, `sets[1]: duplicate JSON Pointer "/labels"`},
		{"unset default pointer", Fields{Defaults: []Default{{Value: []byte(`{}`)}}}, `defaults[0]: unset JSON Pointer`},
		{"duplicate default pointer", Fields{Defaults: []Default{{mustPointer(t, "/m"), []byte(`{}`)}, {mustPointer(t, "/m"), []byte(`1`)}}}, `defaults[1]: duplicate JSON Pointer "/m"`},
		{"empty default value", Fields{Defaults: []Default{{mustPointer(t, "/metadata"), nil}}}, `defaults[0]: "/metadata": value is not one JSON text: unexpected end of JSON input at offset 0`},
		{"invalid default value", Fields{Defaults: []Default{{mustPointer(t, "/metadata"), []byte(`{`)}}}, `defaults[0]: "/metadata": value is not one JSON text: unexpected end of JSON input at offset 1`},
		{"default value with two texts", Fields{Defaults: []Default{{mustPointer(t, "/m"), []byte(`{} {}`)}}}, `defaults[0]: "/m": value is not one JSON text: data after the top-level value at offset 3`},
		{"default value with a duplicate member", Fields{Defaults: []Default{{mustPointer(t, "/m"), []byte(`{"a":1,"a":2}`)}}}, `defaults[0]: "/m": value is not one JSON text: duplicate member "a" at the top level`},
		{"unset normalize pointer", Fields{Normalize: []Normalization{{Ops: []string{"trim"}}}}, `normalize[0]: unset JSON Pointer`},
		{"duplicate normalize pointer", Fields{Normalize: []Normalization{{mustPointer(t, "/t"), []string{"trim"}}, {mustPointer(t, "/t"), []string{"nfc"}}}}, `normalize[1]: duplicate JSON Pointer "/t"`},
		{"no ops", Fields{Normalize: []Normalization{{mustPointer(t, "/title"), nil}}}, `normalize[0]: "/title": no ops (want trim, collapse_space, casefold or nfc)`},
		{"unknown op", Fields{Normalize: []Normalization{{mustPointer(t, "/title"), []string{"trim", "upper"}}}}, `normalize[0]: "/title": ops[1]: "upper": unknown normalization (want trim, collapse_space, casefold or nfc)`},
		{"op in the wrong case", Fields{Normalize: []Normalization{{mustPointer(t, "/title"), []string{"NFC"}}}}, `normalize[0]: "/title": ops[0]: "NFC": unknown normalization (want trim, collapse_space, casefold or nfc)`},
		{"unknown format", Fields{Format: "xml"}, `format: "xml": unknown format (want json, form, multipart, graphql or jsonrpc)`},
		{"format in the wrong case", Fields{Format: "JSON"}, `format: "JSON": unknown format (want json, form, multipart, graphql or jsonrpc)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(tt.fields)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Compile() = %v, %v; want error %s", c, err, tt.want)
			}
		})
	}
}

func TestDocumentErrors(t *testing.T) {
	t.Parallel()
	withInclude := Fields{Include: []Pointer{mustPointer(t, "/title")}}
	withExclude := Fields{Exclude: []Pointer{mustPointer(t, "/trace_id")}}
	listing := Fields{Query: []string{"q"}, Headers: []string{"X-Account"}}
	jsonType := http.Header{"Content-Type": {"application/json"}}
	formType := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	tests := []struct {
		name   string
		fields Fields
		req    Request
		want   string
	}{
		{"duplicate member", Fields{}, Request{Header: jsonType, Body: []byte(`{"customer":{"title":1,"title":2}}`)},
			`invalid body: duplicate member "title" at /customer`},
		{"duplicate member under include", withInclude, Request{Header: jsonType, Body: []byte(`{"title":1,"title":2}`)},
			`invalid body: duplicate member "title" at the top level`},
		{"duplicate member outside the included ones", withInclude, Request{Header: jsonType, Body: []byte(`{"title":1,"x":{"a":1,"a":1}}`)},
			`invalid body: duplicate member "a" at /x`},
		{"duplicate member deep outside the included ones", withInclude, Request{Header: jsonType,
			Body: []byte(`{"x":[{"a":1},{"b/":{"k":[],"\u006b":{}}}],"title":1}`)},
			`invalid body: duplicate member "k" at /x/1/b~1`},
		{"syntax error", Fields{}, Request{Header: jsonType, Body: []byte(`{"title": "x",}`)},
			`invalid body: invalid character ',' at start of value at offset 13`},
		{"trailing data", Fields{}, Request{Header: jsonType, Body: []byte(`{"title":"x"}{}`)},
			`invalid body: data after the top-level value at offset 13`},
		{"invalid UTF-8", Fields{}, Request{Header: jsonType, Body: []byte("\"\xff\"")},
			`invalid body: invalid UTF-8 at offset 1`},
		{"text body with include pointers", withInclude, Request{Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("title=x")},
			`invalid body: fields are fingerprinted but the body is not JSON, a form or multipart/form-data (Content-Type "text/plain")`},
		{"body without a type with exclude pointers", withExclude, Request{Body: []byte(`{"title":"x"}`)},
			`invalid body: fields are fingerprinted but the body is not JSON, a form or multipart/form-data (Content-Type "")`},
		{"malformed type with include pointers", withInclude, Request{Header: http.Header{"Content-Type": {"application/"}}, Body: []byte(`{}`)},
			`invalid body: fields are fingerprinted but the body is not JSON, a form or multipart/form-data (Content-Type "application/")`},
		{"bad form escape", Fields{}, Request{Header: formType, Body: []byte("a=%zz")},
			`invalid body: invalid form: invalid URL escape "%zz"`},
		{"form semicolon", Fields{}, Request{Header: formType, Body: []byte("a=1;b=2")},
			`invalid body: invalid form: invalid semicolon separator in query`},
		{"form not UTF-8", Fields{}, Request{Header: formType, Body: []byte("a=%ff")},
			`invalid body: form field "a" is not valid UTF-8`},
		{"query value not UTF-8", listing, Request{Query: url.Values{"q": {"ok", "\xff"}}},
			`invalid request: query parameter "q" is not valid UTF-8`},
		{"header value not UTF-8", listing, Request{Header: http.Header{"X-Account": {"caf\xe9"}}},
			`invalid request: header "x-account" is not valid UTF-8`},
		{"path value not UTF-8", Fields{}, Request{PathParams: map[string]string{"id": "\xff"}},
			`invalid request: path parameter "id" is not valid UTF-8`},
		{"method not UTF-8", Fields{}, Request{Method: "G\xffT"},
			`invalid request: method "G\xffT" is not valid UTF-8`},
	}
	t.Run("the same name in sibling objects outside the included ones", func(t *testing.T) {
		t.Parallel()
		c, err := Compile(withInclude)
		if err != nil {
			t.Fatal(err)
		}
		r := Request{Tool: "t", Header: jsonType, Body: []byte(`{"x":[{"k":1},{"k":2,"j":{"k":3}}],"title":1}`)}
		if doc, err := c.Document(&r); err != nil {
			t.Fatalf("Document() = %s, %v", doc, err)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(tt.fields)
			if err != nil {
				t.Fatal(err)
			}
			tt.req.Tool = "t"
			doc, err := c.Document(&tt.req)
			if err == nil {
				t.Fatalf("Document() = %s, want error %s", doc, tt.want)
			}
			if !errors.Is(err, ErrInvalidBody) || err.Error() != tt.want {
				t.Errorf("Document() error\n\tgot  %v\n\twant %s", err, tt.want)
			}
		})
	}
}

// TestDocumentMediaTypes checks which Content-Type values read the body as JSON.
func TestDocumentMediaTypes(t *testing.T) {
	t.Parallel()
	c, err := Compile(Fields{})
	if err != nil {
		t.Fatal(err)
	}
	const body = `{"b":1, "a":2}`
	tests := []struct {
		contentType string
		json        bool
	}{
		{"application/json", true},
		{"Application/JSON; charset=UTF-8", true},
		{"application/json; charset", true}, // a bad parameter does not hide the type
		{"application/problem+json", true},
		{"application/vnd.api+json; ext=bulk", true},
		{"text/json", false},
		{"application/jsonx", false},
		{"application/json-seq", false},
		{"text/plain", false},
		{"", false},
		{"not a type", false},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			t.Parallel()
			doc, err := c.Document(&Request{Header: http.Header{"Content-Type": {tt.contentType}}, Body: []byte(body)})
			if err != nil {
				t.Fatal(err)
			}
			gotJSON := bytes.Contains(doc, []byte(`"body":{"a":2,"b":1}`))
			if gotJSON != tt.json {
				t.Errorf("Content-Type %q: document %s, want JSON body %t", tt.contentType, doc, tt.json)
			}
		})
	}
}

// TestDocumentInvariance checks that what the contract says never matters does not change the
// fingerprint, and that what it says does matter changes it.
func TestDocumentInvariance(t *testing.T) {
	t.Parallel()
	c, err := Compile(Fields{Exclude: []Pointer{mustPointer(t, "/trace_id")}, Query: []string{"dry_run"}, Headers: []string{"X-Account"}})
	if err != nil {
		t.Fatal(err)
	}
	base := func() *Request {
		return &Request{
			Tool: "create_ticket", Method: "POST", PathParams: map[string]string{"org": "acme"},
			Query:  url.Values{"dry_run": {"1"}},
			Header: http.Header{"Content-Type": {"application/json"}, "X-Account": {"a"}},
			Body:   []byte(`{"title":"Printer","priority":1,"tags":["a","b"],"trace_id":"t1"}`),
		}
	}
	want := fingerprintOf(t, c, base())
	same := map[string]func(r *Request){
		"member order":    withBody(`{"tags":["a","b"],"priority":1,"trace_id":"t1","title":"Printer"}`),
		"white space":     withBody("{ \"title\" : \"Printer\",\n\t\"priority\" : 1 , \"tags\":[ \"a\" ,\"b\" ], \"trace_id\":\"t1\" }"),
		"escapes":         withBody(`{"t\u0069tle":"Pr\u0069nter","priority":1,"tags":["\u0061","b"],"trace_id":"t1"}`),
		"number spelling": withBody(`{"title":"Printer","priority":1.0e0,"tags":["a","b"],"trace_id":"t1"}`),
		"excluded member": withBody(`{"title":"Printer","priority":1,"tags":["a","b"],"trace_id":"t2"}`),
		"unlisted header": func(r *Request) { r.Header.Set("Traceparent", "00-abc-01"); r.Header.Set("Date", "now") },
		"unlisted query":  func(r *Request) { r.Query.Set("cache", "no") },
		"header name case": func(r *Request) {
			r.Header = make(http.Header)
			r.Header.Add("content-type", "application/json")
			r.Header.Add("x-account", "a")
		},
		"content type param": func(r *Request) { r.Header.Set("Content-Type", "application/json; charset=utf-8") },
	}
	for name, change := range same {
		t.Run("same/"+name, func(t *testing.T) {
			t.Parallel()
			r := base()
			change(r)
			if got := fingerprintOf(t, c, r); got != want {
				t.Errorf("fingerprint changed: %s, want %s", got, want)
			}
		})
	}
	t.Run("same/listed header name case", func(t *testing.T) {
		t.Parallel()
		lower, err := Compile(Fields{Exclude: []Pointer{mustPointer(t, "/trace_id")}, Query: []string{"dry_run"}, Headers: []string{"x-account"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := fingerprintOf(t, lower, base()); got != want {
			t.Errorf("fingerprint changed: %s, want %s", got, want)
		}
	})
	differ := map[string]func(r *Request){
		"array order":     withBody(`{"title":"Printer","priority":1,"tags":["b","a"],"trace_id":"t1"}`),
		"number value":    withBody(`{"title":"Printer","priority":1.000001,"tags":["a","b"],"trace_id":"t1"}`),
		"null member":     withBody(`{"title":"Printer","priority":1,"tags":["a","b"],"trace_id":"t1","x":null}`),
		"listed header":   func(r *Request) { r.Header.Set("X-Account", "b") },
		"header repeated": func(r *Request) { r.Header.Add("X-Account", "a") },
		"listed query":    func(r *Request) { r.Query.Set("dry_run", "0") },
		"query absent":    func(r *Request) { r.Query.Del("dry_run") },
		"query empty":     func(r *Request) { r.Query.Set("dry_run", "") },
		"path":            func(r *Request) { r.PathParams["org"] = "other" },
		"method":          func(r *Request) { r.Method = "PUT" },
		"tool":            func(r *Request) { r.Tool = "update_ticket" },
		"empty body":      func(r *Request) { r.Body = nil },
	}
	for name, change := range differ {
		t.Run("differ/"+name, func(t *testing.T) {
			t.Parallel()
			r := base()
			change(r)
			if got := fingerprintOf(t, c, r); got == want {
				t.Errorf("fingerprint did not change")
			}
		})
	}
}

// withBody returns a change that replaces the request body with s.
func withBody(s string) func(r *Request) {
	return func(r *Request) { r.Body = []byte(s) }
}

// TestDocumentLeavesRequestAlone checks that projection works on a copy: the body and the
// Canonicalizer stay as they were, so documents can be computed again and concurrently.
func TestDocumentLeavesRequestAlone(t *testing.T) {
	t.Parallel()
	c, err := Compile(Fields{
		Include: []Pointer{mustPointer(t, "/items"), mustPointer(t, "/title")},
		Exclude: []Pointer{mustPointer(t, "/items/0"), mustPointer(t, "/title")},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"title":"x","items":[1,2,3]}`
	r := &Request{Tool: "t", Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
	const want = `{"body":{"/items":[2,3]},"headers":{},"method":"POST","path":{},"query":{},"tool":"t"}`
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				doc, err := c.Document(r)
				if err != nil || string(doc) != want {
					t.Errorf("Document() = %s, %v; want %s", doc, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if string(r.Body) != body {
		t.Errorf("body changed to %s", r.Body)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	tests := []struct{ doc, want string }{
		{"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"{}", "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
	}
	for _, tt := range tests {
		if got := Fingerprint([]byte(tt.doc)); got != tt.want {
			t.Errorf("Fingerprint(%q) = %s, want %s", tt.doc, got, tt.want)
		}
		if got := Fingerprint([]byte(tt.doc)); len(got) != len("sha256:")+64 || strings.ToLower(got) != got {
			t.Errorf("Fingerprint(%q) = %s: not sha256: and 64 lowercase hex digits", tt.doc, got)
		}
	}
}

func TestNilCanonicalizer(t *testing.T) {
	t.Parallel()
	var c *Canonicalizer
	doc, err := c.Document(&Request{Tool: "t", Method: "GET", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"b":1,"a":2}`)})
	const want = `{"body":{"a":2,"b":1},"headers":{},"method":"GET","path":{},"query":{},"tool":"t"}`
	if err != nil || string(doc) != want {
		t.Errorf("nil Canonicalizer: Document() = %s, %v; want %s", doc, err, want)
	}
}
