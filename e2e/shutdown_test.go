package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// TestShutdownGraceRunsOut: SIGTERM while an upstream call is held longer than the shutdown grace
// (IDEMGATEWAY_SHUTDOWN_GRACE=1s). Once the grace is over the gateway cuts the call off
// (gateway.CutOff): its record is left outcome_unknown, the log says so at warn, and the client
// is answered 502 upstream-failed saying that the gateway shut down, not left with a connection
// closed under it; the process then exits 0, as after any drain. The upstream acts after its
// caller left; the next process on the store refuses the retry, so nothing executes twice
// (docs/operations.md#shutdown).
func TestShutdownGraceRunsOut(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		req := Request{Key: "grace-1", Body: ticketBody}
		first := goSend(e.gw, held(req, "grace-1"))
		e.sb.waitHeld(t, "grace-1", 1)

		if err := e.gw.terminate(t); err != nil { // the call stays held: the grace must run out
			t.Errorf("the gateway exited with %v, want 0", err)
		}
		type graceLine struct {
			Level, Msg string
			Calls      int
		}
		var cut []graceLine
		for _, line := range strings.Split(e.gw.Out.String(), "\n") {
			var l graceLine
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "grace period over: upstream calls still under way are cut off, their outcome unknown" {
				cut = append(cut, l)
			}
		}
		if len(cut) != 1 || cut[0].Calls != 1 || cut[0].Level != "WARN" {
			t.Errorf("grace log lines %+v, want one at WARN with calls 1", cut)
		}
		if n := e.gw.logCount("requests still under way after the cut lose their connections; a record they did not settle lapses to outcome_unknown with its lease"); n != 0 {
			t.Errorf("%d lines of calls left after the cut, want none: the cut-off call settled itself", n)
		}
		cutOff := first.wait(t)
		expectProblem(t, cutOff, http.StatusBadGateway, "upstream-failed", "execute", false)
		if !strings.Contains(cutOff.Problem.Detail, "the gateway shut down") {
			t.Errorf("the cut-off call's problem detail %q, want it to say that the gateway shut down", cutOff.Problem.Detail)
		}

		g := e.startGateway(t)
		rec := g.mustRecord(t, "create_ticket", "grace-1")
		if rec.State != "outcome_unknown" || !strings.Contains(rec.Detail, "shut down") {
			t.Errorf("record of the cut-off call: state %q, detail %q; want outcome_unknown, a shutdown", rec.State, rec.Detail)
		}

		// The upstream acts after the gateway left.
		e.sb.release(t, "grace-1")
		eventually.True(t, "the released call to reach the sandbox", func() bool {
			return e.sb.Stats(t).ByEndpoint[TicketsEndpoint] == 1
		})
		r := g.do(t, req)
		expectProblem(t, r, http.StatusConflict, "outcome-unknown", "outcome_unknown", false)
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	}, envOptions{env: []string{"IDEMGATEWAY_SHUTDOWN_GRACE=1s"}})
}

// TestShutdownGraceOutlastsReloads: the default shutdown grace (IDEMGATEWAY_SHUTDOWN_GRACE=0)
// outlasts the longest upstream timeout of every routes file in force during the process's life,
// not only of the file loaded at start. The gateway starts with an upstream timeout of 1s (grace
// 6s), is reloaded to 30s, a call starts under it and is held by the sandbox, and the file is
// reloaded back to 1s: the call still runs under 30s. SIGTERM must then grant 35s, which the
// "shutting down" log line prints; the call released after it commits and the process exits
// cleanly, abandoning nothing. With the grace of the start file, or of the file last loaded, the
// line prints 6s and a call held past it would be cut off and left outcome_unknown.
func TestShutdownGraceOutlastsReloads(t *testing.T) {
	t.Parallel()
	sb := StartSandbox(t)
	path := filepath.Join(t.TempDir(), "routes.yaml")
	writeTimeout := func(timeout string) {
		t.Helper()
		routes := fmt.Sprintf(`upstreams:
  tickets:
    url: %s
    timeout: %s
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/tickets
    class: non_idempotent
    receipt:
      remote_id: /id
      remote_url: /url
`, sb.URL, timeout)
		if err := os.WriteFile(path, []byte(routes), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTimeout("1s")
	data := "IDEMGATEWAY_DATA_DIR=" + t.TempDir()
	g := StartGateway(t, path, []string{data, "IDEMGATEWAY_ROUTES_POLL=0"})
	reload := func(timeout string, n int) {
		t.Helper()
		writeTimeout(timeout)
		if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		g.waitLog(t, "routes reloaded", n)
	}

	reload("30s", 1)
	req := Request{Key: "grace-reload", Body: ticketBody}
	call := goSend(g, held(req, "grace-reload"))
	sb.waitHeld(t, "grace-reload", 1)
	reload("1s", 2) // the held call keeps the 30s it started with

	g.judged = true
	if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "shutting down", 1)
	if got := shutdownGraces(g.process); len(got) != 1 || got[0] != "35s" {
		t.Errorf("shutdown graces %q, want [35s]: the longest upstream timeout seen (30s) plus 5s", got)
	}
	// While its call drains, the gateway is no longer ready: a load balancer stops sending to it.
	if status, body := g.adminDo(t, http.MethodGet, "/readyz", ""); status != http.StatusServiceUnavailable || !strings.Contains(string(body), "shutting-down") {
		t.Errorf("/readyz while shutting down: %d %s, want 503 shutting-down", status, body)
	}

	sb.release(t, "grace-reload")
	expectCreated(t, call.wait(t))
	select {
	case <-g.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("the gateway did not exit within %s of SIGTERM once its call had settled", stopTimeout)
	}
	g.waitDrained()
	if g.waitErr != nil {
		t.Errorf("the gateway exited with %v, want 0: nothing was cut off", g.waitErr)
	}
	if n := g.logCount("grace period over: upstream calls still under way are cut off, their outcome unknown"); n != 0 {
		t.Errorf("%d grace-over log lines, want none", n)
	}

	// The next process starts on the 30s file: the file loaded at start counts too.
	writeTimeout("30s")
	next := StartGateway(t, path, []string{data, "IDEMGATEWAY_ROUTES_POLL=0"})
	if rec := next.mustRecord(t, "create_ticket", "grace-reload"); rec.State != "committed" {
		t.Errorf("record of the call in flight at SIGTERM: state %q, want committed", rec.State)
	}
	expectUp(t, sb, 1)
	if err := next.terminate(t); err != nil {
		t.Errorf("the next gateway exited with %v", err)
	}
	if got := shutdownGraces(next.process); len(got) != 1 || got[0] != "35s" {
		t.Errorf("shutdown graces %q of a process started on the 30s file, want [35s]", got)
	}
}

// shutdownGraces returns the grace of each "shutting down" log line of p.
func shutdownGraces(p *process) []string {
	var graces []string
	for _, line := range strings.Split(p.Out.String(), "\n") {
		var l struct{ Msg, Grace string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "shutting down" {
			graces = append(graces, l.Grace)
		}
	}
	return graces
}
