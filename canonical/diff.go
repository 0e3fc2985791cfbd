package canonical

import (
	"bytes"
	"slices"
	"strings"
)

// TruncatedMarker is the last entry of DifferingFields' result when more fields differ than the
// limit allows.
const TruncatedMarker = "…"

// DifferingFields returns where two canonical documents that c made differ, naming the fields of
// the request the way a route and its client write them and never a value of either document;
// it is what a 422 conflict reports as differing_fields. Each entry is one of:
//
//   - a field inside the body: an RFC 6901 JSON Pointer into the request body, spelled as the
//     route writes it. With Include, an included pointer as written ("/fields/summary"), followed
//     by the members below it where the difference lies deeper inside the included value
//     ("/fields/summary/lang"); without, the member of the whole body ("/title"). A form body is
//     the object of its fields (see Document), so "/amount" is the form field amount. A jsonrpc
//     body is named as sent ("/params/arguments/title"). In a graphql body the query document is
//     "/query", the request member that carries it (the rules call it /document), and the
//     variables are "/variables/...";
//   - "body": the body differs as a whole (one of them is empty, or is not JSON, a form or
//     multipart/form-data and counts by its hash, or the two are values of different kinds);
//   - a part outside the body, named without a leading slash so that it is never taken for a body
//     pointer: "method", "tool", "path/<parameter>", "query/<name>" or "headers/<lower-case
//     name>", with "~" and "/" in names escaped as in RFC 6901 ("query/a~1b" for a/b).
//
// Objects are descended into, so that the deepest differing members are named, and a member on
// one side only is named; arrays and scalars are named whole (the indices of an array in the
// document need not be the request's: Sets sort it, Exclude removes elements). The entries are
// sorted (byte order, so body pointers come first) and unique. Equal documents give nil.
//
// a and b are documents as c.Document returns them; when either is not one valid JSON object (as
// Canonicalize judges it) and they differ, the result is [""], the whole request. With limit > 0
// at most limit entries are returned: when more differ, the first limit-1 and then
// TruncatedMarker. limit ≤ 0 means no limit. A nil c is the Canonicalizer of the zero Fields.
func (c *Canonicalizer) DifferingFields(a, b []byte, limit int) []string {
	if bytes.Equal(a, b) {
		return nil
	}
	if c == nil {
		c = &Canonicalizer{}
	}
	va, errA := parse(a)
	vb, errB := parse(b)
	var out []string
	if errA != nil || errB != nil || va.kind != kindObject || vb.kind != kindObject {
		out = []string{""}
	} else {
		out = mergeMembers(out, &va, &vb, func(out []string, name string, x, y *node) []string {
			if name == "body" {
				return c.diffBody(out, x, y)
			}
			if x == nil || y == nil {
				return append(out, escapeToken(name))
			}
			return diffNodes(out, x, y, escapeToken(name))
		})
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if limit > 0 && len(out) > limit {
		out = append(out[:limit-1], TruncatedMarker)
	}
	return out
}

// diffBody appends to out where the body parts a and b of two documents differ (either may be
// nil: absent), as DifferingFields names it.
func (c *Canonicalizer) diffBody(out []string, a, b *node) []string {
	start := len(out)
	switch {
	case a == nil || b == nil:
		return append(out, "body")
	case len(c.include) == 0:
		out = diffNodes(out, a, b, "")
	case a.kind != kindObject || b.kind != kindObject:
		if !equalNodes(a, b) {
			out = append(out, "body")
		}
		return out
	default:
		// The members are named by the include pointers' text.
		out = mergeMembers(out, a, b, func(out []string, name string, x, y *node) []string {
			if !strings.HasPrefix(name, "/") { // not a document of these rules: a member name
				name = "/" + escapeToken(name)
			}
			if x == nil || y == nil {
				return append(out, name)
			}
			return diffNodes(out, x, y, name)
		})
	}
	for i := start; i < len(out); i++ {
		switch p := out[i]; {
		case p == "":
			out[i] = "body"
		case c.format == FormatGraphQL && (p == "/document" || strings.HasPrefix(p, "/document/")):
			out[i] = "/query" + strings.TrimPrefix(p, "/document")
		}
	}
	return out
}

// diffNodes appends to out the pointers, below at, where a and b differ.
func diffNodes(out []string, a, b *node, at string) []string {
	if a.kind != kindObject || b.kind != kindObject {
		if !equalNodes(a, b) {
			out = append(out, at)
		}
		return out
	}
	return mergeMembers(out, a, b, func(out []string, name string, x, y *node) []string {
		p := at + "/" + escapeToken(name)
		if x == nil || y == nil {
			return append(out, p)
		}
		return diffNodes(out, x, y, p)
	})
}

// mergeMembers calls each, in name order, for every member name of the objects a and b, with
// the member's value on each side (nil on the side that lacks it), and returns out with what the
// calls appended.
func mergeMembers(out []string, a, b *node, each func(out []string, name string, x, y *node) []string) []string {
	i, j := 0, 0
	for i < len(a.kids) || j < len(b.kids) {
		var c int
		switch {
		case i == len(a.kids):
			c = 1
		case j == len(b.kids):
			c = -1
		default:
			c = compareUTF16(a.kids[i].name, b.kids[j].name)
		}
		switch {
		case c < 0:
			out = each(out, a.kids[i].name, &a.kids[i].val, nil)
			i++
		case c > 0:
			out = each(out, b.kids[j].name, nil, &b.kids[j].val)
			j++
		default:
			out = each(out, a.kids[i].name, &a.kids[i].val, &b.kids[j].val)
			i++
			j++
		}
	}
	return out
}

// equalNodes reports whether a and b are the same JSON value (both parsed, so canonical).
func equalNodes(a, b *node) bool {
	if a.kind != b.kind || a.str != b.str || len(a.kids) != len(b.kids) {
		return false
	}
	for i := range a.kids {
		if a.kids[i].name != b.kids[i].name || !equalNodes(&a.kids[i].val, &b.kids[i].val) {
			return false
		}
	}
	return true
}
