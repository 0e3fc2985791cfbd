package canonical

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// body returns the body part of r's document: the body read by the format, then the rules.
func (c *Canonicalizer) body(r *Request, tr *trace) (node, error) {
	if len(r.Body) == 0 {
		tr.add("/body", actionAbsent, "empty body: null whatever the rules")
		return node{kind: kindNull}, nil
	}
	var (
		v   node
		err error
	)
	budget := cmp.Or(r.MaxValues, DefaultMaxValues)
	switch c.format {
	case FormatJSON:
		v, _, err = parseBounded(r.Body, budget, c.selection())
	case FormatForm:
		v, err = parseForm(r.Body)
	case FormatMultipart:
		v, err = parseMultipart(r.Body, r.Header.Get("Content-Type"), budget)
	case FormatGraphQL:
		v, err = graphqlBody(r.Body, budget, tr)
	case FormatJSONRPC:
		v, err = jsonrpcBody(r.Body, budget, tr)
	default:
		ct := r.Header.Get("Content-Type")
		switch mt := mediaType(ct); {
		case mt == "application/json" || strings.HasSuffix(mt, "+json"):
			v, _, err = parseBounded(r.Body, budget, c.selection())
		case mt == "application/x-www-form-urlencoded":
			v, err = parseForm(r.Body)
		case mt == "multipart/form-data":
			v, err = parseMultipart(r.Body, ct, budget)
		case c.hasBodyRules():
			return node{}, fmt.Errorf("%w: fields are fingerprinted but the body is not JSON, a form or multipart/form-data (Content-Type %q)", ErrInvalidBody, ct)
		default:
			sum := sha256.Sum256(r.Body)
			tr.add("/body", actionIncluded, "the Content-Type is not JSON, a form or multipart/form-data: the SHA-256 of the bytes")
			return node{kind: kindString, str: "sha256:" + hex.EncodeToString(sum[:])}, nil
		}
	}
	if err != nil {
		return node{}, err
	}
	return c.apply(v, tr), nil
}

// selection is the part of a JSON body the rules need: with include pointers and no other body
// rule, only the members on the way to them and their values (the others are validated and
// counted, never built); otherwise, nil, all of it.
func (c *Canonicalizer) selection() *selection {
	if len(c.include) == 0 || len(c.exclude) > 0 || len(c.sets) > 0 || len(c.defaults) > 0 || len(c.normalize) > 0 {
		return nil
	}
	return &selection{ptrs: c.include}
}

// mediaType returns the lower-case media type of a Content-Type value, or "" when it has none.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil && err != mime.ErrInvalidMediaParameter {
		return ""
	}
	return mt
}

// parseForm reads an application/x-www-form-urlencoded body (the URL query syntax) as an object
// mapping each name to the array of its values in order.
func parseForm(body []byte) (node, error) {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return node{}, fmt.Errorf("%w: invalid form: %v", ErrInvalidBody, err)
	}
	obj := node{kind: kindObject, kids: make([]member, 0, len(vals))}
	for name, vs := range vals {
		m := member{name: name, val: node{kind: kindArray, kids: make([]member, len(vs))}}
		ok := utf8.ValidString(name)
		for i, s := range vs {
			ok = ok && utf8.ValidString(s)
			m.val.kids[i].val = node{kind: kindString, str: s}
		}
		if !ok {
			return node{}, fmt.Errorf("%w: form field %q is not valid UTF-8", ErrInvalidBody, name)
		}
		obj.kids = append(obj.kids, m)
	}
	sortMembers(obj.kids, nil)
	return obj, nil
}

// apply applies the rules to the body part v, in the order of Document: defaults, exclude,
// normalize, sets, include.
func (c *Canonicalizer) apply(v node, tr *trace) node {
	for _, d := range c.defaults {
		d.apply(&v, tr)
	}
	if len(c.exclude) > 0 {
		exclude(&v, c.exclude, tr)
	}
	for _, n := range c.normalize {
		n.apply(&v, tr)
	}
	for _, p := range c.sets {
		applySet(&v, p, tr)
	}
	if len(c.include) == 0 {
		tr.add("/body", actionIncluded, "the whole body (no include pointers)")
		return v
	}
	out := node{kind: kindObject, kids: make([]member, 0, len(c.include))}
	for _, p := range c.include {
		if t := resolve(&v, p.toks); t != nil {
			out.kids = append(out.kids, member{name: p.text, val: *t})
			if tr != nil {
				tr.add(p.at, actionIncluded, fmt.Sprintf("include: the body member %q", p.text))
			}
		} else {
			tr.add(p.at, actionAbsent, "include: nothing at this pointer; left out of the document")
		}
	}
	return out
}

// exclude removes the values at ps from the tree at root. All pointers are resolved first (so
// "/a/0" and "/a/1" remove the first two elements of /a), then the marked values are dropped
// from their parents, deepest parents first, which keeps the other parent pointers valid.
func exclude(root *node, ps []compiledPointer, tr *trace) {
	type parent struct {
		n     *node
		depth int
	}
	var parents []parent
	for _, p := range ps {
		up := resolve(root, p.toks[:len(p.toks)-1])
		var t *node
		if up != nil {
			t = resolve(up, p.toks[len(p.toks)-1:])
		}
		if t == nil {
			tr.add(p.at, actionAbsent, "exclude: nothing to remove")
			continue
		}
		tr.add(p.at, actionExcluded, "exclude: removed")
		t.kind = kindDeleted
		parents = append(parents, parent{up, len(p.toks) - 1})
	}
	slices.SortFunc(parents, func(a, b parent) int { return cmp.Compare(b.depth, a.depth) })
	for _, p := range parents {
		p.n.kids = slices.DeleteFunc(p.n.kids, func(m member) bool { return m.val.kind == kindDeleted })
	}
}
