package canonical

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCanonicalizeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"duplicate at top level", `{"title":"a","title":"b"}`, `invalid body: duplicate member "title" at the top level`},
		{"duplicate nested", `{"customer":{"id":1,"name":"x","id":2}}`, `invalid body: duplicate member "id" at /customer`},
		{"duplicate in array", `[0,{"x":[{"t":1,"t":1}]}]`, `invalid body: duplicate member "t" at /1/x/0`},
		{"duplicate after unescaping", `{"a":1,"\u0061":2}`, `invalid body: duplicate member "a" at the top level`},
		{"duplicate with escaped pointer", `{"a/b":{"k":1,"k":2}}`, `invalid body: duplicate member "k" at /a~1b`},
		{"duplicate in a wide object", `{"w":` + string(duplicateLast(objectBody(100))) + `}`, `invalid body: duplicate member "0" at /w`},
		{"two duplicates, the first object's named", `[{"b":1,"b":2},{"a":1,"a":2}]`, `invalid body: duplicate member "b" at /0`},
		{"two duplicates, the object completed first named", `{"a":1,"a":2,"b":{"x":1,"x":2}}`, `invalid body: duplicate member "x" at /b`},
		{"two duplicates in one object, the first in UTF-16 order named", `{"b":1,"b":2,"a":1,"a":2}`, `invalid body: duplicate member "a" at the top level`},
		{"duplicate under escaped tokens", `{"a/b":{"k~":[0,{"k":1,"k":2}]}}`, `invalid body: duplicate member "k" at /a~1b/k~0/1`},
		{"duplicate before a syntax error", `[{"a":1,"a":2},}`, `invalid body: invalid character ',' at start of value at offset 14`},
		{"invalid UTF-8 in value", "{\"a\":\"\xff\"}", `invalid body: invalid UTF-8 at offset 6`},
		{"invalid UTF-8 in name", "{\"\xc3\":1}", `invalid body: invalid UTF-8 at offset 2`},
		{"invalid UTF-8 outside strings", "[1]\xff", `invalid body: data after the top-level value at offset 3`},
		{"lone high surrogate", `"\ud800"`, "invalid body: invalid surrogate pair `\\ud800\"` in string at offset 1"},
		{"lone low surrogate", `"\udc00x"`, "invalid body: invalid surrogate pair `\\udc00x\"` in string at offset 1"},
		{"trailing garbage", `{"a":1}x`, `invalid body: data after the top-level value at offset 7`},
		{"trailing value", `{"a":1} {"b":2}`, `invalid body: data after the top-level value at offset 8`},
		{"trailing number", "1 2", `invalid body: data after the top-level value at offset 2`},
		{"leading zero", "01", `invalid body: data after the top-level value at offset 1`},
		{"empty", "", `invalid body: unexpected end of JSON input at offset 0`},
		{"white space only", " \n", `invalid body: unexpected end of JSON input at offset 2`},
		{"unterminated object", `{"a":1`, `invalid body: unexpected end of JSON input at offset 6`},
		{"unterminated string", `"abc`, `invalid body: unexpected end of JSON input at offset 4`},
		{"missing value", `{"a":}`, `invalid body: missing value after object name at offset 5`},
		{"trailing comma", `[1,]`, `invalid body: invalid character ',' at start of value at offset 2`},
		{"single quotes", `{'a':1}`, `invalid body: invalid character '\'' at start of value at offset 1`},
		{"number name", `{1:2}`, `invalid body: object member name must be a string at offset 1`},
		{"NaN", `NaN`, `invalid body: invalid character 'N' at start of value at offset 0`},
		{"plus sign", `+1`, `invalid body: invalid character '+' at start of value at offset 0`},
		{"bare fraction", `.5`, `invalid body: invalid character '.' at start of value at offset 0`},
		{"missing fraction digits", `1.`, `invalid body: unexpected end of JSON input at offset 2`},
		{"control character in string", "\"a\x01\"", `invalid body: invalid character '\x01' in string (expecting non-control character) at offset 2`},
		{"too deep", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), `invalid body: exceeded max depth at offset 10000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Canonicalize([]byte(tt.in))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %s, want error %s", tt.in, got, tt.want)
			}
			if !errors.Is(err, ErrInvalidBody) || err.Error() != tt.want {
				t.Errorf("Canonicalize(%q) error\n\tgot  %v\n\twant %s", tt.in, err, tt.want)
			}
			if json.Valid([]byte(tt.in)) && !strings.Contains(tt.name, "duplicate") && !strings.Contains(tt.name, "UTF-8") && !strings.Contains(tt.name, "surrogate") {
				t.Errorf("encoding/json accepts %q: the test case is wrong", tt.in)
			}
		})
	}
}

func TestCanonicalizeDepth(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":[`, 5000) + strings.Repeat(`]}`, 5000)
	got, err := Canonicalize([]byte(deep))
	if err != nil {
		t.Fatalf("10000 levels: %v", err)
	}
	if string(got) != deep {
		t.Error("10000 levels: not canonical")
	}
}

