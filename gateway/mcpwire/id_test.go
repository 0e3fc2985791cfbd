package mcpwire

import "testing"

func TestSameID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want bool
	}{
		{`1`, `1`, true},
		{`1`, `1.0`, true},
		{`1`, `1e0`, true},
		{`100`, `1E2`, true},
		{`-0`, `0`, true},
		{`1`, `2`, false},
		{`9007199254740993`, `9007199254740992`, false},
		{`12345678901234567890123`, `12345678901234567890123.0`, true},
		{`12345678901234567890123`, `12345678901234567890124`, false},
		{`"a"`, `"a"`, true},
		{`"a"`, `"\u0061"`, true},
		{`"é"`, `"\u00e9"`, true},
		{`"a/b"`, `"a\/b"`, true},
		{`"a"`, `"A"`, false},
		{`"\ud800"`, `"\udc00"`, false},
		{`"\ud800"`, `"\uFFFD"`, false},
		{`"\ud800"`, `"\ud800"`, false}, // not an id Parse reads
		{`"\ud83d\ude00"`, `"😀"`, true},
		{`"1"`, `1`, false},
		{`1`, `"1"`, false},
		{`null`, `null`, false},
		{`true`, `true`, false},
		{`{}`, `{}`, false},
		{``, ``, false},
		{`"a`, `"a`, false},
		{`1 `, `1`, false},
	}
	for _, tt := range tests {
		if got := SameID([]byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("SameID(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := SameID([]byte(tt.b), []byte(tt.a)); got != tt.want {
			t.Errorf("SameID(%s, %s) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}
