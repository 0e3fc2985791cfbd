package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/childproc"
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
	Cmd     *exec.Cmd
	Out     logBuffer
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
	p := &process{name: name, Cmd: cmd, exited: make(chan struct{}), drained: make(chan struct{})}
	isReady := make(chan struct{})
	go func() {
		defer close(p.drained)
		defer r.Close()
		br := bufio.NewReader(r)
		seen := false
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				p.Out.WriteString(line)
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
			t.Logf("output of %s (pid %d):\n%s", p.name, p.Cmd.Process.Pid, p.Out.String())
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
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			t.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, stopTimeout)
			p.killed = true
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
	}
	p.waitDrained()
	if strings.Contains(p.Out.String(), "WARNING: DATA RACE") {
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
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		t.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, stopTimeout)
		_ = p.Cmd.Process.Kill()
		<-p.exited
	}
	p.waitDrained()
	return p.waitErr
}

// Kill9 kills the process with SIGKILL, as a crash would, and waits for it to exit.
func (p *process) Kill9(t *testing.T) {
	t.Helper()
	p.killed = true
	_ = p.Cmd.Process.Kill()
	<-p.exited
}