func TestCanonicalizeDoesNotAlias(t *testing.T) {
	t.Parallel()
	in := []byte(`{"b":"x","a":1}`)
	got, err := Canonicalize(in)
	if err != nil {
		t.Fatal(err)
	}
	copy(in, `{"b":"y","a":2}`)
	if string(got) != `{"a":1,"b":"x"}` {
		t.Errorf("output changed with its input: %s", got)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	const doc = `{"id":"T-1842","url":"https://t.example/T-1842","n":1.50,"big":9007199254740993,
		"ok":true,"nil":null,"obj":{"b":2,"a":[1,"x"]},"list":["a","b"],"a/b":"slash","m~n":"tilde",
		"esc":"caf\u00e9 \"x\"","":"empty name","0":"zero"}`
	tests := []struct {
		ptr  string
		want string
		ok   bool
	}{
		{"/id", "T-1842", true},
		{"/url", "https://t.example/T-1842", true},
		{"/n", "1.5", true},
		{"/big", "9007199254740993", true},
		{"/ok", "true", true},
		{"/nil", "null", true},
		{"/obj", `{"a":[1,"x"],"b":2}`, true},
		{"/obj/a/1", "x", true},
		{"/list/1", "b", true},
		{"/list/01", "", false},
		{"/list/2", "", false},
		{"/list/-", "", false},
		{"/a~1b", "slash", true},
		{"/m~0n", "tilde", true},
		{"/esc", `café "x"`, true},
		{"/", "empty name", true},
		{"/0", "zero", true},
		{"/missing", "", false},
		{"/id/0", "", false},
		{"/obj/a/0/x", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.ptr, func(t *testing.T) {
			t.Parallel()
			got, ok := Lookup([]byte(doc), mustPointer(t, tt.ptr))
			if got != tt.want || ok != tt.ok {
				t.Errorf("Lookup(%s) = %q, %t; want %q, %t", tt.ptr, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestLookupNotFound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		ptr  Pointer
	}{
		{"zero pointer", `{"id":1}`, Pointer{}},
		{"invalid JSON", `{"id":1`, mustPointer(t, "/id")},
		{"duplicate names", `{"id":1,"id":2}`, mustPointer(t, "/id")},
		{"trailing data", `{"id":1} x`, mustPointer(t, "/id")},
		{"empty", ``, mustPointer(t, "/id")},
		{"not JSON", `<html>`, mustPointer(t, "/id")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, ok := Lookup([]byte(tt.data), tt.ptr); ok {
				t.Errorf("Lookup = %q, true; want not found", got)
			}
		})
	}
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	// Each string sorts before the next one by UTF-16 code units (RFC 8785 §3.2.3).
	ordered := []string{"", "\x00", "1", "A", "a", "aa", "ab", "\u0080", "ö", "\u07ff", "€", "\ud7ff",
		"\U00010000", "\U00010000a", "\U0001f600", "\U0010ffff", "\ue000", "\ufb33", "\uffff"}
	for i, a := range ordered {
		for j, b := range ordered {
			got := compareUTF16(a, b)
			if (i < j) != (got < 0) || (i == j) != (got == 0) {
				t.Errorf("compareUTF16(%q, %q) = %d", a, b, got)
			}
		}
	}
}
