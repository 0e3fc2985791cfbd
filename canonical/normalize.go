package canonical

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// The operations of Normalization.Ops.
const (
	opTrim          = "trim"
	opCollapseSpace = "collapse_space"
	opCasefold      = "casefold"
	opNFC           = "nfc"
)

// CheckNormalization reports whether op is an operation of Normalization.Ops: trim,
// collapse_space, casefold or nfc (case-sensitive). The error quotes op, e.g. `"upper": unknown
// normalization (want trim, collapse_space, casefold or nfc)`.
func CheckNormalization(op string) error {
	switch op {
	case opTrim, opCollapseSpace, opCasefold, opNFC:
		return nil
	}
	return fmt.Errorf("%q: unknown normalization (want trim, collapse_space, casefold or nfc)", op)
}

// compiledNormalization is a validated Normalization.
type compiledNormalization struct {
	compiledPointer
	ops     []string
	opsText string // "trim, casefold", for Explain
}

// compileNormalizations validates the Normalize rules of a Fields and returns them sorted by
// pointer text, so that the list order never matters.
func compileNormalizations(ns []Normalization) ([]compiledNormalization, error) {
	out := make([]compiledNormalization, 0, len(ns))
	for i, n := range ns {
		switch {
		case n.Pointer.IsZero():
			return nil, fmt.Errorf("normalize[%d]: unset JSON Pointer", i)
		case slices.ContainsFunc(out, func(c compiledNormalization) bool { return c.text == n.Pointer.s }):
			return nil, fmt.Errorf("normalize[%d]: duplicate JSON Pointer %q", i, n.Pointer.s)
		case len(n.Ops) == 0:
			return nil, fmt.Errorf("normalize[%d]: %q: no ops (want trim, collapse_space, casefold or nfc)", i, n.Pointer.s)
		}
		for j, op := range n.Ops {
			if err := CheckNormalization(op); err != nil {
				return nil, fmt.Errorf("normalize[%d]: %q: ops[%d]: %w", i, n.Pointer.s, j, err)
			}
		}
		out = append(out, compiledNormalization{compilePointer(n.Pointer), slices.Clone(n.Ops), strings.Join(n.Ops, ", ")})
	}
	slices.SortFunc(out, func(a, b compiledNormalization) int { return strings.Compare(a.text, b.text) })
	return out, nil
}

// apply rewrites the string at n's pointer, or each string element of the array there.
func (n *compiledNormalization) apply(root *node, tr *trace) {
	at, ops := n.at, n.opsText
	v := resolve(root, n.toks)
	switch {
	case v == nil:
		tr.add(at, actionAbsent, "normalize: nothing at this pointer")
	case v.kind == kindString:
		before := v.str
		v.str = normalizeString(v.str, n.ops)
		if tr != nil {
			tr.add(at, actionNormalized, fmt.Sprintf("normalize: %s (%s)", ops, changed(before != v.str)))
		}
	case v.kind == kindArray:
		strs, diff := 0, 0
		for i := range v.kids {
			if e := &v.kids[i].val; e.kind == kindString {
				before := e.str
				e.str = normalizeString(e.str, n.ops)
				strs++
				if before != e.str {
					diff++
				}
			}
		}
		if tr != nil {
			tr.add(at, actionNormalized, fmt.Sprintf("normalize: %s on each of %d strings of the array (%d changed)", ops, strs, diff))
		}
	default:
		if tr != nil {
			tr.add(at, actionNormalized, "normalize: "+ops+" does not apply: not a string or an array; left as is")
		}
	}
}

func changed(yes bool) string {
	if yes {
		return "changed"
	}
	return "already normal"
}

// normalizeString applies ops (valid) to s (valid UTF-8) in order.
func normalizeString(s string, ops []string) string {
	for _, op := range ops {
		switch op {
		case opTrim:
			s = strings.TrimFunc(s, unicode.IsSpace)
		case opCollapseSpace:
			s = collapseSpace(s)
		case opCasefold:
			s = foldCherokee(cases.Fold().String(s)) // a Caser keeps state: one per call
		case opNFC:
			s = norm.NFC.String(s)
		}
	}
	return s
}

// collapseSpace replaces each run of Unicode white space (unicode.IsSpace: the White_Space
// property) in s with one U+0020.
func collapseSpace(s string) string {
	if !needsCollapse(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	inSpace := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			if !inSpace {
				b.WriteByte(' ')
			}
			inSpace = true
			continue
		}
		inSpace = false
		b.WriteRune(r)
	}
	return b.String()
}

// needsCollapse reports whether s has white space other than lone U+0020 characters.
func needsCollapse(s string) bool {
	prevSpace := false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if space && (r != ' ' || prevSpace) {
			return true
		}
		prevSpace = space
	}
	return false
}

// foldCherokee completes cases.Fold for Cherokee, the one script whose case folding
// (CaseFolding.txt) maps lowercase to uppercase: U+AB70–U+ABBF fold to U+13A0–U+13EF and
// U+13F8–U+13FD to U+13F0–U+13F5. golang.org/x/text/cases (v0.42.0) folds the uppercase letters
// to lowercase and the lowercase to uppercase, so "Ꭰ" and "ꭰ" would never compare equal and
// folding would not be idempotent; mapping its output's lowercase Cherokee to uppercase gives
// the Unicode folding.
func foldCherokee(s string) string {
	if !strings.ContainsFunc(s, isLowerCherokee) {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case 0xab70 <= r && r <= 0xabbf:
			return r - 0xab70 + 0x13a0
		case 0x13f8 <= r && r <= 0x13fd:
			return r - 8
		}
		return r
	}, s)
}

func isLowerCherokee(r rune) bool {
	return 0xab70 <= r && r <= 0xabbf || 0x13f8 <= r && r <= 0x13fd
}
