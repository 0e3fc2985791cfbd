package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/idemgateway/idemgateway/internal/childproc"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

// Timeouts of the process helpers.
const (
	startTimeout = 30 * time.Second // until a process prints its listening line
	readyTimeout = 15 * time.Second // until the gateway's /readyz answers 200
	stopTimeout  = 20 * time.Second // after SIGTERM, before SIGKILL (the gateway's grace is 10 s here)
)

// process is a child process owned by one test. Its stdout and stderr go to one pipe, read line by
// line into out, which the test log shows when the test fails.
type process struct {
	name    string
	cmd     *exec.Cmd
	out     logBuffer
	exited  chan struct{} // closed once the process has been waited for
	drained chan struct{} // closed once its output has been read to the end
	waitErr error
	killed  bool // ended by SIGKILL on purpose: its exit status means nothing
	judged  bool // ended by terminate: the test judges its exit status itself
}

// logBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcess starts cmd and waits until ready returns true for a line of its output. It
// registers a cleanup that stops the process and, when the test failed, logs its output.
func startProcess(t *testing.T, name string, cmd *exec.Cmd, ready func(line string) bool) *process {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("%s: pipe: %v", name, err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = childproc.SysProcAttr()
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		t.Fatalf("%s: start: %v", name, err)
	}
	w.Close()
	p := &process{name: name, cmd: cmd, exited: make(chan struct{}), drained: make(chan struct{})}
	isReady := make(chan struct{})
	go func() {
		defer close(p.drained)
		defer r.Close()
		br := bufio.NewReader(r)
		seen := false
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				p.out.WriteString(line)
				if !seen && ready(strings.TrimRight(line, "\r\n")) {
					seen = true
					close(isReady)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", p.name, p.cmd.Process.Pid, p.out.String())
		}
	})

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-isReady:
		return p
	case <-p.exited:
		p.waitDrained()
		t.Fatalf("%s exited before it was ready: %v", name, p.waitErr)
	case <-timer.C:
		t.Fatalf("%s printed no listening line within %s", name, startTimeout)
	}
	return nil
}

func (p *process) waitDrained() {
	select {
	case <-p.drained:
	case <-time.After(5 * time.Second):
	}
}

// stop ends the process with SIGTERM (SIGKILL after stopTimeout) and waits for it. It reports a
// data race found by a -race binary, and any exit status but 0, as a test error. Stopping a
// process that has exited does nothing more than these checks.
func (p *process) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			t.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, stopTimeout)
			p.killed = true
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	p.waitDrained()
	if strings.Contains(p.out.String(), "WARNING: DATA RACE") {
		t.Errorf("%s reported a data race (its output follows)", p.name)
	}
	if p.waitErr != nil && !p.killed && !p.judged {
		t.Errorf("%s exited with %v", p.name, p.waitErr)
	}
}

// terminate sends SIGTERM and waits for the process to exit (SIGKILL and a test error after
// stopTimeout). It returns the exit error, for the test to judge: stop then ignores it.
func (p *process) terminate(t *testing.T) error {
	t.Helper()
	p.judged = true
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		t.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, stopTimeout)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.waitDrained()
	return p.waitErr
}

// kill9 kills the process with SIGKILL, as a crash would, and waits for it to exit.
func (p *process) kill9(t *testing.T) {
	t.Helper()
	p.killed = true
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// sandbox is a running cmd/sandbox.
type sandbox struct {
	*process
	url string // "http://127.0.0.1:PORT"
}

var sandboxListening = regexp.MustCompile(`sandbox listening on (http://\S+)`)

// startSandbox starts a sandbox on a free loopback port.
func startSandbox(t *testing.T) *sandbox {
	t.Helper()
	sb := &sandbox{}
	sb.process = startProcess(t, "sandbox", exec.Command(bin.sandbox, "-listen", "127.0.0.1:0"), func(line string) bool {
		m := sandboxListening.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		sb.url = m[1]
		return true
	})
	return sb
}

// gateway is a running cmd/idemgateway.
type gateway struct {
	*process
	proxy string // "http://127.0.0.1:PORT"
	admin string // "http://127.0.0.1:PORT"
}

// startGateway starts the gateway on free loopback ports with the routes file and the extra
// environment (the store's settings), and waits until its /readyz answers 200.
func startGateway(t *testing.T, routesFile string, extraEnv []string) *gateway {
	t.Helper()
	cmd := exec.Command(bin.gateway, "serve", "-routes", routesFile, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0")
	cmd.Env = gatewayEnv(extraEnv)
	g := &gateway{}
	g.process = startProcess(t, "idemgateway", cmd, func(line string) bool {
		var l struct{ Msg, Proxy, Admin string }
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "listening" || l.Proxy == "" || l.Admin == "" {
			return false
		}
		g.proxy, g.admin = "http://"+l.Proxy, "http://"+l.Admin
		return true
	})
	g.waitReady(t)
	return g
}

// gatewayEnv is this process's environment without IDEMGATEWAY_* and OTEL_* variables, plus
// fixed logging and tracing settings, plus extra. A -race binary sleeps a second before it exits
// (GORACE atexit_sleep_ms, so that late reports get out); 100 ms is enough for one process and
// saves a second per gateway.
func gatewayEnv(extra []string) []string {
	var env []string
	gorace := "atexit_sleep_ms=100"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "IDEMGATEWAY_"), strings.HasPrefix(kv, "OTEL_"):
		case strings.HasPrefix(kv, "GORACE="):
			gorace += " " + strings.TrimPrefix(kv, "GORACE=") // the caller's options win
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "GORACE="+gorace,
		"IDEMGATEWAY_LOG_FORMAT=json", "IDEMGATEWAY_LOG_LEVEL=info", "OTEL_TRACES_EXPORTER=none")
	return append(env, extra...)
}

