package canonical

import "strconv"

// appendNumber appends the canonical form of the JSON number raw (RFC 8259 §6 grammar, already
// checked by the tokenizer) to dst. The form is described in the package comment: the exact
// decimal value laid out the way ECMAScript's Number::toString lays out digits.
func appendNumber(dst, raw []byte) []byte {
	neg := raw[0] == '-'
	i := 0
	if neg {
		i++
	}
	// The digits before and after the decimal point, and the exponent.
	intStart := i
	for i < len(raw) && isDigit(raw[i]) {
		i++
	}
	intPart := raw[intStart:i]
	var fracPart []byte
	if i < len(raw) && raw[i] == '.' {
		i++
		fracStart := i
		for i < len(raw) && isDigit(raw[i]) {
			i++
		}
		fracPart = raw[fracStart:i]
	}
	expNeg := false
	var expDigits []byte
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if raw[i] == '+' || raw[i] == '-' {
			expNeg = raw[i] == '-'
			i++
		}
		expDigits = raw[i:]
		for len(expDigits) > 1 && expDigits[0] == '0' {
			expDigits = expDigits[1:]
		}
	}

	// The significant digits are digit(first) … digit(last) of intPart ++ fracPart.
	a := len(intPart)
	total := a + len(fracPart)
	digit := func(j int) byte {
		if j < a {
			return intPart[j]
		}
		return fracPart[j-a]
	}
	first := 0
	for first < total && digit(first) == '0' {
		first++
	}
	if first == total {
		return append(dst, '0')
	}
	last := total - 1
	for digit(last) == '0' {
		last--
	}
	k := last - first + 1
	appendDigits := func(dst []byte, from, to int) []byte { // digits first+from … first+to-1
		for j := first + from; j < first+to; j++ {
			dst = append(dst, digit(j))
		}
		return dst
	}
	if neg {
		dst = append(dst, '-')
	}

	// The value is 0.d₁…dₖ × 10^n with n = exponent + a - first.
	adj := int64(a - first)
	if len(expDigits) > 18 {
		// |exponent| ≥ 10¹⁸ dwarfs adj (bounded by the input length), so n is far outside the
		// plain layouts: write d₁[.d₂…dₖ]e±(exponent+adj-1) with the exponent kept as text.
		dst = appendDigits(dst, 0, 1)
		if k > 1 {
			dst = append(dst, '.')
			dst = appendDigits(dst, 1, k)
		}
		delta := adj - 1 // added to the exponent; subtracted from its magnitude when negative
		if expNeg {
			dst = append(dst, 'e', '-')
			delta = -delta
		} else {
			dst = append(dst, 'e', '+')
		}
		return addSmall(dst, expDigits, delta)
	}
	var exp int64 // at most 18 digits: no overflow
	for _, c := range expDigits {
		exp = exp*10 + int64(c-'0')
	}
	if expNeg {
		exp = -exp
	}
	n := exp + adj
	switch {
	case int64(k) <= n && n <= 21:
		dst = appendDigits(dst, 0, k)
		for range n - int64(k) {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = appendDigits(dst, 0, int(n))
		dst = append(dst, '.')
		dst = appendDigits(dst, int(n), k)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = appendDigits(dst, 0, k)
	default:
		dst = appendDigits(dst, 0, 1)
		if k > 1 {
			dst = append(dst, '.')
			dst = appendDigits(dst, 1, k)
		}
		dst = append(dst, 'e')
		if n-1 < 0 {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, -(n - 1), 10)
		} else {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, n-1, 10)
		}
	}
	return dst
}

// addSmall appends the decimal digits of digits+delta to dst, where digits is a decimal number
// without leading zeros that is larger than |delta| (at least 19 digits against an int64 delta
// far below 10¹⁸).
func addSmall(dst, digits []byte, delta int64) []byte {
	out := make([]byte, len(digits)+1)
	copy(out[1:], digits)
	out[0] = '0'
	carry := delta // signed amount still to add at the current position
	for j := len(out) - 1; j >= 0 && carry != 0; j-- {
		d := int64(out[j]-'0') + carry%10
		carry /= 10
		switch {
		case d < 0:
			d += 10
			carry--
		case d > 9:
			d -= 10
			carry++
		}
		out[j] = byte('0' + d)
	}
	for len(out) > 1 && out[0] == '0' {
		out = out[1:]
	}
	return append(dst, out...)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
