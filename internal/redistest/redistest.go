// Package redistest starts real redis-server processes for tests: on free loopback ports, with
// their data directories in the test's temporary directory, stopped when the test ends. Start runs
// one server (optionally with TLS, or as a replica of another); StartCluster runs a Redis Cluster of
// several masters; StartSentinels runs Redis Sentinels that watch a primary and fail it over.
//
// The store tests use it, and so can end-to-end tests. It never skips: a test that needs Redis fails
// when redis-server is not installed, so that a missing package is noticed rather than hidden.
//
// Methods of a Server report failures with tb.Fatalf, so call them from the test's own goroutine.
package redistest

import (
	"bytes"
	"crypto/tls"
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

	"github.com/idemgateway/idemgateway/internal/childproc"
	"github.com/idemgateway/idemgateway/internal/eventually"
)

// Binary is the name of the Redis server program, looked up on PATH.
const Binary = "redis-server"

// Timeouts used by Start, Restart and Stop.
const (
	// ReadyTimeout bounds how long Start and Restart poll PING before they fail the test: long,
	// for a machine busy with other work.
	ReadyTimeout = eventually.Ceiling
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
	// TLS serves TLS only (--port 0 --tls-port <port>) with a certificate for 127.0.0.1, ::1 and
	// localhost signed by one CA per test process (see ClientTLSConfig and Server.CAFile); client
	// certificates are not required. Replication and the cluster bus use TLS too. URL then
	// returns a rediss:// URL. Default false.
	TLS bool
	// ReplicaOf, when not empty, is the address ("127.0.0.1:<port>") of the primary this server
	// replicates (--replicaof), authenticating with Password (--masterauth). Start then also waits
	// until the replication link is up and the first sync is done. Default empty.
	ReplicaOf string
	// Cluster starts the server as a Redis Cluster node (--cluster-enabled yes) with its cluster
	// bus on a second free port. StartCluster sets it; a lone cluster node serves no slots.
	// Default false.
	Cluster bool
}

// Server is a redis-server process owned by one test. Its methods are not safe for concurrent use.
type Server struct {
	tb   testing.TB
	opts Options
	bin  string
	dir  string
	port int
	// busPort is the cluster bus port of a cluster node (Options.Cluster), else 0.
	busPort int
	// sentinel is the path of the sentinel configuration file of a sentinel, else "".
	sentinel string

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
	if opts.TLS {
		if err := writeServerFiles(s.dir); err != nil {
			tb.Fatalf("redistest: write TLS files: %v", err)
			return nil
		}
	}
	if err := s.startOnFreePorts(nil); err != nil {
		tb.Fatalf("redistest: start %s: %v", Binary, err)
		return nil
	}
	if opts.ReplicaOf != "" {
		s.waitReplicaSynced()
	}
	return s
}

// startOnFreePorts picks free ports and starts the server, retrying with new ports when
// redis-server exited (most likely because another process took a port meanwhile). prepare, when
// not nil, runs after the ports are chosen and before each start (a sentinel writes its
// configuration file there). On success it registers the cleanup that stops the server.
func (s *Server) startOnFreePorts(prepare func() error) error {
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("find a free port: %w", err)
		}
		s.port = port
		if s.opts.Cluster {
			if s.busPort, err = freePort(); err != nil {
				return fmt.Errorf("find a free port: %w", err)
			}
		}
		if prepare != nil {
			if err := prepare(); err != nil {
				return err
			}
		}
		if lastErr = s.start(); lastErr == nil {
			s.tb.Cleanup(s.Stop)
			return nil
		}
		if !errors.Is(lastErr, errExited) {
			break // not a lost race for the port: do not retry
		}
	}
	return lastErr
}

// waitReplicaSynced polls INFO replication until the link to the primary is up, the initial sync
// is done and the primary counts the replica online (only then does WAIT count it), or fails the
// test after ReadyTimeout.
func (s *Server) waitReplicaSynced() {
	s.tb.Helper()
	var last string
	online := fmt.Sprintf(",port=%d,state=online,", s.port)
	ok := eventually.Within(ReadyTimeout, func() bool {
		info, err := s.info("replication")
		last = fmt.Sprint(info, err)
		if err != nil || infoField(info, "master_link_status") != "up" || infoField(info, "master_sync_in_progress") != "0" {
			return false
		}
		c, err := dial(s.opts.ReplicaOf, s.clientTLS(), s.opts.Password, time.Second)
		if err != nil {
			last = err.Error()
			return false
		}
		defer c.Close()
		reply, err := c.do("INFO", "replication")
		primary, _ := reply.(string)
		last = fmt.Sprint("primary: ", primary, err)
		return err == nil && strings.Contains(primary, online)
	})
	if !ok {
		s.tb.Fatalf("redistest: replica %s not in sync with %s after %s: %s%s", s.Addr(), s.opts.ReplicaOf, ReadyTimeout, last, s.logTail())
	}
}

// info returns the INFO section of the server.
func (s *Server) info(section string) (string, error) {
	reply, err := s.do("INFO", section)
	if err != nil {
		return "", err
	}
	info, _ := reply.(string)
	return info, nil
}

