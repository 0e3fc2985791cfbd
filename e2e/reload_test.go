package e2e

import (
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReload: the gateway reloads its routes file when it changes and on SIGHUP; a file that does
// not validate is refused with its errors logged, and the routes in force keep serving.
func TestReload(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	path := writeRoutes(t, "routes.yaml.tmpl", sb.url)
	g := startGateway(t, path, []string{"IDEMGATEWAY_DATA_DIR=" + t.TempDir()})
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	expectCreated(t, g.do(t, request{Key: "before", Body: `{"a":1}`}))

	// A broken file is refused: the old routes keep serving.
	if err := os.WriteFile(path, []byte("routes: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the refusal to be logged", func() bool {
		return strings.Contains(g.out.String(), "routes file refused")
	})
	expectCreated(t, g.do(t, request{Key: "while-broken", Body: `{"a":1}`}))

	// A valid file without create_ticket: the route goes away.
	without := strings.Replace(string(original), "path: /v1/tickets\n", "path: /v2/tickets\n", 1)
	if without == string(original) {
		t.Fatal("the routes template no longer has path: /v1/tickets")
	}
	if err := os.WriteFile(path, []byte(without), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the changed routes to serve", func() bool {
		r, err := g.send(request{Key: "probe", Body: `{"a":1}`})
		return err == nil && r.Status == http.StatusNotFound
	})

	// SIGHUP loads the file at once, as it is.
	if err := os.WriteFile(path, original, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the restored routes to serve", func() bool {
		r, err := g.send(request{Key: "before", Body: `{"a":1}`})
		return err == nil && r.Status == http.StatusCreated && r.decision() == "replay"
	})
	expectUp(t, sb, 3) // before, while-broken, and probe's first send, before the route went away
}
