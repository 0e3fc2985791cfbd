//go:build !unix

package deadaddr

import (
	"errors"
	"net"
	"testing"
)

// URL returns the URL of a loopback port that refuses connections: one that was free a moment
// ago. (Another process could take it meanwhile; the unix build holds the port instead.)
func URL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	return "http://" + addr
}
