package canonical

import (
	"bytes"
	"fmt"
	"slices"
)

// applySet sorts the elements of the array at p by their canonical JSON text and drops repeated
// ones, so that the array compares as a set. Anything but an array is left as is.
func applySet(root *node, p compiledPointer, tr *trace) {
	at := p.at
	v := resolve(root, p.toks)
	switch {
	case v == nil:
		tr.add(at, actionAbsent, "sets: nothing at this pointer")
		return
	case v.kind != kindArray:
		tr.add(at, actionSet, "sets: not an array; left as is")
		return
	}
	type elem struct {
		text []byte
		val  node
	}
	elems := make([]elem, len(v.kids))
	for i := range v.kids {
		elems[i] = elem{appendValue(nil, &v.kids[i].val), v.kids[i].val}
	}
	slices.SortFunc(elems, func(a, b elem) int { return bytes.Compare(a.text, b.text) })
	elems = slices.CompactFunc(elems, func(a, b elem) bool { return bytes.Equal(a.text, b.text) })
	n := len(v.kids)
	v.kids = v.kids[:len(elems)]
	for i, e := range elems {
		v.kids[i] = member{val: e.val}
	}
	clear(v.kids[len(elems):n])
	if tr != nil {
		tr.add(at, actionSet, fmt.Sprintf("sets: %d elements compared as a set of %d", n, len(elems)))
	}
}
