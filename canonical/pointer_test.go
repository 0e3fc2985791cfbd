package canonical

import (
	"slices"
	"testing"
)

func TestParsePointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		tokens  []string
		wantErr string
	}{
		{in: "/title", tokens: []string{"title"}},
		{in: "/customer/id", tokens: []string{"customer", "id"}},
		{in: "/", tokens: []string{""}},
		{in: "//", tokens: []string{"", ""}},
		{in: "/items/0", tokens: []string{"items", "0"}},
		{in: "/a~1b/m~0n", tokens: []string{"a/b", "m~n"}},
		{in: "/~01", tokens: []string{"~1"}},
		{in: "/a%20b/ü", tokens: []string{"a%20b", "ü"}},
		{in: "title", wantErr: `"title": JSON Pointer must start with "/"`},
		{in: "", wantErr: `"": empty JSON Pointer`},
		{in: "/title~2", wantErr: `"/title~2": invalid JSON Pointer escape`},
		{in: "/a~", wantErr: `"/a~": invalid JSON Pointer escape`},
		{in: "/a~/b", wantErr: `"/a~/b": invalid JSON Pointer escape`},
		{in: "/\xff", wantErr: `"/\xff": JSON Pointer is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePointer(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParsePointer(%q) error = %v, want %s", tt.in, err, tt.wantErr)
				}
				if !p.IsZero() {
					t.Errorf("ParsePointer(%q) returned a set pointer with its error", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePointer(%q): %v", tt.in, err)
			}
			if p.String() != tt.in || p.IsZero() {
				t.Errorf("String() = %q, IsZero() = %t; want %q, false", p.String(), p.IsZero(), tt.in)
			}
			if got := p.tokens(); !slices.Equal(got, tt.tokens) {
				t.Errorf("tokens() = %q, want %q", got, tt.tokens)
			}
		})
	}
}

func TestPointerZero(t *testing.T) {
	t.Parallel()
	var p Pointer
	if !p.IsZero() || p.String() != "" || p.tokens() != nil {
		t.Errorf("zero Pointer: IsZero() = %t, String() = %q", p.IsZero(), p.String())
	}
	if q := mustPointer(t, "/a"); q != mustPointer(t, "/a") || q == p {
		t.Error("pointers do not compare by their text")
	}
}

func TestArrayIndex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tok  string
		n    int
		want int
		ok   bool
	}{
		{"0", 1, 0, true},
		{"9", 10, 9, true},
		{"10", 11, 10, true},
		{"10", 10, 0, false},
		{"0", 0, 0, false},
		{"01", 5, 0, false},
		{"00", 5, 0, false},
		{"-", 5, 0, false},
		{"-1", 5, 0, false},
		{"+1", 5, 0, false},
		{"", 5, 0, false},
		{"1a", 5, 0, false},
		{"99999999999999999999999", 5, 0, false},
	}
	for _, tt := range tests {
		if got, ok := arrayIndex(tt.tok, tt.n); got != tt.want || ok != tt.ok {
			t.Errorf("arrayIndex(%q, %d) = %d, %t; want %d, %t", tt.tok, tt.n, got, ok, tt.want, tt.ok)
		}
	}
}
