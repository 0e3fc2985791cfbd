package canonical

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// escapes reports whether c needs an escape in a JSON string (RFC 8785 §3.2.2.2).
func escapes(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }

// TestEscapeIn8: every byte value, at each of the eight places, among bytes that need no escape
// (ASCII, and the UTF-8 bytes whose top bit a borrow could reach), is found exactly when it needs
// an escape; and words of random bytes agree with a byte-by-byte look.
func TestEscapeIn8(t *testing.T) {
	t.Parallel()
	for _, fill := range []byte{'a', ' ', '#', ']', 0x7f, 0x80, 0xa0, 0xff} {
		for place := range 8 {
			for c := range 256 {
				w := []byte(strings.Repeat(string(fill), 8))
				w[place] = byte(c)
				if got, want := escapeIn8(string(w)), escapes(byte(c)); got != want {
					t.Fatalf("escapeIn8(%q) = %t, want %t", w, got, want)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		var w [8]byte
		want := false
		for i := range w {
			w[i] = byte(rng.Uint32())
			want = want || escapes(w[i])
		}
		if got := escapeIn8(string(w[:])); got != want {
			t.Fatalf("escapeIn8(%q) = %t, want %t", w, got, want)
		}
	}
}

// TestAppendStringEscapes: appendString escapes as RFC 8785 says, byte by byte, whatever the place
// of each byte to escape in strings of every length up to past two words (among the bytes of 'é',
// whole or cut: appendString looks at bytes, and those have their top bit set).
func TestAppendStringEscapes(t *testing.T) {
	t.Parallel()
	bytewise := func(s string) string {
		var b strings.Builder
		b.WriteByte('"')
		for i := range len(s) {
			switch c := s[i]; {
			case c == '"' || c == '\\':
				b.WriteString(`\` + string(c))
			case c == '\b':
				b.WriteString(`\b`)
			case c == '\t':
				b.WriteString(`\t`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\f':
				b.WriteString(`\f`)
			case c == '\r':
				b.WriteString(`\r`)
			case c < 0x20:
				fmt.Fprintf(&b, `\u%04x`, c)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
		return b.String()
	}
	for n := range 20 {
		for place := range n {
			for _, c := range []byte{0, 0x1f, '\n', '"', '\\', 0x20, '/', 0x7f} {
				s := []byte(strings.Repeat("é", n)[:n])
				s[place] = c
				if got, want := string(appendString(nil, string(s))), bytewise(string(s)); got != want {
					t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
				}
			}
		}
	}
}

// TestSkipStringEscapes: the second pass finds the end of each string whatever escapes it holds,
// a backslash before the closing quote or an escaped quote before it, and reads its value.
func TestSkipStringEscapes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`["a","b"]`:                   `["a","b"]`,
		`["\\","x"]`:                  `["\\","x"]`,
		`["\"","x"]`:                  `["\"","x"]`,
		`["a\\\"b\\","x"]`:            `["a\\\"b\\","x"]`,
		`["\u0022\\u0022","x"]`:       `["\"\\u0022","x"]`,
		`{"\"k\\":"v\/\u00e9","z":1}`: `{"\"k\\":"v/é","z":1}`,
		`["` + strings.Repeat(`ab\"`, 40) + `",1]`: `["` + strings.Repeat(`ab\"`, 40) + `",1]`,
	} {
		got, err := Canonicalize([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}

// TestSortMembers: every order of up to six members, and shuffles of many with names that UTF-16
// orders apart from bytes, come out in compareUTF16's order, each member with its own value.
func TestSortMembers(t *testing.T) {
	t.Parallel()
	names := []string{"", "a", "aa", "b", "\ue000", "\U0001f600"}
	check := func(kids []member) {
		t.Helper()
		want := slices.Clone(kids)
		slices.SortFunc(want, func(a, b member) int { return compareUTF16(a.name, b.name) })
		sortMembers(kids, nil)
		for i := range kids {
			if kids[i].name != want[i].name || kids[i].val.str != want[i].val.str {
				t.Fatalf("sorted %v, want %v", kids, want)
			}
		}
	}
	var permute func(prefix []int, rest []int)
	permute = func(prefix, rest []int) {
		kids := make([]member, len(prefix))
		for i, j := range prefix {
			kids[i] = member{name: names[j], val: node{kind: kindString, str: names[j] + "!"}}
		}
		check(kids)
		for i := range rest {
			permute(append(slices.Clone(prefix), rest[i]), slices.Delete(slices.Clone(rest), i, i+1))
		}
	}
	permute(nil, []int{0, 1, 2, 3, 4, 5})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		kids := make([]member, 2+rng.IntN(60))
		for i := range kids {
			kids[i] = member{name: fmt.Sprintf("%c%d", []rune{'a', 'é', '\ue000', '\U0001f600'}[i%4], i), val: node{kind: kindNumber, str: fmt.Sprint(i)}}
		}
		rng.Shuffle(len(kids), func(i, j int) { kids[i], kids[j] = kids[j], kids[i] })
		check(kids)
	}
}
