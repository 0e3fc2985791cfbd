package canonical

import (
	"fmt"
	"strings"
)

// Step is one thing Explain reports about how a request became its canonical document.
type Step struct {
	// Pointer is an RFC 6901 pointer into the canonical document's parts: "/body" followed by
	// the pointer of a body rule (the body part as its format reads it, e.g. "/body/title",
	// "/body/variables/input/title") or "/body" for the whole body; "/query/<name>" for a listed
	// query parameter; "/headers/<lower-case name>" for a listed header.
	Pointer string `json:"pointer"`
	// Action is one of "included", "excluded", "defaulted", "normalized", "set" (compared as a
	// set) and "absent" (a rule or listed name that matched nothing).
	Action string `json:"action"`
	// Detail says which rule acted and how, in words, e.g. `defaults: absent, counts as {}` or
	// `normalize: trim, casefold (changed)`. It may quote a rule's pointer or default value from
	// the Fields, never a value of the request.
	Detail string `json:"detail"`
}

// The actions of Step.
const (
	actionIncluded   = "included"
	actionExcluded   = "excluded"
	actionDefaulted  = "defaulted"
	actionNormalized = "normalized"
	actionSet        = "set"
	actionAbsent     = "absent"
)

// Explain returns the canonical document of r, exactly as Document does, with the steps that
// made it, in the order they were taken: the format's rewriting of the body, then the rules in
// their order (defaults, exclude, normalize, sets, include; each list sorted as Compile keeps
// it, exclude as listed), then the listed headers and query parameters. Every rule pointer and
// every listed name gets at least one step: what the rule did, or "absent" when it found nothing.
// A present member that a default does not replace gets none. Errors are Document's.
func (c *Canonicalizer) Explain(r *Request) (doc []byte, steps []Step, err error) {
	tr := &trace{}
	doc, err = c.document(r, tr)
	if err != nil {
		return nil, nil, err
	}
	return doc, tr.steps, nil
}

// trace collects Explain's steps. Its methods do nothing on a nil trace, which is what Document
// passes, so the rules cost nothing extra when no one asks.
type trace struct {
	steps []Step
}

func (t *trace) add(pointer, action, detail string) {
	if t != nil {
		t.steps = append(t.steps, Step{Pointer: pointer, Action: action, Detail: detail})
	}
}

// listed records a listed query parameter or header: included with its number of values, or
// absent.
func (t *trace) listed(part, name string, values int) {
	if t == nil {
		return
	}
	what := "query parameter"
	if part == "/headers/" {
		what = "header"
	}
	if values == 0 {
		t.add(part+escapeToken(name), actionAbsent, "listed "+what+" not sent")
		return
	}
	t.add(part+escapeToken(name), actionIncluded, fmt.Sprintf("listed %s, %d value(s)", what, values))
}

// escapeToken escapes a member name as an RFC 6901 reference token: "~" as "~0", "/" as "~1".
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
