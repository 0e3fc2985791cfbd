package redistest_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// do sends one command in the inline protocol and returns the first reply line.
func do(t *testing.T, addr, command string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "%s\r\n", command); err != nil {
		t.Fatalf("write %q: %v", command, err)
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read reply to %q: %v", command, err)
	}
	if strings.HasPrefix(line, "$") && !strings.HasPrefix(line, "$-1") {
		line, err = r.ReadString('\n')
		if err != nil {
			t.Fatalf("read bulk reply to %q: %v", command, err)
		}
	}
	return strings.TrimSpace(line)
}
