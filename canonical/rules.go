package canonical

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A rule set as text: what a record keeps of the rules it was fingerprinted under, so that a
// retry that meets it after the routes file changed a route's rules can be fingerprinted under
// the rules of the record (docs/fingerprint.md#when-the-rules-change).

// rulesText is the form of Canonicalizer.Rules: the compiled lists, each in its compiled order,
// empty ones left out.
type rulesText struct {
	Format    string          `json:"format,omitempty"`
	Include   []string        `json:"include,omitempty"`
	Exclude   []string        `json:"exclude,omitempty"`
	Query     []string        `json:"query,omitempty"`
	Headers   []string        `json:"headers,omitempty"`
	Sets      []string        `json:"sets,omitempty"`
	Defaults  []defaultText   `json:"defaults,omitempty"`
	Normalize []normalizeText `json:"normalize,omitempty"`
}

type defaultText struct {
	Pointer string          `json:"pointer"`
	Value   json.RawMessage `json:"value"`
}

type normalizeText struct {
	Pointer string   `json:"pointer"`
	Ops     []string `json:"ops"`
}

// Rules returns c's rules as canonical JSON text: two rule sets that fingerprint every request
// alike (the same rules, listed in any order) have the same text, and CompileRules makes c again
// from it. The zero rules are "{}". The text is made once, by Compile; the caller must not
// change it.
func (c *Canonicalizer) Rules() []byte {
	if c == nil || c.rules == nil {
		return zeroRules
	}
	return c.rules
}

// zeroRules is the Rules text of the zero Fields.
var zeroRules = []byte("{}")

// rulesText makes the text of Rules.
func (c *Canonicalizer) rulesText() []byte {
	var t rulesText
	t.Format = c.format
	texts := func(ps []compiledPointer) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.text)
		}
		return out
	}
	t.Include, t.Exclude, t.Sets = texts(c.include), texts(c.exclude), texts(c.sets)
	t.Query, t.Headers = c.query, c.headers
	for _, d := range c.defaults {
		t.Defaults = append(t.Defaults, defaultText{d.text, json.RawMessage(d.valText)})
	}
	for _, n := range c.normalize {
		t.Normalize = append(t.Normalize, normalizeText{n.text, n.ops})
	}
	b, err := json.Marshal(t)
	if err == nil {
		b, err = Canonicalize(b)
	}
	if err != nil { // every part came from a compiled rule set, which is valid JSON
		panic(fmt.Sprintf("canonical: rules text: %v", err))
	}
	return b
}

// CompileRules compiles the rules of a Rules text. Errors wrap ErrInvalidBody when text is not a
// Rules text, or are Compile's.
func CompileRules(text []byte) (*Canonicalizer, error) {
	var t rulesText
	if err := json.Unmarshal(text, &t); err != nil {
		return nil, fmt.Errorf("%w: rules text: %v", ErrInvalidBody, err)
	}
	f := Fields{Format: t.Format, Query: t.Query, Headers: t.Headers}
	pointers := func(texts []string) ([]Pointer, error) {
		var out []Pointer
		for _, s := range texts {
			p, err := ParsePointer(s)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	}
	var err error
	if f.Include, err = pointers(t.Include); err != nil {
		return nil, err
	}
	if f.Exclude, err = pointers(t.Exclude); err != nil {
		return nil, err
	}
	if f.Sets, err = pointers(t.Sets); err != nil {
		return nil, err
	}
	for _, d := range t.Defaults {
		p, err := ParsePointer(d.Pointer)
		if err != nil {
			return nil, err
		}
		f.Defaults = append(f.Defaults, Default{p, d.Value})
	}
	for _, n := range t.Normalize {
		p, err := ParsePointer(n.Pointer)
		if err != nil {
			return nil, err
		}
		f.Normalize = append(f.Normalize, Normalization{p, n.Ops})
	}
	return Compile(f)
}

// ReadsField reports whether c's documents hold the field a DifferingFields entry names, so that
// a difference there could change c's fingerprint: the method, the tool, the path parameters and
// the body as a whole always; a query parameter or header c lists; a body pointer that c keeps,
// that is one its include pointers name, is inside or holds (with include), or one that no
// exclude pointer names or holds (without). Sets, defaults and normalizations change how a member
// counts, not whether it does.
func (c *Canonicalizer) ReadsField(field string) bool {
	if c == nil {
		c = &Canonicalizer{}
	}
	switch {
	case field == "method", field == "tool", field == "body", field == "", strings.HasPrefix(field, "path/"):
		return true
	case strings.HasPrefix(field, "query/"):
		return slices.Contains(c.query, unescapeToken(strings.TrimPrefix(field, "query/")))
	case strings.HasPrefix(field, "headers/"):
		return slices.Contains(c.headers, unescapeToken(strings.TrimPrefix(field, "headers/")))
	case !strings.HasPrefix(field, "/"):
		return false
	}
	if c.format == FormatGraphQL && (field == "/query" || strings.HasPrefix(field, "/query/")) {
		field = "/document" + strings.TrimPrefix(field, "/query")
	}
	within := func(p, q string) bool { return p == q || strings.HasPrefix(q, p+"/") } // q is p or below it
	if len(c.include) > 0 {
		return slices.ContainsFunc(c.include, func(p compiledPointer) bool { return within(p.text, field) || within(field, p.text) })
	}
	return !slices.ContainsFunc(c.exclude, func(p compiledPointer) bool { return within(p.text, field) })
}
