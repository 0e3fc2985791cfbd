//go:build unix

package deadaddr

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// URL returns the URL of a loopback port that refuses connections until t ends: a TCP socket
// bound to it and never put in the listening state holds the port, so no other process can take
// it, and the kernel answers every connection attempt with a reset ("connection refused"). A port
// that was merely freed could be taken by another process meanwhile.
func URL(t testing.TB) string {
	t.Helper()
	syscall.ForkLock.RLock() // no child inherits the socket
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
