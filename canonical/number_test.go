package canonical

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestAppendNumber(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"0.000", "0"},
		{"-0e-7", "0"},
		{"0e99999999999999999999999", "0"},
		{"1", "1"},
		{"-1", "-1"},
		{"1.0", "1"},
		{"1e0", "1"},
		{"10e-1", "1"},
		{"0.01e2", "1"},
		{"100", "100"},
		{"1e2", "100"},
		{"1E+2", "100"},
		{"1.5", "1.5"},
		{"15e-1", "1.5"},
		{"-0.5", "-0.5"},
		{"0.1", "0.1"},
		{"0.000001", "0.000001"},
		{"0.0000001", "1e-7"},
		{"1E-7", "1e-7"},
		{"1.25e-7", "1.25e-7"},
		{"123e-9", "1.23e-7"},
		{"1e20", "100000000000000000000"},
		{"1e21", "1e+21"},
		{"123456789012345678901", "123456789012345678901"},
		{"1234567890123456789012", "1.234567890123456789012e+21"},
		{"9007199254740993", "9007199254740993"},
		{"9007199254740992", "9007199254740992"},
		{"1e400", "1e+400"},
		{"-1.5e-400", "-1.5e-400"},
		{"12.50e1", "125"},
		{"1234.5678", "1234.5678"},
		{"0.30000000000000004", "0.30000000000000004"},
		{"1e999999999999999999", "1e+999999999999999999"},
		{"1e0000000000000000000000000005", "100000"},
		{"1e1000000000000000000", "1e+1000000000000000000"},
		{"123.4e999999999999999999", "1.234e+1000000000000000001"},
		{"0.001e-1000000000000000000", "1e-1000000000000000003"},
		{"0.001e1000000000000000000", "1e+999999999999999997"},
		{"1000e-1000000000000000000", "1e-999999999999999997"},
		{"5e-10000000000000000000", "5e-10000000000000000000"},
	}
	for _, tt := range tests {
		if got := string(appendNumber(nil, []byte(tt.in))); got != tt.want {
			t.Errorf("appendNumber(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestNumberExactValue checks that many spellings of random decimals have one canonical form, that
// the form has the same value, and that different values have different forms.
func TestNumberExactValue(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	forms := make(map[string]string) // canonical form -> value as a big.Rat string
	for range 5000 {
		digits := randomDigits(rng)
		exp := rng.IntN(80) - 40
		neg := rng.IntN(2) == 0
		value := ratOf(t, spell(digits, exp, neg, 0, 0))
		var canon string
		for j := range 6 {
			text := spell(digits, exp, neg, rng.IntN(len(digits)+3)-1, rng.IntN(3))
			got := string(appendNumber(nil, []byte(text)))
			if j == 0 {
				canon = got
			} else if got != canon {
				t.Fatalf("%s canonicalizes to %s, another spelling of it to %s", text, got, canon)
			}
		}
		if v := ratOf(t, canon); v.Cmp(value) != 0 {
			t.Fatalf("canonical form %s has value %s, want %s", canon, v.RatString(), value.RatString())
		}
		if other, ok := forms[canon]; ok && other != value.RatString() {
			t.Fatalf("values %s and %s share the form %s", other, value.RatString(), canon)
		}
		forms[canon] = value.RatString()
	}
}

// randomDigits returns 1 to 30 decimal digits, some of them zeros at either end.
func randomDigits(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(3) {
		b.WriteByte('0')
	}
	for range 1 + rng.IntN(28) {
		b.WriteByte(byte('0' + rng.IntN(10)))
	}
	for range rng.IntN(3) {
		b.WriteByte('0')
	}
	return b.String()
}

// spell writes digits × 10^exp as a JSON number with the decimal point after point digits of
// digits (moved with the exponent; -1 means no point) and pad extra trailing zeros after the point.
func spell(digits string, exp int, neg bool, point, pad int) string {
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	intPart, frac := digits, ""
	if point >= 0 && point < len(digits) {
		intPart, frac = digits[:point], digits[point:]
	}
	exp += len(frac)
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	b.WriteString(intPart)
	if frac != "" || pad > 0 {
		b.WriteString("." + frac + strings.Repeat("0", pad))
	}
	if exp != 0 || point < 0 {
		fmt.Fprintf(&b, "e%d", exp)
	}
	return b.String()
}

func ratOf(tb testing.TB, s string) *big.Rat {
	tb.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		tb.Fatalf("big.Rat cannot read %s", s)
	}
	return r
}

// TestNumberMatchesRFC8785 checks that a number written with the shortest digits of a float64 gets
// the RFC 8785 (ECMAScript) form, which encoding/json also writes for float64.
func TestNumberMatchesRFC8785(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 {
			continue
		}
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		in := strconv.FormatFloat(f, 'g', -1, 64)
		if got := appendNumber(nil, []byte(in)); string(got) != string(want) {
			t.Fatalf("appendNumber(%s) = %s, want %s", in, got, want)
		}
	}
}
