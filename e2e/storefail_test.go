package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

// TestStoreDownAtCommit: Redis stops while the upstream call is held, then the call completes.
// The gateway retries the commit while the client waits (the route's upstream timeout, 10 s); Redis
// is still down then, so the client gets the upstream's answer (the effect happened) marked
// Idempotency-Receipt: pending, and the gateway logs at error level that the record was not
// settled, naming the key. It keeps writing the receipt in the background: once Redis is back the
// record is committed (though its 2 s lease lapsed meanwhile, no claim observed it), and a retry
// replays the first answer without executing again (docs/guarantees.md#pending-receipts).
func TestStoreDownAtCommit(t *testing.T) {
	t.Parallel()
	// AOF with fsync always: the claim survives Redis's stop and restart.
	e := newEnv(t, redisStore, envOptions{redis: redistest.Options{AppendOnly: true, Args: []string{"--appendfsync", "always"}}})
	req := Request{Path: pathLease, Key: "commit-down", Body: ticketBody}
	first := goSend(e.gw, held(req, "commit-down"))
	e.sb.waitHeld(t, "commit-down", 1)

	e.redis.Stop()
	e.sb.release(t, "commit-down")
	fr := first.wait(t)
	id := expectCreated(t, fr)
	if got := fr.Header.Get("Idempotency-Receipt"); got != "pending" {
		t.Errorf("Idempotency-Receipt %q, want pending: the receipt was not stored", got)
	}

	const notSettled = "record not settled: store failed"
	var line struct {
		Level, Msg, Key, Op, Tool string
		Pending                   bool
	}
	eventually.True(t, "the error line of the failed commit", func() bool {
		for _, l := range strings.Split(e.gw.Out.String(), "\n") {
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == notSettled {
				return true
			}
		}
		return false
	})
	if line.Level != "ERROR" || line.Key != "commit-down" || line.Op != "commit" || line.Tool != "create_ticket_lease" || !line.Pending {
		t.Errorf("log line %+v, want level ERROR, key commit-down, op commit, tool create_ticket_lease, pending", line)
	}

	e.redis.Restart()
	e.gw.waitReady(t)
	e.gw.waitState(t, "create_ticket_lease", "commit-down", "committed")
	if rec := e.gw.mustRecord(t, "create_ticket_lease", "commit-down"); rec.RemoteID != id {
		t.Errorf("record remote_id %q, want the upstream's %s", rec.RemoteID, id)
	}
	for range 2 {
		expectReplayOf(t, e.gw.do(t, req), fr)
	}
	expectUp(t, e.sb, 1)
	expectAttempts(t, e.sb, 1)
}
