package canonical

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Pointer is a validated JSON Pointer (RFC 6901) such as "/customer/id" or "/items/0". Its
// reference tokens name object members; a token indexes an array element only when it is a
// decimal index without leading zeros ("0", "17"), so "-" and "01" never match an element.
//
// The zero Pointer is "unset": IsZero reports true, String returns "", and it matches nothing.
// The root pointer "" (the whole document) cannot be parsed, so a parsed Pointer is never zero.
// Pointers are comparable with ==; two pointers are equal exactly when they refer to the same
// location, since RFC 6901 gives every location one spelling.
type Pointer struct {
	s string
}

// ParsePointer parses s as a JSON Pointer (RFC 6901 §3): "/" followed by reference tokens
// separated by "/", where "~0" stands for "~" and "~1" for "/". RFC 6901 also allows "", the
// whole document, which ParsePointer rejects since no route names the whole document that way;
// so the zero Pointer stays the only empty one. Errors are lower-case and quote s, e.g. `"title": JSON Pointer must start with "/"`, `"/title~2": invalid JSON Pointer
// escape`, `"": empty JSON Pointer` and `"/\xff": JSON Pointer is not valid UTF-8`.
func ParsePointer(s string) (Pointer, error) {
	switch {
	case s == "":
		return Pointer{}, fmt.Errorf("%q: empty JSON Pointer", s)
	case s[0] != '/':
		return Pointer{}, fmt.Errorf("%q: JSON Pointer must start with \"/\"", s)
	case !utf8.ValidString(s):
		return Pointer{}, fmt.Errorf("%q: JSON Pointer is not valid UTF-8", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '~' && (i+1 == len(s) || (s[i+1] != '0' && s[i+1] != '1')) {
			return Pointer{}, fmt.Errorf("%q: invalid JSON Pointer escape", s)
		}
	}
	return Pointer{s: s}, nil
}

// String returns the pointer as written, e.g. "/customer/id"; "" for the zero Pointer.
func (p Pointer) String() string { return p.s }

// IsZero reports whether p is the zero (unset) Pointer.
func (p Pointer) IsZero() bool { return p.s == "" }

// tokens returns the unescaped reference tokens of p; nil for the zero Pointer.
func (p Pointer) tokens() []string {
	if p.s == "" {
		return nil
	}
	toks := strings.Split(p.s[1:], "/")
	for i, t := range toks {
		toks[i] = unescapeToken(t)
	}
	return toks
}

// unescapeToken returns the reference token t (as written in a pointer) unescaped: RFC 6901 §4,
// "~1" first, then "~0", so "~01" is "~1". It allocates only when t holds a "~".
func unescapeToken(t string) string {
	if strings.IndexByte(t, '~') < 0 {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
}

// arrayIndex returns the array index that tok spells (RFC 6901 §4: "0" or a decimal without
// leading zeros) and whether it spells one below n.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' || len(tok) > 19 {
		return 0, false
	}
	i := 0
	for j := 0; j < len(tok); j++ {
		if !isDigit(tok[j]) {
			return 0, false
		}
		i = i*10 + int(tok[j]-'0')
		if i >= n {
			return 0, false
		}
	}
	return i, true
}