// do runs one command on the server on a new connection (TLS and password as configured).
func (s *Server) do(args ...string) (any, error) {
	c, err := dial(s.Addr(), s.clientTLS(), s.opts.Password, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.do(args...)
}

// clientTLS is the TLS configuration of the helpers' own connections, nil without Options.TLS.
func (s *Server) clientTLS() *tls.Config {
	if !s.opts.TLS {
		return nil
	}
	return ClientTLSConfig(s.tb)
}

// Addr returns the server's address, "127.0.0.1:<port>".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port. It stays the same across Restart.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (AOF, log file redis.log). It stays the same across Restart.
func (s *Server) Dir() string { return s.dir }

// URL returns the redis:// URL of database 0, "redis://127.0.0.1:<port>/0", with ":<password>@"
// before the host when Options.Password is set, and the scheme rediss:// with Options.TLS.
func (s *Server) URL() string {
	user := ""
	if s.opts.Password != "" {
		user = ":" + s.opts.Password + "@"
	}
	scheme := "redis://"
	if s.opts.TLS {
		scheme = "rediss://"
	}
	return scheme + user + s.Addr() + "/0"
}

// CAFile returns the path of the PEM file of the CA that signed the server's certificate
// (Options.TLS), or "" without TLS.
func (s *Server) CAFile() string {
	if !s.opts.TLS {
		return ""
	}
	return filepath.Join(s.dir, caFile)
}

// Pause stops the server process with SIGSTOP: it keeps its connections open but answers nothing,
// like a server stuck in a long command or a partitioned host. Resume continues it. A paused server
// is resumed before the cleanup stops it.
func (s *Server) Pause() {
	s.tb.Helper()
	s.signal(syscall.SIGSTOP)
}

// Resume continues a server stopped by Pause (SIGCONT).
func (s *Server) Resume() {
	s.tb.Helper()
	s.signal(syscall.SIGCONT)
}

// signal sends sig to a running server.
func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.tb.Fatalf("redistest: server %s is not running", s.Addr())
		return
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("redistest: signal %s to %s: %v", sig, s.Addr(), err)
	}
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
	if s.sentinel != "" {
		// Everything else is in the configuration file, which the sentinel rewrites.
		return []string{s.sentinel, "--sentinel"}
	}
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
		// A replica's first sync starts at once, not after the default 5 s wait for more replicas.
		"--repl-diskless-sync-delay", "0",
	}
	if s.opts.TLS {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile,
			"--tls-auth-clients", "no", "--tls-replication", "yes", "--tls-cluster", "yes")
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	if s.opts.ReplicaOf != "" {
		host, port, _ := net.SplitHostPort(s.opts.ReplicaOf)
		args = append(args, "--replicaof", host, port)
		if s.opts.Password != "" {
			args = append(args, "--masterauth", s.opts.Password)
		}
	}
	if s.opts.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(s.busPort), "--cluster-node-timeout", "2000")
	}
	return append(args, s.opts.Args...)
}

// start runs redis-server and polls PING until it answers, the process exits or ReadyTimeout passes.
// The server that answers must be this process, whose own log says it is ready: the port was free
// when chosen, but another test's redis-server may have taken it meanwhile, and then answers PING
// while this one fails to bind and exits; start then reports the exit, and the caller tries a new
// port. (INFO's process_id would say so too, but some tests rename INFO away.)
func (s *Server) start() error {
	logFrom := s.logSize() // a restart appends to the log: only what this process writes counts
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	var out bytes.Buffer // startup errors before the log file is opened go to stdout/stderr
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = childproc.SysProcAttr()
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
		if ping(s.Addr(), s.clientTLS()) == nil && s.logSaysReady(logFrom) {
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
	if cmd != nil {
		// SIGCONT: a server stopped by Pause handles sig only once continued.
		childproc.SignalAndWait(cmd.Process, exited, timeout, sig, syscall.SIGCONT)
	}
}

// logTail returns the last lines of the server's log file, for failure messages.
func (s *Server) logTail() string {
	name := s.logName()
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "\n" + name + ":\n" + strings.Join(lines, "\n")
}

// logName is the name of the server's log file in its directory.
func (s *Server) logName() string {
	if s.sentinel != "" {
		return "sentinel.log"
	}
	return "redis.log"
}

// logSize is the size of the server's log now, 0 when there is none yet.
func (s *Server) logSize() int64 {
	fi, err := os.Stat(filepath.Join(s.dir, s.logName()))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSaysReady reports whether the server's log, from byte from on, says it accepts connections:
// the process started since then listens on its port. A sentinel, which says no such thing, is
// taken at its PING.
func (s *Server) logSaysReady(from int64) bool {
	if s.sentinel != "" {
		return true
	}
	b, err := os.ReadFile(filepath.Join(s.dir, s.logName()))
	if err != nil || int64(len(b)) < from {
		return false
	}
	return bytes.Contains(b[from:], []byte("Ready to accept connections"))
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

// ping sends one PING (over TLS when tlsConfig is not nil) and succeeds on +PONG, or on -NOAUTH
// (the server is up but wants a password). A server still loading its AOF answers -LOADING, which
// is not ready.
func ping(addr string, tlsConfig *tls.Config) error {
	c, err := dial(addr, tlsConfig, "", time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	reply, err := c.do("PING")
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOAUTH") {
			return nil
		}
		return fmt.Errorf("ping: %w", err)
	}
	if reply != "PONG" {
		return fmt.Errorf("ping: %v", reply)
	}
	return nil
}
