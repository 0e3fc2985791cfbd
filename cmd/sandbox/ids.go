package main

import (
	"crypto/rand"
	"fmt"
)

const alphanumerics = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomToken returns n random letters and digits, as in Stripe's ids ("re_3MtwBwLkdIwHu7ix").
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphanumerics[int(b[i])%len(alphanumerics)]
	}
	return string(b)
}

// newUUID returns a random RFC 9562 version 4 UUID, as Linear uses for ids.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