// waitReady polls GET /readyz until it answers 200.
func (g *gateway) waitReady(t *testing.T) {
	t.Helper()
	eventually.True(t, "the gateway's /readyz to answer 200", func() bool {
		resp, err := http.Get(g.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// storeKind names a store the gateway can run on.
type storeKind string

const (
	embeddedStore storeKind = "embedded" // IDEMGATEWAY_DATA_DIR
	redisStore    storeKind = "redis"    // IDEMGATEWAY_REDIS_URL, a redis-server of the test's own
)

var storeKinds = []storeKind{embeddedStore, redisStore}

// env is one test's world: a sandbox, a routes file pointing at it, a store, and a gateway.
type env struct {
	kind     storeKind
	sb       *sandbox
	gw       *gateway
	redis    *redistest.Server // nil on the embedded store
	routes   string            // path of the routes file
	storeEnv []string          // the gateway's store settings, and envOptions.env
}

// envOptions change what newEnv starts.
type envOptions struct {
	redis  redistest.Options // options of the redis-server, on the Redis store
	routes string            // the routes template in testdata; default routes.yaml.tmpl
	env    []string          // more settings of every gateway process, e.g. IDEMGATEWAY_SHUTDOWN_GRACE=1s
}

// newEnv starts a store of kind, a sandbox and a gateway for t; all stop when t ends.
func newEnv(t *testing.T, kind storeKind, opts ...envOptions) *env {
	t.Helper()
	var o envOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	e := &env{kind: kind}
	switch kind {
	case embeddedStore:
		e.storeEnv = []string{"IDEMGATEWAY_DATA_DIR=" + filepath.Join(t.TempDir(), "data")}
	case redisStore:
		e.redis = redistest.Start(t, o.redis)
		e.storeEnv = []string{"IDEMGATEWAY_REDIS_URL=" + e.redis.URL()}
	default:
		t.Fatalf("unknown store kind %q", kind)
	}
	e.storeEnv = append(e.storeEnv, o.env...)
	e.sb = startSandbox(t)
	if o.routes == "" {
		o.routes = "routes.yaml.tmpl"
	}
	e.routes = writeRoutes(t, o.routes, e.sb.url)
	e.gw = e.startGateway(t)
	return e
}

// startGateway starts another gateway process on e's routes and store.
func (e *env) startGateway(t *testing.T) *gateway {
	t.Helper()
	return startGateway(t, e.routes, e.storeEnv)
}

// forEachStore runs test as a parallel subtest per store kind, each in its own env (started with
// opts, if any).
func forEachStore(t *testing.T, test func(t *testing.T, e *env), opts ...envOptions) {
	t.Helper()
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			test(t, newEnv(t, kind, opts...))
		})
	}
}

// writeRoutes executes the routes template testdata/name for the sandbox at sandboxURL into t's
// temporary directory and returns the file's path.
func writeRoutes(t *testing.T, name, sandboxURL string) string {
	t.Helper()
	tmpl, err := template.ParseFiles(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("routes template: %v", err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, map[string]string{"Sandbox": sandboxURL, "Dead": deadURL(t)}); err != nil {
		t.Fatalf("routes template %s: %v", name, err)
	}
	path := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
