package e2e

import (
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// The sandbox's lookup endpoint, the reconcile block's GET /v1/tickets?external_id=.
const ticketsLookupEndpoint = "tickets.find_tickets"

// TestReconcileRacesTheCallItReconciles: reconciliation settles an unknown outcome by
// asking the upstream whether the effect exists, and executes the call again when it does not. But
// an outcome is unknown precisely when the gateway stopped waiting while the upstream may still be
// working: here the gateway's upstream timeout (300ms) fires during a call that the upstream
// completes later. A retry that reconciled at once would find nothing yet and execute, and then
// the first call would land too: one operation, two tickets. The same race follows a gateway
// killed mid-call once its lease lapses (the lease is shorter than the upstream timeout by
// default: 10s against 30s), and a gateway paused past its lease before it sent the call.
//
// The contract's promise is Up×1. The gateway keeps it by waiting reconcile.after from the call's
// start before it asks (409 in_progress until then; see docs/guarantees.md, "forward_key and reconciliation").
//
// The sandbox holds the first call until the test releases it, and then performs it although the
// gateway gave up on it (detached). reconcile.after is 1h at first, so the retry is early however
// slow the machine; then the routes are reloaded with after: 300ms, so that it has passed, and the
// next retry reconciles.
func TestReconcileRacesTheCallItReconciles(t *testing.T) {
	t.Parallel()
	sb := StartSandbox(t)
	routesFile := WriteRoutes(t, "reconcile.yaml.tmpl", sb.URL)
	g := StartGateway(t, routesFile, []string{"IDEMGATEWAY_DATA_DIR=" + t.TempDir()})
	// Every attempt carries the released hold: a second execution would act at once.
	req := Request{Key: "rec-1", Body: `{"title":"disk full"}`, Header: heldDetached("rec-1")}

	first := g.do(t, req)
	if first.Status != http.StatusGatewayTimeout || first.Decision() != "execute" {
		t.Fatalf("first call: %d %q, want 504 execute (the upstream timeout fired)", first.Status, first.Decision())
	}
	retry := g.do(t, req) // the agent retries at once, while the upstream still holds the call
	if retry.Status != http.StatusConflict || retry.Decision() != "in_progress" {
		t.Fatalf("the retry before reconcile.after: %d %q, want 409 in_progress", retry.Status, retry.Decision())
	}
	expectRetryAfter(t, retry)
	if st := sb.Stats(t); st.Requests.ByEndpoint[ticketsLookupEndpoint] != 0 || st.Requests.ByEndpoint[TicketsEndpoint] != 1 {
		t.Fatalf("before reconcile.after: %d lookups and %d calls reached the upstream, want 0 and 1",
			st.Requests.ByEndpoint[ticketsLookupEndpoint], st.Requests.ByEndpoint[TicketsEndpoint])
	}

	sb.release(t, "rec-1")
	waitUp(t, sb, 1) // the first call lands, after the gateway gave up on it

	// reconcile.after passes: the routes file is reloaded with the least value.
	data, err := os.ReadFile(routesFile)
	if err != nil {
		t.Fatal(err)
	}
	shorter := strings.Replace(string(data), "after: 1h\n", "after: 300ms\n", 1)
	if shorter == string(data) {
		t.Fatal("testdata/reconcile.yaml.tmpl no longer has after: 1h")
	}
	reloads := strings.Count(g.Out.String(), `"msg":"routes reloaded"`)
	if err := os.WriteFile(routesFile, []byte(shorter), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the gateway to reload its routes", func() bool {
		return strings.Count(g.Out.String(), `"msg":"routes reloaded"`) > reloads
	})

	// Once reconcile.after has passed from the latest moment the first call may have started (its
	// claim's started_at and one store timeout, docs/unknown-outcomes.md), the lookup finds the first
	// call's ticket: a replay of it. Until then, 409 in_progress.
	var settled Response
	eventually.True(t, "reconcile.after to pass", func() bool {
		settled = g.do(t, req)
		return settled.Status != http.StatusConflict || settled.Decision() != "in_progress"
	})
	if settled.Status != http.StatusCreated || settled.Decision() != "replay" || settled.Header.Get("Idempotency-Reconciled") != "found" {
		t.Fatalf("reconciled retry: %d %q %q, want 201 replay found; body %.300s", settled.Status, settled.Decision(), settled.Header.Get("Idempotency-Reconciled"), settled.Body)
	}
	body := settled.json(t)
	rec := g.mustRecord(t, "create_ticket", "rec-1")
	if id, _ := body["id"].(string); rec.State != "committed" || id == "" || rec.RemoteID != id || body["external_id"] != "default/create_ticket/rec-1" {
		t.Errorf("record %s with remote id %q; the replay %s: want committed with the looked-up ticket, whose external_id is the forwarded key", rec.State, rec.RemoteID, settled.Body)
	}
	expectUp(t, sb, 1)
	expectAttempts(t, sb, 1)
	if n := sb.Stats(t).Requests.ByEndpoint[ticketsLookupEndpoint]; n != 1 {
		t.Errorf("%d lookups, want 1", n)
	}
}
