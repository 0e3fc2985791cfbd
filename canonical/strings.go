package canonical

import (
	"unicode/utf8"
)

// appendString appends s as a JSON string with the minimal escapes of RFC 8785 §3.2.2.2:
// \" and \\, the short escapes \b \t \n \f \r, \u00xx (lowercase hex) for the other control
// characters below U+0020, and every other character as its UTF-8 bytes. s must be valid UTF-8.
// Runs of characters that need no escape, most of any string, are passed over eight bytes at a
// time (escapeIn8).
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		for i+8 <= len(s) && !escapeIn8(s[i:i+8]) {
			i += 8
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Bytes repeated in each byte of a word, for escapeIn8.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// escapeIn8 reports whether one of the eight bytes of s needs an escape in a JSON string: a byte
// below 0x20, '"' or '\\'. A byte b of the word w is below n (n ≤ 0x80) exactly where b - n
// borrows into its top bit while b's own top bit is clear; no borrow crosses into a byte above
// one that did not borrow, so the test of the whole word is exact (the "haszero" and "hasless"
// tests of Bit Twiddling Hacks). '"' and '\\' are the zero bytes of w xor their repetition.
func escapeIn8(s string) bool {
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	below := func(w uint64, n uint64) uint64 { return (w - n*ones) &^ w & highs }
	return below(w, 0x20)|below(w^('"'*ones), 1)|below(w^('\\'*ones), 1) != 0
}

// compareUTF16 compares a and b (valid UTF-8) by their UTF-16 code units, the member order of
// RFC 8785 §3.2.3. It differs from byte order only where a character from U+E000 to U+FFFF meets
// one above U+FFFF: in UTF-16 the latter (a surrogate pair, D800–DFFF) sorts first.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	// Back up to the start of the character that differs.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	ua, ub := firstUnit(ra), firstUnit(rb)
	if ua != ub {
		return ua - ub
	}
	// Both above U+FFFF with the same high surrogate: the low surrogates keep rune order.
	return int(ra) - int(rb)
}

// firstUnit returns the first UTF-16 code unit of r.
func firstUnit(r rune) int {
	if r < 0x10000 {
		return int(r)
	}
	return 0xd800 + int((r-0x10000)>>10)
}
