// Package redistest starts a real redis-server for tests: on a free loopback port, with its data
// directory in the test's temporary directory, stopped when the test ends.
//
// The store tests use it, and so can end-to-end tests. It never skips: a test that needs Redis fails
// when redis-server is not installed, so that a missing package is noticed rather than hidden.
//
// Methods of a Server report failures with tb.Fatalf, so call them from the test's own goroutine.
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is the name of the Redis server program, looked up on PATH.
const Binary = "redis-server"

// Timeouts used by Start, Restart and Stop.
const (
	// ReadyTimeout bounds how long Start and Restart poll PING before they fail the test.
	ReadyTimeout = 15 * time.Second
	// StopTimeout bounds how long Stop waits after SIGTERM before it sends SIGKILL.
	StopTimeout = 10 * time.Second
	// pollInterval is the pause between two readiness probes.
	pollInterval = 5 * time.Millisecond
	// startAttempts is how often Start picks a new free port when the chosen one was taken
	// between probing and binding.
	startAttempts = 5
)

// Options configure a Server. The zero value is an in-memory Redis: no RDB snapshots, no AOF.
type Options struct {
	// AppendOnly turns on the append-only file (--appendonly yes), so that data survives Restart
	// and Kill followed by Restart (up to appendfsync, by default everysec). Default false.
	AppendOnly bool
	// Password, when not empty, is set with --requirepass and included in URL. Default empty.
	Password string
	// Args are extra redis-server arguments appended after the defaults, e.g.
	// []string{"--maxmemory-policy", "allkeys-lru"}. Later arguments override earlier ones.
	Args []string
}

// Server is a redis-server process owned by one test. Its methods are not safe for concurrent use.
type Server struct {
	tb   testing.TB
	opts Options
	bin  string
	dir  string
	port int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	waitErr error
}

// Start starts a redis-server on a free 127.0.0.1 port, with its working directory (for the AOF
// and the log) in tb.TempDir(), and waits until it answers PING. It registers a tb.Cleanup that stops
// the server. It fails the test, never skips it, when redis-server is not on PATH or does not become
// ready within ReadyTimeout.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		tb.Fatalf("redistest: %s not found on PATH: install redis-server (Debian package redis-server): %v", Binary, err)
		return nil
	}
	s := &Server{tb: tb, opts: opts, bin: bin, dir: tb.TempDir()}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: find a free port: %v", err)
			return nil
		}
		s.port = port
		if lastErr = s.start(); lastErr == nil {
			tb.Cleanup(s.Stop)
			return s
		}
		if !errors.Is(lastErr, errExited) {
			break // not a lost race for the port: do not retry
		}
	}
	tb.Fatalf("redistest: start %s: %v", Binary, lastErr)
	return nil
}

// Addr returns the server's address, "127.0.0.1:<port>".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port. It stays the same across Restart.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (AOF, log file redis.log). It stays the same across Restart.
func (s *Server) Dir() string { return s.dir }

// URL returns the redis:// URL of database 0, "redis://127.0.0.1:<port>/0", with ":<password>@"
// before the host when Options.Password is set.
func (s *Server) URL() string {
	user := ""
	if s.opts.Password != "" {
		user = ":" + s.opts.Password + "@"
	}
	return "redis://" + user + s.Addr() + "/0"
}

// Stop stops the server with SIGTERM (Redis then flushes its AOF), escalating to SIGKILL after
// StopTimeout, and waits for the process to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.tb.Helper()
	s.signalAndWait(syscall.SIGTERM, StopTimeout)
}

// Kill kills the server with SIGKILL, as a crash would, and waits for the process to exit. Writes
// not yet flushed to the AOF are lost. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.tb.Helper()
	s.signalAndWait(syscall.SIGKILL, StopTimeout)
}

// Restart stops the server if it is running and starts it again on the same port and directory,
// waiting until it answers PING. With Options.AppendOnly the data written before survives.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.tb.Fatalf("redistest: restart %s on port %d: %v", Binary, s.port, err)
	}
}

// errExited reports that redis-server exited before it became ready.
var errExited = errors.New("redis-server exited before it was ready")

// args returns the command line of the server.
func (s *Server) args() []string {
	appendOnly := "no"
	if s.opts.AppendOnly {
		appendOnly = "yes"
	}
	args := []string{
		"--save", "",
		"--appendonly", appendOnly,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", "redis.log",
		"--daemonize", "no",
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	return append(args, s.opts.Args...)
}

// start runs redis-server and polls PING until it answers, the process exits or ReadyTimeout passes.
func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	var out bytes.Buffer // startup errors before the log file is opened go to stdout/stderr
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited, s.waitErr = cmd, exited, nil
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(exited)
	}()

	deadline := time.Now().Add(ReadyTimeout)
	for {
		if ping(s.Addr()) == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%w (%v): %s%s", errExited, s.exitErr(), out.String(), s.logTail())
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			s.signalAndWait(syscall.SIGKILL, StopTimeout)
			return fmt.Errorf("not ready after %s: %s", ReadyTimeout, s.logTail())
		}
	}
}

func (s *Server) exitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitErr
}

// signalAndWait sends sig to a running server and waits up to timeout, then kills it.
func (s *Server) signalAndWait(sig syscall.Signal, timeout time.Duration) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return
	case <-time.After(timeout):
	}
	_ = cmd.Process.Kill()
	<-exited
}

// logTail returns the last lines of the server's log file, for failure messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "\nredis.log:\n" + strings.Join(lines, "\n")
}

// freePort asks the kernel for a free loopback port. The port is released before redis-server
// binds it, so another process may take it meanwhile; Start retries with a new port then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping sends one PING and succeeds on +PONG, or on -NOAUTH (the server is up but wants a password).
// A server still loading its AOF answers -LOADING, which is not ready.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH") {
		return nil
	}
	return fmt.Errorf("ping: %s", strings.TrimSpace(line))
}
