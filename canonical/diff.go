package canonical

import (
	"bytes"
	"slices"
)

// TruncatedMarker is the last entry of DifferingFields' result when more pointers differ than
// the limit allows.
const TruncatedMarker = "…"

// DifferingFields returns where two canonical documents differ, as RFC 6901 pointers into them,
// e.g. ["/body/~1amount", "/headers/x-account", "/query/dry_run"]: a pointer for every member
// present in one document only, and for every member whose values differ, descending into
// members whose values are objects on both sides so that the deepest differing members are
// named (arrays and scalars are named whole). The pointers are sorted (byte order) and unique;
// they never carry a value of either document, only member names. Equal documents give nil.
//
// a and b are documents as Document returns them; any JSON texts work, and when either is not
// one valid JSON text (as Canonicalize judges it) and they differ, the result is [""], the whole
// document. With limit > 0 at most limit entries are returned: when more differ, the first
// limit-1 pointers and then TruncatedMarker. limit ≤ 0 means no limit.
func DifferingFields(a, b []byte, limit int) []string {
	if bytes.Equal(a, b) {
		return nil
	}
	va, errA := parse(a)
	vb, errB := parse(b)
	var out []string
	if errA != nil || errB != nil {
		out = []string{""}
	} else {
		out = diffNodes(out, &va, &vb, "")
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if limit > 0 && len(out) > limit {
		out = append(out[:limit-1], TruncatedMarker)
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
			out = append(out, at+"/"+escapeToken(a.kids[i].name))
			i++
		case c > 0:
			out = append(out, at+"/"+escapeToken(b.kids[j].name))
			j++
		default:
			out = diffNodes(out, &a.kids[i].val, &b.kids[j].val, at+"/"+escapeToken(a.kids[i].name))
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
