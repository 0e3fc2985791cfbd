package canonical

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// goldenFile is one file of testdata/golden: cases whose expected canonical bytes and fingerprint
// were checked by hand. A case has either an input JSON text ("json", embedded as is, or "text",
// its exact bytes as a string) for Canonicalize, or a request and fields for Document.
type goldenFile struct {
	Cases []goldenCase `json:"cases"`
}

type goldenCase struct {
	Name        string          `json:"name"`
	JSON        json.RawMessage `json:"json,omitempty"`
	Text        *string         `json:"text,omitempty"`
	Fields      *goldenFields   `json:"fields,omitempty"`
	Request     *goldenRequest  `json:"request,omitempty"`
	Canonical   string          `json:"canonical"`
	Fingerprint string          `json:"fingerprint"`
}

type goldenFields struct {
	Include   []string                   `json:"include"`
	Exclude   []string                   `json:"exclude"`
	Query     []string                   `json:"query"`
	Headers   []string                   `json:"headers"`
	Sets      []string                   `json:"sets"`
	Defaults  map[string]json.RawMessage `json:"defaults"` // pointer: value, embedded as is
	Normalize map[string][]string        `json:"normalize"`
	Format    string                     `json:"format"`
}

type goldenRequest struct {
	Tool       string              `json:"tool"`
	Method     string              `json:"method"`
	PathParams map[string]string   `json:"path_params"`
	Query      string              `json:"query"`   // a raw query string
	Headers    map[string][]string `json:"headers"` // added with http.Header.Add
	Body       *string             `json:"body"`
	BodyJSON   json.RawMessage     `json:"body_json"` // embedded as is
	BodyBase64 string              `json:"body_base64"`
}

// goldenCases returns every case of testdata/golden/*.json, named file/case.
func goldenCases(tb testing.TB) map[string]goldenCase {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files: %v", err)
	}
	cases := make(map[string]goldenCase)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		var g goldenFile
		if err := json.Unmarshal(data, &g); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		for _, c := range g.Cases {
			name := filepath.Base(file[:len(file)-len(".json")]) + "/" + c.Name
			if _, dup := cases[name]; dup || c.Name == "" {
				tb.Fatalf("%s: case name %q is empty or not unique", file, c.Name)
			}
			if (c.JSON != nil || c.Text != nil) == (c.Request != nil) {
				tb.Fatalf("%s: case %q needs exactly one of json, text and request", file, c.Name)
			}
			cases[name] = c
		}
	}
	return cases
}

// input returns the JSON text of a Canonicalize case.
func (c goldenCase) input() []byte {
	if c.Text != nil {
		return []byte(*c.Text)
	}
	return c.JSON
}

// compile returns the Canonicalizer of a Document case.
func (c goldenCase) compile(tb testing.TB) *Canonicalizer {
	tb.Helper()
	var f Fields
	if c.Fields != nil {
		for _, s := range c.Fields.Include {
			f.Include = append(f.Include, mustPointer(tb, s))
		}
		for _, s := range c.Fields.Exclude {
			f.Exclude = append(f.Exclude, mustPointer(tb, s))
		}
		f.Query, f.Headers = c.Fields.Query, c.Fields.Headers
		for _, s := range c.Fields.Sets {
			f.Sets = append(f.Sets, mustPointer(tb, s))
		}
		for p, v := range c.Fields.Defaults {
			f.Defaults = append(f.Defaults, Default{mustPointer(tb, p), v})
		}
		for p, ops := range c.Fields.Normalize {
			f.Normalize = append(f.Normalize, Normalization{mustPointer(tb, p), ops})
		}
		f.Format = c.Fields.Format
	}
	can, err := Compile(f)
	if err != nil {
		tb.Fatal(err)
	}
	return can
}

// request returns the Request of a Document case.
func (c goldenCase) request(tb testing.TB) *Request {
	tb.Helper()
	g := c.Request
	q, err := url.ParseQuery(g.Query)
	if err != nil {
		tb.Fatal(err)
	}
	h := make(http.Header)
	for name, vals := range g.Headers {
		for _, v := range vals {
			h.Add(name, v)
		}
	}
	r := &Request{Tool: g.Tool, Method: g.Method, PathParams: g.PathParams, Query: q, Header: h}
	switch {
	case g.Body != nil:
		r.Body = []byte(*g.Body)
	case g.BodyJSON != nil:
		r.Body = g.BodyJSON
	case g.BodyBase64 != "":
		if r.Body, err = base64.StdEncoding.DecodeString(g.BodyBase64); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for name, c := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var got []byte
			var err error
			if c.Request != nil {
				got, err = c.compile(t).Document(c.request(t))
			} else {
				got, err = Canonicalize(c.input())
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			fp := Fingerprint(got)
			if string(got) != c.Canonical || fp != c.Fingerprint {
				quoted, _ := json.Marshal(string(got))
				t.Errorf("got\n\t\"canonical\": %s,\n\t\"fingerprint\": %q\nwant\n\t%s\n\t%s", quoted, fp, c.Canonical, c.Fingerprint)
			}
			if again, err := Canonicalize(got); err != nil || string(again) != string(got) {
				t.Errorf("canonical form is not stable: %s, %v", again, err)
			}
		})
	}
}
