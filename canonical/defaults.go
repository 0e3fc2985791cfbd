package canonical

import (
	"fmt"
	"slices"
	"strings"
)

// compiledDefault is a Default with its value parsed.
type compiledDefault struct {
	compiledPointer
	val     node
	valText string // val's canonical JSON text, for Explain
}

// compileDefaults validates the Defaults of a Fields and returns them sorted by pointer text, so
// that a default for an ancestor applies before one for its descendants whatever the list order.
func compileDefaults(ds []Default) ([]compiledDefault, error) {
	out := make([]compiledDefault, 0, len(ds))
	for i, d := range ds {
		switch {
		case d.Pointer.IsZero():
			return nil, fmt.Errorf("defaults[%d]: unset JSON Pointer", i)
		case slices.ContainsFunc(out, func(c compiledDefault) bool { return c.text == d.Pointer.s }):
			return nil, fmt.Errorf("defaults[%d]: duplicate JSON Pointer %q", i, d.Pointer.s)
		}
		v, err := parse(d.Value)
		if err != nil {
			detail := strings.TrimPrefix(err.Error(), ErrInvalidBody.Error()+": ")
			return nil, fmt.Errorf("defaults[%d]: %q: value is not one JSON text: %s", i, d.Pointer.s, detail)
		}
		out = append(out, compiledDefault{compilePointer(d.Pointer), v, string(appendValue(nil, &v))})
	}
	slices.SortFunc(out, func(a, b compiledDefault) int { return strings.Compare(a.text, b.text) })
	return out, nil
}

// apply adds a copy of d's value at d's pointer in the tree at root when the member is absent,
// creating absent ancestors as objects (see Default).
func (d *compiledDefault) apply(root *node, tr *trace) {
	at := d.at
	v := root
	last := len(d.toks) - 1
	for i, tok := range d.toks {
		switch v.kind {
		case kindObject:
			j, found := slices.BinarySearchFunc(v.kids, tok, func(m member, name string) int {
				return compareUTF16(m.name, name)
			})
			if found {
				if i == last {
					return // present: the default does not apply
				}
				v = &v.kids[j].val
				continue
			}
			m := member{name: tok, val: node{kind: kindObject}}
			if i == last {
				m.val = d.val.clone()
			}
			v.kids = slices.Insert(v.kids, j, m)
			v = &v.kids[j].val
			if i == last {
				if tr != nil {
					tr.add(at, actionDefaulted, "defaults: absent, counts as "+d.valText)
				}
				return
			}
		case kindArray:
			j, found := arrayIndex(tok, len(v.kids))
			switch {
			case i == last:
				tr.add(at, actionAbsent, "defaults: the parent is an array, not an object; nothing added")
				return
			case !found:
				tr.add(at, actionAbsent, "defaults: an ancestor is an array without this element; nothing added")
				return
			}
			v = &v.kids[j].val
		default:
			tr.add(at, actionAbsent, "defaults: an ancestor is not an object; nothing added")
			return
		}
	}
}

// clone returns a deep copy of v, so that the rules applied to one document never touch a value
// shared with another.
func (v *node) clone() node {
	c := *v
	if v.kids != nil {
		c.kids = make([]member, len(v.kids))
		for i := range v.kids {
			c.kids[i] = member{name: v.kids[i].name, val: v.kids[i].val.clone()}
		}
	}
	return c
}
