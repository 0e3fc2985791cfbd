package redistest_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/redistest"
)

// doTLS sends one command over TLS and returns the first reply line.
func doTLS(t *testing.T, addr, command string) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, redistest.ClientTLSConfig(t))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "%s\r\n", command)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("read reply to %q: %v", command, err)
	}
	return strings.TrimSpace(line)
}

func TestTLS(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Options{TLS: true})
	if got, want := s.URL(), "rediss://"+s.Addr()+"/0"; got != want {
		t.Errorf("URL() = %q, want %q", got, want)
	}
	if s.CAFile() == "" {
		t.Error("CAFile() is empty")
	}
	if got := doTLS(t, s.Addr(), "PING"); got != "+PONG" {
		t.Errorf("PING over TLS = %q", got)
	}
	// A plain-text client gets no answer: the port speaks TLS only.
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "PING\r\n")
	if line, err := bufio.NewReader(conn).ReadString('\n'); err == nil && strings.HasPrefix(line, "+PONG") {
		t.Error("a plain-text PING was answered on the TLS port")
	}
}

func TestReplicaAndPause(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t, redistest.Options{Password: "pw"})
	replica := redistest.Start(t, redistest.Options{Password: "pw", ReplicaOf: primary.Addr()})
	auth := func(addr, command string) string {
		t.Helper()
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "AUTH pw\r\n%s\r\n", command)
		r := bufio.NewReader(conn)
		if l, _ := r.ReadString('\n'); !strings.HasPrefix(l, "+OK") {
			t.Fatalf("AUTH = %q", l)
		}
		line, _ := r.ReadString('\n')
		if strings.HasPrefix(line, "$") && !strings.HasPrefix(line, "$-1") {
			line, _ = r.ReadString('\n')
		}
		return strings.TrimSpace(line)
	}
	if got := auth(primary.Addr(), "SET k v"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	// WAIT 1 replica: the replica acknowledges while it runs, and not while it is paused.
	if got := auth(primary.Addr(), "WAIT 1 2000"); got != ":1" {
		t.Errorf("WAIT with a running replica = %q, want :1", got)
	}
	if got := auth(replica.Addr(), "GET k"); got != "v" {
		t.Errorf("GET on the replica = %q, want v", got)
	}
	replica.Pause()
	conn, err := net.DialTimeout("tcp", primary.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "AUTH pw\r\nSET k w\r\nWAIT 1 200\r\n")
	r := bufio.NewReader(conn)
	var lines []string
	for range 3 {
		l, _ := r.ReadString('\n')
		lines = append(lines, strings.TrimSpace(l))
	}
	if lines[2] != ":0" {
		t.Errorf("AUTH, SET, WAIT with a paused replica = %q, want WAIT :0", lines)
	}
	replica.Resume()
	if got := auth(primary.Addr(), "WAIT 1 5000"); got != ":1" {
		t.Errorf("WAIT after Resume = %q, want :1", got)
	}
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-master Redis Cluster (about 2 s); skipped with -short")
	}
	t.Parallel()
	c := redistest.StartCluster(t, 3, redistest.Options{})
	if len(c.Addrs()) != 3 {
		t.Fatalf("Addrs() = %v", c.Addrs())
	}
	// The key "k" lives in slot 7629, which one node serves; the others redirect.
	var served, moved int
	for _, addr := range c.Addrs() {
		switch got := do(t, addr, "SET k v"); {
		case got == "+OK":
			served++
		case strings.HasPrefix(got, "-MOVED 7629 "):
			moved++
		default:
			t.Errorf("SET on %s = %q", addr, got)
		}
	}
	if served != 1 || moved != 2 {
		t.Errorf("SET k: %d nodes served it, %d redirected; want 1 and 2", served, moved)
	}
}

func TestSentinels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and three sentinels (about 2 s); skipped with -short")
	}
	t.Parallel()
	primary := redistest.Start(t, redistest.Options{})
	redistest.Start(t, redistest.Options{ReplicaOf: primary.Addr()})
	ss := redistest.StartSentinels(t, primary, 3, redistest.SentinelOptions{Password: "sentinel-pw"})
	if ss.MasterName() != "mymaster" || len(ss.Addrs()) != 3 {
		t.Fatalf("MasterName() = %q, Addrs() = %v", ss.MasterName(), ss.Addrs())
	}
	for i := range ss.Servers {
		if addr, err := ss.Master(i); err != nil || addr != primary.Addr() {
			t.Errorf("sentinel %d reports master %q, %v; want %s", i, addr, err, primary.Addr())
		}
	}
	if got := do(t, ss.Addrs()[0], "PING"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("PING to a sentinel without its password = %q, want -NOAUTH", got)
	}
}
