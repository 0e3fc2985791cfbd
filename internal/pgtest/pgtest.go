// Package pgtest starts PostgreSQL servers for tests, each test its own (and for the benchmark
// harness: Launch), from the binaries of Debian's postgresql package (initdb and postgres, on PATH
// or under /usr/lib/postgresql/*/bin), in a temporary directory, on a free loopback port, as
// internal/redistest does for Redis. A test can stop, crash and restart its server. Run as root, the server runs as the postgres user
// (initdb refuses root).
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/childproc"
	"github.com/idemgateway/idemgateway/internal/eventually"
)

// ReadyLine is what the server logs once it accepts connections: Start and Restart wait for this
// server's own log to say it, so that a server another test started on the same port is never
// taken for it.
const ReadyLine = "database system is ready to accept connections"

// Server is a postgres process owned by one test (or by Launch's caller). Its methods are not safe
// for concurrent use.
type Server struct {
	tb   testing.TB // nil when Launch started it
	bin  string     // the directory of initdb and postgres
	dir  string     // the data directory, also the socket directory
	port int
	cred *syscall.Credential // the postgres user's, when the test runs as root

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Binaries returns the directory holding initdb and postgres: the one of initdb on PATH, else the
// newest /usr/lib/postgresql/<version>/bin. ok is false when PostgreSQL is not installed.
func Binaries() (dir string, ok bool) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
				return filepath.Dir(p), true
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, true
		}
	}
	return "", false
}

// version is the major version in a /usr/lib/postgresql/<version>/bin path, 0 if none.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start initializes a cluster in a new temporary directory and starts postgres on a free
// 127.0.0.1 port, waiting until its log says it is ready; tb.Cleanup stops it and removes the
// directory. Without PostgreSQL it fails the test under CI (the environment variable CI set) and
// skips it elsewhere, saying how to install it.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, ok := Binaries(); !ok {
		msg := "pgtest: " + errNotInstalled.Error()
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	s, err := Launch()
	if err != nil {
		tb.Fatal(err)
	}
	s.tb = tb
	tb.Cleanup(s.Close)
	return s
}

// errNotInstalled says how to install PostgreSQL.
var errNotInstalled = errors.New("PostgreSQL is not installed (Debian package postgresql: initdb and postgres under /usr/lib/postgresql/*/bin)")

// Launch is Start for a program that is not a test (the benchmark harness): the caller stops the
// server and removes its directory with Close.
func Launch() (*Server, error) {
	bin, ok := Binaries()
	if !ok {
		return nil, fmt.Errorf("pgtest: %w", errNotInstalled)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	if err := s.launch(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// launch runs initdb and starts the server on a free port.
func (s *Server) launch() error {
	if os.Getuid() == 0 {
		var err error
		if s.cred, err = postgresUser(); err != nil {
			return fmt.Errorf("pgtest: running as root, and %w", err)
		}
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return err
		}
	}
	initdb := exec.Command(filepath.Join(s.bin, "initdb"), "-D", filepath.Join(s.dir, "data"), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 5 { // another process may take the free port before postgres binds it
		var err error
		if s.port, err = freePort(); err != nil {
			return err
		}
		if lastErr = s.start(); lastErr == nil {
			return nil
		}
	}
	return fmt.Errorf("pgtest: start postgres: %w", lastErr)
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.Stop()
	_ = os.RemoveAll(s.dir)
}

// postgresUser is the credential of the user "postgres", which Debian's package creates.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("no postgres user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// URL is the server's connection URL, database postgres, user postgres, no TLS.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Addr is "127.0.0.1:<port>".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// logFile is the server's log, stderr of each start appended.
func (s *Server) logFile() string { return filepath.Join(s.dir, "postgres.log") }

// start runs postgres and waits for its log to say it is ready, or for it to exit.
func (s *Server) start() error {
	log, err := os.OpenFile(s.logFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	from, _ := log.Seek(0, 2)
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
		"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = childproc.SysProcAttr()
	cmd.SysProcAttr.Credential = s.cred
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	var gone bool
	ready := eventually.Within(eventually.Ceiling, func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		b, _ := os.ReadFile(s.logFile())
		return int64(len(b)) > from && strings.Contains(string(b[from:]), ReadyLine)
	})
	switch {
	case gone:
		return fmt.Errorf("postgres exited before it was ready:\n%s", s.logTail())
	case !ready:
		s.signal(syscall.SIGQUIT)
		return fmt.Errorf("postgres not ready within %s:\n%s", eventually.Ceiling, s.logTail())
	}
	return nil
}

// logTail is the end of the server's log, for a failure.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logFile())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// signal sends sig to the server and waits for it to exit (SIGKILL after 30 s).
func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd != nil {
		childproc.SignalAndWait(cmd.Process, exited, 30*time.Second, sig)
	}
}

// Pid is the process id of the running postmaster, whose children are the server's backends and
// workers; 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop shuts the server down (fast shutdown: SIGINT) and waits for it. Stopping a stopped server
// does nothing.
func (s *Server) Stop() { s.signal(syscall.SIGINT) }

// Crash stops the server as `pg_ctl stop -m immediate` does (SIGQUIT): no checkpoint, recovery
// from the WAL at the next start; what was committed survives.
func (s *Server) Crash() { s.signal(syscall.SIGQUIT) }

// Restart stops the server if it runs and starts it again on the same port and directory.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.tb.Fatalf("pgtest: restart postgres on port %d: %v", s.port, err)
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
