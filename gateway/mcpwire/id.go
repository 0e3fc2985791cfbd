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
	if bytes.Equal(a, b) && validID(a) { // the common case, without allocating
		return true
	}
	ka, okA := IDKey(a)
	kb, okB := IDKey(b)
	return okA && okB && ka == kb
}

// IDKey is the comparable form of a raw id: two ids are SameID exactly when their keys are
// equal. ok is false for what is no id. A peer reads `5.0` as the id 5 and `"\u0061"` as "a", so
// whatever tracks ids by their bytes (a cancel's requestId) must track them by key.
func IDKey(id []byte) (key string, ok bool) {
	switch {
	case !validID(id):
		return "", false
	case isString(id):
		return "s" + string(text(id)), true // validID refused lone surrogates: no U+FFFD stands in
	}
	c, err := canonical.Canonicalize(id)
	if err != nil {
		return "", false
	}
	return "n" + string(c), true
}
