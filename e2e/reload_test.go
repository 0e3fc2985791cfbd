package e2e

import (
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestReload: on SIGHUP the gateway loads its routes file as it is; a file that does not validate
// is refused with its errors logged, and the routes in force keep serving. The content checks are
// off (IDEMGATEWAY_ROUTES_POLL=0), so only the signal can reload: a SIGHUP that is caught but not
// acted on fails the test, and each step is ordered by the log line it waits for rather than by
// which of a probe and a watcher comes first.
func TestReload(t *testing.T) {
	t.Parallel()
	sb := StartSandbox(t)
	path := WriteRoutes(t, "routes.yaml.tmpl", sb.URL)
	g := StartGateway(t, path, []string{"IDEMGATEWAY_DATA_DIR=" + t.TempDir(), "IDEMGATEWAY_ROUTES_POLL=0"})
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hangup := func() {
		t.Helper()
		if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	expectCreated(t, g.do(t, Request{Key: "before", Body: `{"a":1}`}))

	// A broken file is refused: the old routes keep serving.
	if err := os.WriteFile(path, []byte("routes: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hangup()
	g.waitLog(t, "routes file refused; the routes in force stay", 1)
	expectCreated(t, g.do(t, Request{Key: "while-broken", Body: `{"a":1}`}))

	// A valid file without create_ticket: the route goes away.
	without := strings.Replace(string(original), "path: /v1/tickets\n", "path: /v2/tickets\n", 1)
	if without == string(original) {
		t.Fatal("the routes template no longer has path: /v1/tickets")
	}
	if err := os.WriteFile(path, []byte(without), 0o644); err != nil {
		t.Fatal(err)
	}
	hangup()
	g.waitLog(t, "routes reloaded", 1)
	expectNoRoute(t, g.do(t, Request{Key: "gone", Body: `{"a":1}`}))

	// The original file again: the receipt of before replays.
	if err := os.WriteFile(path, original, 0o644); err != nil {
		t.Fatal(err)
	}
	hangup()
	g.waitLog(t, "routes reloaded", 2)
	expectDecision(t, g.do(t, Request{Key: "before", Body: `{"a":1}`}), http.StatusCreated, "replay")
	expectUp(t, sb, 2) // before and while-broken
	if n := g.logCount("routes reloaded") + g.logCount("routes file refused; the routes in force stay"); n != 3 {
		t.Errorf("%d reloads logged, want 3: one per SIGHUP, none by the content checks", n)
	}
}

// TestReloadOnFileChange: with content checks on (IDEMGATEWAY_ROUTES_POLL), a changed routes file is
// loaded without a signal.
func TestReloadOnFileChange(t *testing.T) {
	t.Parallel()
	sb := StartSandbox(t)
	path := WriteRoutes(t, "routes.yaml.tmpl", sb.URL)
	g := StartGateway(t, path, []string{"IDEMGATEWAY_DATA_DIR=" + t.TempDir(), "IDEMGATEWAY_ROUTES_POLL=20ms"})
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	without := strings.Replace(string(original), "path: /v1/tickets\n", "path: /v2/tickets\n", 1)
	if err := os.WriteFile(path, []byte(without), 0o644); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "routes reloaded", 1)
	expectNoRoute(t, g.do(t, Request{Key: "gone", Body: `{"a":1}`}))
	expectUp(t, sb, 0)
}
