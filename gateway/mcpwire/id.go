package mcpwire

import (
	"bytes"

	"github.com/idemgateway/idemgateway/canonical"
)

// SameID reports whether two raw ids are the same id: strings by value after unescaping, numbers
// by exact decimal value (1 and 1.0 are the same; big integers never pass through float64, as in
// docs/contract.md §3). A string and a number are never the same id, nor are null or invalid ids
// (an escaped lone surrogate too: Parse refuses it).
func SameID(a, b []byte) bool {
	switch {
	case !validID(a) || !validID(b):
		return false
	case bytes.Equal(a, b):
		return true
	case isString(a) && isString(b):
		return bytes.Equal(text(a), text(b)) // validID refused lone surrogates: no U+FFFD stands in
	case isNumber(a) && isNumber(b):
		ca, errA := canonical.Canonicalize(a)
		cb, errB := canonical.Canonicalize(b)
		return errA == nil && errB == nil && bytes.Equal(ca, cb)
	}
	return false
}
