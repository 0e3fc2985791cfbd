package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/idemgateway/idemgateway/internal/crashfs"
	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

// TestReceiptsSurviveKill9: a committed receipt survives a crash of the gateway (SIGKILL); a new
// gateway process on the same store replays it. In "embedded, power cut" the data directory is on
// a crash filesystem (internal/crashfs) that also loses every write no fsync covered, as an OS
// crash or a power cut does; kill -9 alone keeps the page cache.
func TestReceiptsSurviveKill9(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		kind      storeKind
		opts      envOptions
		killStore bool // the Redis or PostgreSQL server crashes too
		powerCut  bool
	}{
		{"embedded", embeddedStore, envOptions{}, false, false},
		{"embedded, power cut", embeddedStore, envOptions{}, false, true},
		{"redis", redisStore, envOptions{redis: redistest.Options{AppendOnly: true}}, false, false},
		// Redis crashes too; with appendfsync always no acknowledged write is lost.
		{"redis killed too", redisStore, envOptions{redis: redistest.Options{AppendOnly: true, Args: []string{"--appendfsync", "always"}}}, true, false},
		// PostgreSQL crashes too (immediate shutdown): a commit acknowledged under
		// synchronous_commit on is in its WAL.
		{"postgres", postgresStore, envOptions{}, false, false},
		{"postgres crashed too", postgresStore, envOptions{}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.kind, tc.opts)
			var fsys *crashfs.FS
			var backing string
			if tc.powerCut { // the gateway newEnv started goes; its successor's data is on the mount
				backing = t.TempDir()
				fsys = crashfs.MountTest(t, backing)
				e.gw.Kill9(t)
				e.storeEnv = []string{"IDEMGATEWAY_DATA_DIR=" + filepath.Join(fsys.Dir, "data")}
				e.gw = e.startGateway(t)
			}
			first := e.gw.do(t, Request{Key: "kill-1", Body: ticketBody})
			id := expectCreated(t, first)

			e.gw.Kill9(t)
			switch {
			case tc.killStore && e.redis != nil:
				e.redis.Kill()
				e.redis.Restart()
			case tc.killStore:
				e.postgres.Crash()
				e.postgres.Restart()
			}
			if tc.powerCut { // the host comes back with what was synced, the mount gone
				if err := fsys.Crash(); err != nil {
					t.Fatal(err)
				}
				e.storeEnv = []string{"IDEMGATEWAY_DATA_DIR=" + filepath.Join(backing, "data")}
			}
			g := e.startGateway(t)
			expectReplayOf(t, g.do(t, Request{Key: "kill-1", Body: ticketBody}), first)
			if rec := g.mustRecord(t, "create_ticket", "kill-1"); rec.State != "committed" || rec.RemoteID != id {
				t.Errorf("record after the crash: state %q, remote_id %q; want committed, %q", rec.State, rec.RemoteID, id)
			}
			expectUp(t, e.sb, 1)
		})
	}
}

