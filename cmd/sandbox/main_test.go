package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/testlog"
)

// readyRe matches the readiness line and captures the address.
var readyRe = regexp.MustCompile(`^sandbox listening on http://(\S+)\n$`)

// readReady reads the readiness line from r and returns a base URL that dials the sandbox on the
// loopback interface. It fails when the line does not come within a minute or when failed yields
// first (the program ended).
func readReady(t *testing.T, r io.Reader, failed <-chan error) string {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case err := <-failed:
		t.Fatalf("ended before it was ready: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no readiness line within a minute")
	}
	m := readyRe.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("readiness line %q, want %q", line, "sandbox listening on http://ADDR\\n")
	}
	_, port, err := net.SplitHostPort(m[1])
	if err != nil || port == "0" {
		t.Fatalf("readiness line %q: want the real port (%v)", line, err)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", port)
}

func TestRunListenPortZero(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"127.0.0.1:0", ":0"} {
		t.Run(listen, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stdout, w := io.Pipe()
			var stderr testlog.Buffer
			done := make(chan error, 1)
			go func() { done <- run(ctx, []string{"-listen", listen}, w, &stderr) }()

			base := readReady(t, stdout, done)
			_, created := send(t, http.DefaultClient, base, creates[0].req)
			if st := getStats(t, http.DefaultClient, base); st.Total != 1 {
				t.Errorf("stats total = %d after one create (%s)", st.Total, created)
			}

			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run = %v, want nil after a graceful shutdown", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("run did not return after its context ended")
			}
			if !strings.Contains(stderr.String(), "endpoint=jira.create_issue") {
				t.Errorf("no request log line in:\n%s", stderr.String())
			}
		})
	}
}

func TestRunFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		wantErr   error
		wantUsage bool
	}{
		{"help", []string{"-h"}, flag.ErrHelp, true},
		{"unknown flag", []string{"-port", "9000"}, errUsage, true},
		{"stray argument", []string{"serve"}, errUsage, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr testlog.Buffer
			err := run(t.Context(), tc.args, &stdout, &stderr)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("run = %v, want %v", err, tc.wantErr)
			}
			if stdout.String() != "" {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
			if !tc.wantUsage {
				return
			}
			// The -h text documents every endpoint and every fault header.
			for _, want := range []string{
				"-listen", "/rest/api/3/issue", "/rest/api/3/issue/{id}", "/api/v2/tickets.json", "/graphql",
				"/v1/refunds", "/v1/tickets", "/v1/tickets?external_id=", "/jsonrpc", "/rest/api/3/issue/{id}/attachments", "/_sandbox/stats", "/_sandbox/reset", "/_sandbox/script",
				"/_sandbox/holds", "/_sandbox/release", "/mcp", "/mcp-json", "/mcp-stateless",
				"search_tickets", "failing_create",
				headerDelay, headerHold, headerDetach, headerIdempotencyKey, headerStatus, headerFailAfterCommit + ": drop", headerFailAfterCommit + ": 500",
				headerSetCookie, headerBodyBytes, headerKeyCollation,
			} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("usage lacks %q", want)
				}
			}
			for _, ep := range effectEndpoints {
				if !strings.Contains(stderr.String(), "["+ep+"]") {
					t.Errorf("usage lacks the counter name [%s]", ep)
				}
			}
		})
	}
}

func TestRunListenError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stdout, stderr testlog.Buffer
	if err := run(t.Context(), []string{"-listen", ln.Addr().String()}, &stdout, &stderr); err == nil {
		t.Error("run on a taken address = nil, want an error")
	}
	if stdout.String() != "" {
		t.Errorf("printed %q although it could not listen", stdout.String())
	}
}

// TestBinary builds the program, runs it on port 0, waits for its readiness line, makes one call and
// stops it with SIGTERM: it must exit 0.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "sandbox")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testlog.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()

	base := readReady(t, stdout, exited)
	if resp, body := send(t, http.DefaultClient, base, creates[1].req); resp.StatusCode != 201 {
		t.Errorf("create: %d %s", resp.StatusCode, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("no exit within a minute of SIGTERM")
	}
	log := stderr.String()
	for _, want := range []string{"msg=request endpoint=zendesk.create_ticket", "status=201", "effect=true", "fault=none", `msg="shutting down"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}
