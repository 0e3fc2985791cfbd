//go:build !unix

package e2e

import (
	"errors"
	"net"
	"testing"
)

// deadURL returns the URL of a loopback port that refuses connections: one that was free a moment
// ago. (Another process could take it meanwhile; deadaddr_unix.go holds the port instead.)
func deadURL(t *testing.T) string {
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
