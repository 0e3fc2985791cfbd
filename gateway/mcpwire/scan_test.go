package mcpwire

import (
	"strings"
	"testing"
)

// TestStringEnd: the end of a string whatever its length and wherever its escapes fall, in the
// byte-by-byte start and in the jumps from quote to quote past it.
func TestStringEnd(t *testing.T) {
	t.Parallel()
	var strs []string
	for n := range 40 {
		pad := strings.Repeat("a", n)
		strs = append(strs,
			`"`+pad+`"`,
			`"`+pad+`\""`,
			`"`+pad+`\\"`,
			`"`+pad+`\\\""`,
			`"`+pad+`\\\\"`,
			`"\"`+pad+`\\"`,
			`"`+pad+`\"x\\\"y\u0022"`,
			`"`+pad+`\u005c"`,
		)
	}
	for _, s := range strs {
		if !isJSON([]byte(s)) {
			t.Fatalf("%s is no JSON string", s)
		}
		for _, tail := range []string{``, `,"b":"c"}`, `"`} {
			if got := stringEnd([]byte(s+tail), 0); got != len(s) {
				t.Errorf("stringEnd(%s%s) = %d, want %d", s, tail, got, len(s))
			}
		}
	}
}
