package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// ticketLookupUpstream is a ticket API with a lookup by external id, as a route's reconcile block
// expects, that finishes every request it accepted even when its client has gone (as most real
// APIs do, and unlike the sandbox, which drops a delayed request whose client went away).
//
//	POST /v1/tickets   {"external_id":…}; X-Delay: wait this long first; 201 {"id","external_id"}
//	GET  /v1/tickets?external_id=X   {"data":[ticket]} or {"data":[]}
type ticketLookupUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	tickets map[string][]string // external id → ids created, in order
	effects int
}

func startTicketLookupUpstream(t *testing.T) *ticketLookupUpstream {
	t.Helper()
	u := &ticketLookupUpstream{tickets: map[string][]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tickets", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ExternalID string `json:"external_id"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if d, err := time.ParseDuration(r.Header.Get("X-Delay")); err == nil {
			time.Sleep(d) // not cut short when the client goes away
		}
		u.mu.Lock()
		u.effects++
		id := fmt.Sprintf("T-%d", u.effects)
		u.tickets[body.ExternalID] = append(u.tickets[body.ExternalID], id)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "external_id": body.ExternalID})
	})
	mux.HandleFunc("GET /v1/tickets", func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		data := []map[string]string{}
		for _, id := range u.tickets[r.URL.Query().Get("external_id")] {
			data = append(data, map[string]string{"id": id})
		}
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

// created returns the ids the upstream created for an external id.
func (u *ticketLookupUpstream) created(externalID string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.tickets[externalID]...)
}

// TestIssue4_ReconcileRacesTheCallItReconciles: reconciliation settles an unknown outcome by
// asking the upstream whether the effect exists, and executes the call again when it does not. But
// an outcome is unknown precisely when the gateway stopped waiting while the upstream may still be
// working: here the gateway's upstream timeout (300ms) fires during a call that the upstream
// completes after 1s. The retry that follows at once reconciles: the lookup finds nothing yet, the
// retry executes, and then the first call lands too. One operation, two tickets. The same race
// follows a gateway killed mid-call once its lease lapses (the lease is shorter than the upstream
// timeout by default: 10s against 30s), and a gateway paused past its lease before it sent the call.
//
// The contract's promise is Up×1. The gateway keeps it by waiting reconcile.after from the call's
// start before it asks (409 in_progress until then; see docs/guarantees.md, "Reconciliation").
func TestIssue4_ReconcileRacesTheCallItReconciles(t *testing.T) {
	t.Parallel()
	up := startTicketLookupUpstream(t)
	g := startGateway(t, writeRoutes(t, "reconcile.yaml.tmpl", up.URL),
		[]string{"IDEMGATEWAY_DATA_DIR=" + t.TempDir()})
	req := request{Key: "rec-1", Body: `{"title":"disk full"}`}
	slow := req
	slow.Header = map[string]string{"X-Delay": "1s"}

	first := g.do(t, slow)
	if first.Status != http.StatusGatewayTimeout || first.decision() != "execute" {
		t.Fatalf("first call: %d %q, want 504 execute (the upstream timeout fired)", first.Status, first.decision())
	}
	retry := g.do(t, req) // the agent retries at once
	t.Logf("retry: %d, decision %q, Idempotency-Reconciled %q", retry.Status, retry.decision(), retry.Header.Get("Idempotency-Reconciled"))

	// The first call acts 1s after it was sent; give it that and a margin, or stop at a second effect.
	externalID := "default/create_ticket/rec-1" // the forwarded key the route injects
	deadline := time.Now().Add(2 * time.Second)
	for len(up.created(externalID)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if ids := up.created(externalID); len(ids) != 1 {
		t.Fatalf("upstream side effects for one operation: Up×%d %v, want Up×1: the retry re-executed while the first call was still running upstream", len(ids), ids)
	}
	if retry.Status != http.StatusConflict || retry.decision() != "in_progress" {
		t.Fatalf("the retry before reconcile.after: %d %q, want 409 in_progress", retry.Status, retry.decision())
	}
	expectRetryAfter(t, retry)

	// Once reconcile.after has passed, the lookup finds the first call's ticket: a replay of it.
	var settled response
	eventually(t, 5*time.Second, "the retry to be reconciled", func() bool {
		settled = g.do(t, req)
		return settled.decision() != "in_progress"
	})
	if settled.Status != http.StatusCreated || settled.decision() != "replay" || settled.Header.Get("Idempotency-Reconciled") != "found" {
		t.Fatalf("reconciled retry: %d %q %q, want 201 replay found", settled.Status, settled.decision(), settled.Header.Get("Idempotency-Reconciled"))
	}
	if ids := up.created(externalID); len(ids) != 1 {
		t.Fatalf("after reconciliation: Up×%d %v, want Up×1", len(ids), ids)
	}
}