// TestKill9InFlight: a gateway that crashes during the upstream call leaves a record that no retry
// executes again on a block route, although the upstream acts
// (docs/unknown-outcomes.md#executing-a-call): the sandbox holds the call, the gateway is killed
// with SIGKILL while it waits, then the sandbox acts (detached, as an API that finishes what it
// accepted): Up×1. The record is in_progress until its lease lapses, then outcome_unknown, never
// freed; retries on a restarted gateway are refused and never reach the upstream (their hold is
// released: an execution would act at once).
func TestKill9InFlight(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		req := Request{Path: pathLease, Key: "kill-2", Body: ticketBody, Header: heldDetached("kill-2")}
		first := goSend(e.gw, req)
		e.gw.waitState(t, "create_ticket_lease", "kill-2", "in_progress")
		e.sb.waitHeld(t, "kill-2", 1) // the call is at the upstream
		e.gw.Kill9(t)
		<-first.done
		if first.err == nil {
			t.Errorf("the client got %d %q from a gateway killed mid-call, want a broken connection", first.resp.Status, first.resp.Decision())
		}
		e.sb.release(t, "kill-2")
		waitUp(t, e.sb, 1) // the upstream acted after the gateway died

		g := e.startGateway(t)
		// The record is never freed nor committed by the crash: in_progress while its 2 s lease
		// runs, outcome_unknown once it lapsed (the restart may take longer than the lease on a
		// loaded machine, so either is right here).
		if rec := g.mustRecord(t, "create_ticket_lease", "kill-2"); rec.State != "in_progress" && rec.State != "outcome_unknown" {
			t.Errorf("record after the crash: %q, want in_progress or outcome_unknown", rec.State)
		}
		eventually.True(t, "the record to become outcome_unknown after its lease", func() bool {
			r, err := g.Send(req)
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if r.Decision() != "in_progress" && r.Decision() != "outcome_unknown" {
				t.Fatalf("retry after the crash: %d %q, want 409 in_progress or outcome_unknown", r.Status, r.Decision())
			}
			return r.Decision() == "outcome_unknown"
		})
		r := g.do(t, req)
		expectProblem(t, r, http.StatusConflict, "outcome-unknown", "outcome_unknown", false)
		expectExpiresIn(t, r, unknownTTL) // kept as one marked unknown: not lapsing at the receipt's ttl (C23)
		if rec := g.mustRecord(t, "create_ticket_lease", "kill-2"); rec.State != "outcome_unknown" {
			t.Errorf("record after the retries: %q, want outcome_unknown", rec.State)
		}
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	})
}

// TestConcurrentDuplicates: ten identical requests at the same moment: one upstream execution,
// held until the nine others have been answered 409 in progress.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		req := Request{Key: "dup-10", Body: ticketBody}
		gws := make([]*Gateway, 10)
		for i := range gws {
			gws[i] = e.gw
		}
		resps, heldAt := sendHeldDuplicates(t, e.sb, "dup-10", req, gws)
		for i, r := range resps {
			if i == heldAt {
				expectCreated(t, r)
				continue
			}
			expectProblem(t, r, http.StatusConflict, "request-in-progress", "in_progress", true)
			expectRetryAfter(t, r)
		}
		expectReplayOf(t, e.gw.do(t, req), resps[heldAt])
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	})
}

// TestClientDisconnectMidCall: the client gives up during the upstream call; the gateway finishes
// the call and stores the receipt, so the client's retry gets the replay.
func TestClientDisconnectMidCall(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		gone := goSend(e.gw, Request{Key: "gone-1", Body: ticketBody, Ctx: ctx, Header: map[string]string{"X-Sandbox-Delay": "500ms"}})
		e.gw.waitState(t, "create_ticket", "gone-1", "in_progress") // the call is under way
		cancel()
		if <-gone.done; gone.err == nil {
			t.Fatalf("the client did not give up: the test proves nothing")
		}
		e.gw.waitState(t, "create_ticket", "gone-1", "committed")

		r := e.gw.do(t, Request{Key: "gone-1", Body: ticketBody})
		expectDecision(t, r, http.StatusCreated, "replay")
		rec := e.gw.mustRecord(t, "create_ticket", "gone-1")
		if id, _ := r.json(t)["id"].(string); id == "" || id != rec.RemoteID {
			t.Errorf("replayed id %q, receipt remote_id %q", id, rec.RemoteID)
		}
		expectUp(t, e.sb, 1)
	})
}

// TestGracefulShutdownFinishesInFlight: SIGTERM during an upstream call lets it finish and commit;
// the next gateway process replays it.
func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore)
	first := goSend(e.gw, Request{Key: "term-1", Body: ticketBody, Header: map[string]string{"X-Sandbox-Delay": "500ms"}})
	e.gw.waitState(t, "create_ticket", "term-1", "in_progress")
	e.gw.stop(t)

	fr := first.wait(t)
	expectCreated(t, fr)
	g := e.startGateway(t)
	expectReplayOf(t, g.do(t, Request{Key: "term-1", Body: ticketBody}), fr)
	expectUp(t, e.sb, 1)
}
