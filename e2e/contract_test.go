package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// The rows of the decision table of docs/contract.md §4, one test each, top to bottom.

func TestContract_KeyMissingRequired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore) // decided before the store is asked

	r := e.gw.do(t, Request{NoKey: true, Body: ticketBody})
	expectProblem(t, r, http.StatusBadRequest, "missing-idempotency-key", "", false)
	if r.Problem != nil && r.Problem.IdempotencyKey != "" {
		t.Errorf("idempotency_key %q in the problem, but no key was sent", r.Problem.IdempotencyKey)
	}
	expectAttempts(t, e.sb, 0)
	expectUp(t, e.sb, 0)
}

func TestContract_KeyInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore) // decided before the store is asked

	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"empty", []string{""}},
		{"empty sf-string", []string{`""`}},
		{"longer than 255 bytes", []string{strings.Repeat("k", 256)}},
		{"sf-string of 256 bytes", []string{`"` + strings.Repeat("k", 256) + `"`}},
		{"not ASCII", []string{"cl\xc3\xa9-1"}},
		{"control character", []string{"key\t1"}},
		{"sent twice", []string{"key-1", "key-1"}},
		{"sent twice, different", []string{"key-1", "key-2"}},
		{"unterminated sf-string", []string{`"key-1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.gw.do(t, Request{Keys: tc.keys, Body: ticketBody})
			expectProblem(t, r, http.StatusBadRequest, "invalid-idempotency-key", "", false)
			expectAttempts(t, e.sb, 0)
			expectUp(t, e.sb, 0)
		})
	}
}

// TestContract_KeyLongest: 255 bytes is the longest key, and it is valid.
func TestContract_KeyLongest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore)
	key := strings.Repeat("k", 255)
	expectCreated(t, e.gw.do(t, Request{Key: key, Body: ticketBody}))
	if rec := e.gw.mustRecord(t, "create_ticket", key); rec.IdempotencyKey != key {
		t.Errorf("record key %q, want the 255-byte key", rec.IdempotencyKey)
	}
	expectUp(t, e.sb, 1)
}

// TestContract_KeySfString: `"abc"` is the sf-string abc, the same key as the raw token abc.
func TestContract_KeySfString(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Key: `"abc"`, Body: ticketBody})
		expectCreated(t, first)
		if rec := e.gw.mustRecord(t, "create_ticket", "abc"); rec.IdempotencyKey != "abc" {
			t.Errorf("the sf-string key was stored as %q, want abc", rec.IdempotencyKey)
		}
		expectReplayOf(t, e.gw.do(t, Request{Key: "abc", Body: ticketBody}), first)
		expectReplayOf(t, e.gw.do(t, Request{Key: `"abc"`, Body: ticketBody}), first)
		expectUp(t, e.sb, 1)
	})
}

func TestContract_BodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore) // create_ticket has max_body_bytes 4096

	// body returns a JSON object of exactly n bytes.
	body := func(n int) string {
		const head, tail = `{"title":"`, `"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	for _, tc := range []struct {
		name    string
		chunked bool
	}{
		{"with Content-Length", false},
		{"chunked", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.gw.do(t, Request{Key: "big-" + tc.name, Body: body(4097), Chunked: tc.chunked})
			expectProblem(t, r, http.StatusRequestEntityTooLarge, "body-too-large", "", false)
			expectUp(t, e.sb, 0)
		})
	}
	t.Run("exactly max_body_bytes", func(t *testing.T) {
		expectCreated(t, e.gw.do(t, Request{Key: "at-limit", Body: body(4096), Chunked: true}))
		expectUp(t, e.sb, 1)
	})
}

func TestContract_InvalidBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore) // decided before the store is asked

	for _, tc := range []struct{ name, body string }{
		{"truncated", `{"title":"Disk full`},
		{"not JSON", `title=Disk full`},
		{"duplicate member", `{"title":"a","title":"b"}`},
		{"duplicate member, same value", `{"title":"a","title":"a"}`},
		{"nested duplicate member", `{"t":{"a":1,"b":2,"a":1}}`},
		{"duplicate member by escape", `{"title":"a","\u0074itle":"b"}`},
		{"two documents", `{"title":"a"} {"title":"b"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.gw.do(t, Request{Key: "key-" + strings.ReplaceAll(tc.name, ",", ""), Body: tc.body}) // an unquoted key may not hold a comma
			expectProblem(t, r, http.StatusBadRequest, "invalid-body", "", false)
			expectAttempts(t, e.sb, 0)
		})
	}
	expectUp(t, e.sb, 0)
}

func TestContract_KeyNew(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		r := e.gw.do(t, Request{Key: "new-1", Body: ticketBody, Header: map[string]string{"X-Actor-ID": "agent-runtime"}})
		id := expectCreated(t, r)
		if r.Problem != nil {
			return
		}
		remoteURL, _ := r.json(t)["url"].(string)
		rec := e.gw.mustRecord(t, "create_ticket", "new-1")
		want := Receipt{
			IdempotencyKey: "new-1", Tenant: "default", Tool: "create_ticket",
			EffectFingerprint: r.Header.Get("Idempotency-Fingerprint"), State: "committed",
			Actor: "agent-runtime", RemoteSystem: "tickets", RemoteID: id, RemoteURL: remoteURL,
			ResponseStatus: http.StatusCreated, Executions: 1,
		}
		got := rec
		got.CommittedAt, got.ExpiresAt, got.ResponseBodyKept, got.Detail = nil, time.Time{}, nil, ""
		if got != want {
			t.Errorf("receipt\n%+v\nwant\n%+v", got, want)
		}
		if rec.CommittedAt == nil || time.Since(*rec.CommittedAt) > time.Minute {
			t.Errorf("committed_at %v, want about now", rec.CommittedAt)
		}
		if d := time.Until(rec.ExpiresAt); d < 59*time.Minute || d > time.Hour {
			t.Errorf("expires_at %v: in %s, want in the route's ttl of 1h", rec.ExpiresAt, d)
		}
		expectUp(t, e.sb, 1)
	})
}

func TestContract_CommittedSameFingerprint(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Key: "same-1", Body: ticketBody})
		expectCreated(t, first)
		for range 2 {
			expectReplayOf(t, e.gw.do(t, Request{Key: "same-1", Body: ticketBody}), first)
		}
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	})
}

func TestContract_DifferentFingerprint(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Key: "diff-1", Body: ticketBody})
		id := expectCreated(t, first)

		r := e.gw.do(t, Request{Key: "diff-1", Body: `{"title":"Disk full on db-2","priority":"high","customer_id":"c-42"}`})
		expectConflict(t, r, first.Header.Get("Idempotency-Fingerprint"), id)
		expectUp(t, e.sb, 1)
	})
}

// TestContract_KeyScope: the scope of a key is (tenant, tool, key); the same key in another tenant
// or for another tool is another operation.
func TestContract_KeyScope(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		expectCreated(t, e.gw.do(t, Request{Key: "scope-1", Body: ticketBody}))
		expectCreated(t, e.gw.do(t, Request{Key: "scope-1", Body: ticketBody, Header: map[string]string{"X-Tenant-ID": "acme"}}))
		expectCreated(t, e.gw.do(t, Request{Key: "scope-1", Body: ticketBody, Path: pathOptional}))
		// The actor is recorded, never part of the scope.
		r := e.gw.do(t, Request{Key: "scope-1", Body: ticketBody, Header: map[string]string{"X-Tenant-ID": "acme", "X-Actor-ID": "other-agent"}})
		expectDecision(t, r, http.StatusCreated, "replay")
		if rec, found := e.gw.Record(t, "acme", "create_ticket", "scope-1"); !found || rec.Tenant != "acme" {
			t.Errorf("record of tenant acme: found %v, %+v", found, rec)
		}
		expectUp(t, e.sb, 3)
	})
}

func TestContract_InFlightSameFingerprint(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := goSend(e.gw, Request{Key: "flight-1", Body: ticketBody, Header: map[string]string{"X-Sandbox-Delay": "700ms"}})
		e.gw.waitState(t, "create_ticket", "flight-1", "in_progress")

		r := e.gw.do(t, Request{Key: "flight-1", Body: ticketBody})
		expectProblem(t, r, http.StatusConflict, "request-in-progress", "in_progress", true)
		expectRetryAfter(t, r)

		fr := first.wait(t)
		expectCreated(t, fr)
		expectReplayOf(t, e.gw.do(t, Request{Key: "flight-1", Body: ticketBody}), fr)
		expectUp(t, e.sb, 1)
	})
}

// TestContract_InFlightWait: with concurrency: wait, a duplicate in flight waits and gets the replay.
func TestContract_InFlightWait(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := goSend(e.gw, Request{Path: PathWait, Key: "wait-1", Body: ticketBody, Header: map[string]string{"X-Sandbox-Delay": "500ms"}})
		e.gw.waitState(t, "create_ticket_wait", "wait-1", "in_progress")

		r := e.gw.do(t, Request{Path: PathWait, Key: "wait-1", Body: ticketBody})
		fr := first.wait(t)
		expectCreated(t, fr)
		expectReplayOf(t, r, fr)
		expectUp(t, e.sb, 1)
	})
}

func TestContract_OutcomeUnknownBlock(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		// The upstream acts, then answers 500: the gateway cannot know that it acted.
		first := e.gw.do(t, Request{Key: "unknown-1", Body: ticketBody, Header: map[string]string{"X-Sandbox-Fail-After-Commit": "500"}})
		expectDecision(t, first, http.StatusInternalServerError, "execute")
		if rec := e.gw.mustRecord(t, "create_ticket", "unknown-1"); rec.State != "outcome_unknown" {
			t.Errorf("record state %q, want outcome_unknown", rec.State)
		}

		for range 2 {
			r := e.gw.do(t, Request{Key: "unknown-1", Body: ticketBody})
			expectProblem(t, r, http.StatusConflict, "outcome-unknown", "outcome_unknown", false)
		}
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	})
}

// TestContract_OutcomeUnknownRelease: with on_unknown_outcome: release, the key is freed and a
// retry executes again (the route accepts the duplicate).
func TestContract_OutcomeUnknownRelease(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Path: pathRelease, Key: "release-1", Body: ticketBody, Header: map[string]string{"X-Sandbox-Fail-After-Commit": "500"}})
		expectDecision(t, first, http.StatusInternalServerError, "execute")
		if rec, found := e.gw.Record(t, "default", "create_ticket_release", "release-1"); found {
			t.Errorf("record %+v kept after an unknown outcome on a release route", rec)
		}
		expectCreated(t, e.gw.do(t, Request{Path: pathRelease, Key: "release-1", Body: ticketBody}))
		expectUp(t, e.sb, 2)
	})
}

// TestContract_UpstreamTimeout: a timeout is an unknown outcome: 504 with decision execute, and the
// record blocks retries. The sandbox holds the call past the gateway's 300ms timeout and acts once
// the test releases it, after the gateway gave up (detached, as most APIs finish what they
// accepted): Up×1, the record outcome_unknown, and the retry refused with 409 outcome-unknown,
// without a second effect (its hold is released: an execution would act at once).
func TestContract_UpstreamTimeout(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		req := Request{Path: pathSlow, Key: "slow-1", Body: ticketBody, Header: heldDetached("slow-1")}
		first := e.gw.do(t, req)
		expectProblem(t, first, http.StatusGatewayTimeout, "upstream-timeout", "execute", false)
		if rec := e.gw.mustRecord(t, "create_ticket_slow", "slow-1"); rec.State != "outcome_unknown" {
			t.Errorf("record state %q, want outcome_unknown", rec.State)
		}
		expectUp(t, e.sb, 0)
		e.sb.release(t, "slow-1")
		waitUp(t, e.sb, 1) // the upstream acted after the gateway timed out

		r := e.gw.do(t, req)
		expectProblem(t, r, http.StatusConflict, "outcome-unknown", "outcome_unknown", false)
		if rec := e.gw.mustRecord(t, "create_ticket_slow", "slow-1"); rec.State != "outcome_unknown" {
			t.Errorf("record state after the retry %q, want outcome_unknown", rec.State)
		}
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	})
}

// TestContract_UpstreamRefused: a refused connection is not committed: nothing reached the
// upstream, the key is released and the problem says the request may be retried.
func TestContract_UpstreamRefused(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		for range 2 {
			r := e.gw.do(t, Request{Path: pathDead, Key: "dead-1", Body: ticketBody})
			expectProblem(t, r, http.StatusBadGateway, "upstream-failed", "execute", true)
		}
		if rec, found := e.gw.Record(t, "default", "create_ticket_dead", "dead-1"); found {
			t.Errorf("record %+v kept after a refused connection", rec)
		}
	})
}

// TestContract_ResolveUnknown: an operator settles an unknown outcome through the admin API
// (docs/contract.md §5): not_committed frees the key, DELETE removes the record.
func TestContract_ResolveUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore)
	fault := map[string]string{"X-Sandbox-Fail-After-Commit": "500"}

	t.Run("DELETE", func(t *testing.T) {
		expectDecision(t, e.gw.do(t, Request{Key: "del-1", Body: ticketBody, Header: fault}), http.StatusInternalServerError, "execute")
		if status, body := e.gw.adminDo(t, http.MethodDelete, recordPath("default", "create_ticket", "del-1"), ""); status != http.StatusNoContent {
			t.Fatalf("DELETE record: %d %s, want 204", status, body)
		}
		expectCreated(t, e.gw.do(t, Request{Key: "del-1", Body: ticketBody}))
		if status, _ := e.gw.adminDo(t, http.MethodDelete, recordPath("default", "create_ticket", "no-such-key"), ""); status != http.StatusNotFound {
			t.Errorf("DELETE of a missing record: %d, want 404", status)
		}
	})
	t.Run("resolve not_committed", func(t *testing.T) {
		expectDecision(t, e.gw.do(t, Request{Key: "res-1", Body: ticketBody, Header: fault}), http.StatusInternalServerError, "execute")
		status, body := e.gw.adminDo(t, http.MethodPost, recordPath("default", "create_ticket", "res-1")+"/resolve", `{"outcome":"not_committed"}`)
		if status/100 != 2 {
			t.Fatalf("POST .../resolve {\"outcome\":\"not_committed\"}: %d %s, want 2xx (docs/contract.md §5)", status, body)
		}
		expectCreated(t, e.gw.do(t, Request{Key: "res-1", Body: ticketBody}))
	})
	t.Run("resolve committed", func(t *testing.T) {
		expectDecision(t, e.gw.do(t, Request{Key: "res-2", Body: ticketBody, Header: fault}), http.StatusInternalServerError, "execute")
		status, body := e.gw.adminDo(t, http.MethodPost, recordPath("default", "create_ticket", "res-2")+"/resolve", `{"outcome":"committed","remote_id":"T-1"}`)
		if status/100 != 2 {
			t.Fatalf("POST .../resolve {\"outcome\":\"committed\"}: %d %s, want 2xx (docs/contract.md §5)", status, body)
		}
		rec := e.gw.mustRecord(t, "create_ticket", "res-2")
		if rec.State != "committed" || rec.RemoteID != "T-1" {
			t.Errorf("resolved record: state %q, remote_id %q; want committed, T-1", rec.State, rec.RemoteID)
		}
		before := e.sb.Stats(t)
		r := e.gw.do(t, Request{Key: "res-2", Body: ticketBody})
		if r.Decision() != "replay" || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry after resolve committed: %d, decision %q, Idempotent-Replayed %q; want a replay",
				r.Status, r.Decision(), r.Header.Get("Idempotent-Replayed"))
		}
		// The replay made no upstream call: the counts are those before the retry.
		expectUp(t, e.sb, before.ByEndpoint[TicketsEndpoint])
		expectAttempts(t, e.sb, before.Requests.ByEndpoint[TicketsEndpoint])
	})
}

func TestContract_StoreUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, redisStore)

	// An issue to read through the read_only route, created on the sandbox directly.
	resp, err := Client.Post(e.sb.URL+"/rest/api/3/issue", "application/json",
		strings.NewReader(`{"fields":{"project":{"key":"OPS"},"summary":"Disk full","issuetype":{"name":"Task"}}}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating a Jira issue on the sandbox: %v %v", resp, err)
	}
	resp.Body.Close()

	e.redis.Stop()
	r := e.gw.do(t, Request{Key: "down-1", Body: ticketBody})
	expectProblem(t, r, http.StatusServiceUnavailable, "store-unavailable", "", true)
	expectRetryAfter(t, r)
	expectAttempts(t, e.sb, 0)

	read := e.gw.do(t, Request{Method: http.MethodGet, Path: "/rest/api/3/issue/OPS-1", NoKey: true})
	if read.Status != http.StatusOK || !strings.Contains(string(read.Body), `"OPS-1"`) {
		t.Errorf("read_only route with the store down: %d %.300s, want 200 with the issue", read.Status, read.Body)
	}
	if d := read.Header.Values("Idempotency-Decision"); len(d) > 0 {
		t.Errorf("read_only route answered Idempotency-Decision %q", d)
	}
	// /readyz keeps a probe's result for a second: the 503 may come that much later.
	eventually.True(t, "/readyz to answer 503 with the store down", func() bool {
		status, _ := e.gw.adminDo(t, http.MethodGet, "/readyz", "")
		return status == http.StatusServiceUnavailable
	})

	e.redis.Restart()
	e.gw.waitReady(t)
	expectCreated(t, e.gw.do(t, Request{Key: "down-1", Body: ticketBody}))
	expectUp(t, e.sb, 1)
}

func TestContract_NoRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore)
	for _, tc := range []struct{ name, method, path string }{
		{"unknown path", http.MethodPost, "/v1/nothing"},
		{"sandbox admin path", http.MethodPost, "/_sandbox/reset"},
		{"prefix of a route", http.MethodPost, "/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.gw.do(t, Request{Method: tc.method, Path: tc.path, Key: "nr-1", Body: ticketBody})
			expectNoRoute(t, r)
		})
	}
	// A known path with another method: 405 with Allow, as README.md's decision table promises.
	t.Run("other method", func(t *testing.T) {
		r := e.gw.do(t, Request{Method: http.MethodGet, Path: PathTickets, NoKey: true})
		if r.Status != http.StatusMethodNotAllowed {
			t.Errorf("status %d, want 405; body %.300s", r.Status, r.Body)
		}
		if allow := r.Header.Values("Allow"); len(allow) != 1 || allow[0] != http.MethodPost {
			t.Errorf("Allow %q, want POST, the one method of %s (RFC 9110 §15.5.6)", allow, PathTickets)
		}
	})
	st := e.sb.Stats(t)
	if st.Requests.Total != 0 {
		t.Errorf("sandbox saw %d requests, want 0", st.Requests.Total)
	}
}
