package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/internal/redistest"
)

// TestStoreDownAtCommit: Redis stops while the upstream call is held, then the call completes.
// The client gets the upstream's answer (the effect happened); the gateway logs at error level
// that the record was not settled, naming the key; once Redis is back the record reads
// outcome_unknown (its lease lapsed, the receipt was never stored), and a retry never executes
// again. (A promise of docs/unknown-outcomes.md, "Executing a call", that no process-level test exercised; issue 11.)
func TestStoreDownAtCommit(t *testing.T) {
	t.Parallel()
	// AOF with fsync always: the claim survives Redis's stop and restart.
	e := newEnv(t, redisStore, envOptions{redis: redistest.Options{AppendOnly: true, Args: []string{"--appendfsync", "always"}}})
	req := request{Path: pathLease, Key: "commit-down", Body: ticketBody}
	first := goSend(e.gw, held(req, "commit-down"))
	e.sb.waitHeld(t, "commit-down", 1)

	e.redis.Stop()
	e.sb.release(t, "commit-down")
	fr := first.wait(t)
	id := expectCreated(t, fr)

	const notSettled = "record not settled: store failed"
	var line struct {
		Level, Msg, Key, Op, Tool string
	}
	eventually(t, holdTimeout, "the error line of the failed commit", func() bool {
		for _, l := range strings.Split(e.gw.out.String(), "\n") {
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == notSettled {
				return true
			}
		}
		return false
	})
	if line.Level != "ERROR" || line.Key != "commit-down" || line.Op != "commit" || line.Tool != "create_ticket_lease" {
		t.Errorf("log line %+v, want level ERROR, key commit-down, op commit, tool create_ticket_lease", line)
	}

	e.redis.Restart()
	e.gw.waitReady(t)
	e.gw.waitState(t, "create_ticket_lease", "commit-down", "outcome_unknown")
	if rec := e.gw.mustRecord(t, "create_ticket_lease", "commit-down"); rec.RemoteID != "" {
		t.Errorf("record remote_id %q (the upstream's %s): a receipt that was never stored", rec.RemoteID, id)
	}
	for range 2 {
		r := e.gw.do(t, req)
		expectProblem(t, r, http.StatusConflict, "outcome-unknown", "outcome_unknown", false)
	}
	expectUp(t, e.sb, 1)
	expectAttempts(t, e.sb, 1)
}
