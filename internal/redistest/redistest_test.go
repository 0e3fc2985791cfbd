package redistest_test

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/redistest"
)

func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		appendOnly bool
		restart    func(*redistest.Server)
		wantValue  string
	}{
		{"appendonly survives restart", true, (*redistest.Server).Restart, "v"},
		{"appendonly survives stop then restart", true, func(s *redistest.Server) { s.Stop(); s.Restart() }, "v"},
		{"in-memory loses data on restart", false, (*redistest.Server).Restart, "$-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, redistest.Options{AppendOnly: tc.appendOnly})
			if got, want := s.URL(), "redis://"+s.Addr()+"/0"; got != want {
				t.Errorf("URL() = %q, want %q", got, want)
			}
			if got := do(t, s.Addr(), "SET k v"); got != "+OK" {
				t.Fatalf("SET = %q", got)
			}
			port := s.Port()
			tc.restart(s)
			if s.Port() != port {
				t.Errorf("port changed across restart: %d -> %d", port, s.Port())
			}
			if got := do(t, s.Addr(), "GET k"); got != tc.wantValue {
				t.Errorf("GET after restart = %q, want %q", got, tc.wantValue)
			}
		})
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Options{})
	s.Kill()
	if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		conn.Close()
		t.Fatalf("server still accepts connections after Kill")
	}
	s.Kill() // a second Kill is harmless
	s.Stop()
}

func TestOptions(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Options{
		Password: "s3cret",
		Args:     []string{"--maxmemory-policy", "allkeys-lru"},
	})
	if got, want := s.URL(), "redis://:s3cret@"+s.Addr()+"/0"; got != want {
		t.Errorf("URL() = %q, want %q", got, want)
	}
	if got := do(t, s.Addr(), "PING"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("PING without password = %q, want -NOAUTH", got)
	}
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	fmt.Fprintf(conn, "AUTH s3cret\r\nCONFIG GET maxmemory-policy\r\n")
	var lines []string
	for range 6 { // +OK, *2, $16, maxmemory-policy, $11, allkeys-lru
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSpace(l))
	}
	if lines[0] != "+OK" || lines[5] != "allkeys-lru" {
		t.Errorf("AUTH + CONFIG GET = %q", lines)
	}
}

// fatalTB records Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func TestMissingBinaryFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.Start(tb, redistest.Options{})
		t.Error("Start returned without failing the test")
	}()
	<-done
	if !strings.Contains(tb.msg, "install redis-server (Debian package redis-server)") {
		t.Errorf("failure message = %q, want the install hint", tb.msg)
	}
}
