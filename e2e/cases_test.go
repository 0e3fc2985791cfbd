package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The field cases of docs/cases.md, one test each, named after the case.

// TestC01_SimultaneousDuplicates: two identical requests at the same moment. The upstream call of
// the one that claims the key is held until the other has been answered (no time window
// that a slow machine misses), so each answer is fixed: one 201 execute, one 409 in progress.
func TestC01_SimultaneousDuplicates(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		req := Request{Key: "c01", Body: ticketBody}
		resps, heldAt := sendHeldDuplicates(t, e.sb, "c01", req, []*Gateway{e.gw, e.gw})
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

// leaseRenewals is the series of the lease renewals of create_ticket_lease with result.
func leaseRenewals(result string) string {
	return `idemgateway_lease_renewals_total{result="` + result + `",tool="create_ticket_lease"}`
}

// TestC02_LeaseRenewedDuringLongCall: the upstream call outlasts the lock lease (create_ticket_lease
// has 2s) several times; a retry after 2 leases finds the call still in progress, not lost, and
// the receipt is committed at the end. The call is held until the retry has been answered, and
// "after 2 leases" is the gateway's own count: 6 renewals, one every third of a lease, cannot
// happen in less than 2 leases. Nothing depends on how fast the machine is.
func TestC02_LeaseRenewedDuringLongCall(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		req := Request{Path: pathLease, Key: "c02", Body: ticketBody}
		first := goSend(e.gw, held(req, "c02"))
		e.sb.waitHeld(t, "c02", 1)
		e.gw.waitMetric(t, leaseRenewals("ok"), 6)

		r := e.gw.do(t, req)
		expectProblem(t, r, http.StatusConflict, "request-in-progress", "in_progress", true)
		if rec := e.gw.mustRecord(t, "create_ticket_lease", "c02"); rec.State != "in_progress" {
			t.Errorf("record state %q after 2 leases of a running call, want in_progress (lease not renewed?)", rec.State)
		}

		e.sb.release(t, "c02")
		fr := first.wait(t)
		expectCreated(t, fr)
		expectReplayOf(t, e.gw.do(t, req), fr)
		if rec := e.gw.mustRecord(t, "create_ticket_lease", "c02"); rec.State != "committed" || rec.Executions != 1 {
			t.Errorf("record state %q, executions %d; want committed, 1", rec.State, rec.Executions)
		}
		for _, result := range []string{"lost", "error"} {
			if n := e.gw.metric(t, leaseRenewals(result)); n != 0 {
				t.Errorf("%s = %v, want 0", leaseRenewals(result), n)
			}
		}
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	})
}

// expectUnknownExecution checks the answer to an execution whose connection broke after the
// request was sent: 502 or 504, decision execute, not retryable.
func expectUnknownExecution(t *testing.T, r Response) {
	t.Helper()
	switch r.Status {
	case http.StatusBadGateway:
		expectProblem(t, r, r.Status, "upstream-failed", "execute", false)
	case http.StatusGatewayTimeout:
		expectProblem(t, r, r.Status, "upstream-timeout", "execute", false)
	default:
		t.Errorf("status %d, want 502 or 504; body %.300s", r.Status, r.Body)
	}
}

// TestC03_CommitThenConnectionDrop: the upstream acts, then breaks the connection unanswered.
func TestC03_CommitThenConnectionDrop(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Key: "c03", Body: ticketBody, Header: map[string]string{"X-Sandbox-Fail-After-Commit": "drop"}})
		expectUnknownExecution(t, first)
		rec := e.gw.mustRecord(t, "create_ticket", "c03")
		if rec.State != "outcome_unknown" {
			t.Errorf("record state %q, want outcome_unknown", rec.State)
		}

		r := e.gw.do(t, Request{Key: "c03", Body: ticketBody})
		expectProblem(t, r, http.StatusConflict, "outcome-unknown", "outcome_unknown", false)
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	})
}

// TestC04_503ThenRecovery: the upstream answers 503 without acting, then recovers. The same
// request is sent twice; the sandbox's script makes the first attempt fail.
func TestC04_503ThenRecovery(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		e.sb.script(t, `[{"status":503}]`)
		req := Request{Key: "c04", Body: ticketBody}

		first := e.gw.do(t, req)
		expectDecision(t, first, http.StatusServiceUnavailable, "execute")
		if !strings.Contains(string(first.Body), "injected by the sandbox") {
			t.Errorf("the 503 is not the upstream's: %.300s", first.Body)
		}
		if rec, found := e.gw.Record(t, "default", "create_ticket", "c04"); found {
			t.Errorf("a 503 was stored: %+v", rec)
		}

		second := e.gw.do(t, req)
		id := expectCreated(t, second)
		if rec := e.gw.mustRecord(t, "create_ticket", "c04"); rec.State != "committed" || rec.RemoteID != id {
			t.Errorf("receipt state %q, remote_id %q; want committed, %q", rec.State, rec.RemoteID, id)
		}
		expectReplayOf(t, e.gw.do(t, req), second)
		expectAttempts(t, e.sb, 2)
		expectUp(t, e.sb, 1)
	})
}

// TestC05_AmountChanged: a key reused for another amount is refused with the three fields; the
// first body still replays.
func TestC05_AmountChanged(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Key: "c05", Body: `{"amount":"10.00"}`})
		id := expectCreated(t, first)

		r := e.gw.do(t, Request{Key: "c05", Body: `{"amount":"99.00"}`})
		expectConflict(t, r, first.Header.Get("Idempotency-Fingerprint"), id)

		expectReplayOf(t, e.gw.do(t, Request{Key: "c05", Body: `{"amount":"10.00"}`}), first)
		expectUp(t, e.sb, 1)
	})
}

// TestC06_ReorderedBody: key order, white space, escapes and number spelling do not change the
// effect.
func TestC06_ReorderedBody(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Key: "c06", Body: `{"event":"E1","qty":2}`})
		expectCreated(t, first)
		for _, body := range []string{
			"{ \"qty\": 2,\n \"event\":\"E1\" }",
			`{"event":"\u0045\u0031","qty":2}`,
			`{"qty":2.0,"event":"E1"}`,
			`{"qty":2e0,"event":"E1"}`,
		} {
			r := e.gw.do(t, Request{Key: "c06", Body: body})
			if r.Decision() != "replay" {
				t.Errorf("body %q: %d %q, want a replay", body, r.Status, r.Decision())
				continue
			}
			expectReplayOf(t, r, first)
		}
		expectUp(t, e.sb, 1)
	})
}

// TestC07_DefaultedMember: {"name":"w1"} and {"name":"w1","metadata":{}} are different effects,
// unless the route's fingerprint.body.defaults says that /metadata defaults to {}.
func TestC07_DefaultedMember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, routes string
		sameEffect   bool
	}{
		{"without a rule", "routes.yaml.tmpl", false},
		{"with a rule", "routes_defaults.yaml.tmpl", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, embeddedStore, envOptions{routes: tc.routes})
			first := e.gw.do(t, Request{Key: "c07", Body: `{"name":"w1"}`})
			id := expectCreated(t, first)
			r := e.gw.do(t, Request{Key: "c07", Body: `{"name":"w1","metadata":{}}`})
			if tc.sameEffect {
				expectReplayOf(t, r, first)
				// A value other than the default is another effect.
				r := e.gw.do(t, Request{Key: "c07", Body: `{"name":"w1","metadata":{"a":1}}`})
				expectConflict(t, r, first.Header.Get("Idempotency-Fingerprint"), id)
			} else {
				expectConflict(t, r, first.Header.Get("Idempotency-Fingerprint"), id)
			}
			expectUp(t, e.sb, 1)
		})
	}
}

// TestC08_NoOrBlankKey: no key, an empty key and a blank key are refused on a route that requires
// one; on a route where it is optional, keyless requests pass through, each on its own.
func TestC08_NoOrBlankKey(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			name    string
			req     Request
			problem string
		}{
			{"no key", Request{NoKey: true}, "missing-idempotency-key"},
			{"empty key", Request{Key: ""}, "invalid-idempotency-key"},
			{"whitespace-only key", Request{Key: "   "}, "invalid-idempotency-key"},
			{"whitespace-only sf-string", Request{Key: `"   "`}, "invalid-idempotency-key"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for range 2 {
					req := tc.req
					req.Body = ticketBody
					expectProblem(t, e.gw.do(t, req), http.StatusBadRequest, tc.problem, "", false)
				}
				expectUp(t, e.sb, 0)
			})
		}
		t.Run("optional key", func(t *testing.T) {
			var ids []string
			for range 2 {
				r := e.gw.do(t, Request{Path: pathOptional, NoKey: true, Body: ticketBody})
				expectDecision(t, r, http.StatusCreated, "execute")
				if r.Status == http.StatusCreated {
					id, _ := r.json(t)["id"].(string)
					ids = append(ids, id)
				}
			}
			if len(ids) == 2 && ids[0] == ids[1] {
				t.Errorf("both keyless requests got ticket %s: a shared bucket for no key", ids[0])
			}
			expectUp(t, e.sb, 2)
		})
	})
}

// TestC09_SetCookieNotReplayed: a replay has the body, status and Content-Type, never Set-Cookie.
func TestC09_SetCookieNotReplayed(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Key: "c09", Body: ticketBody, Header: map[string]string{"X-Sandbox-Set-Cookie": "1"}})
		expectCreated(t, first)
		if first.Header.Get("Set-Cookie") == "" {
			t.Errorf("the sandbox set no cookie: the test proves nothing")
		}
		for _, hdr := range []map[string]string{nil, {"X-Sandbox-Set-Cookie": "1"}} {
			r := e.gw.do(t, Request{Key: "c09", Body: ticketBody, Header: hdr})
			expectReplayOf(t, r, first)
			if v := r.Header.Values("Set-Cookie"); len(v) > 0 {
				t.Errorf("replay carries Set-Cookie %q", v)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("replay Content-Type %q, want application/json", ct)
			}
		}
		expectUp(t, e.sb, 1)
	})
}

// TestC10_LargeResponseBody: a committed response of 5 MiB reaches the client whole; the receipt
// keeps status and remote id and marks the body as not kept; the replay says so.
func TestC10_LargeResponseBody(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		const pad = 5 << 20
		first := e.gw.do(t, Request{Key: "c10", Body: ticketBody, Header: map[string]string{"X-Sandbox-Body-Bytes": "5242880"}})
		id := expectCreated(t, first)
		if len(first.Body) < pad {
			t.Errorf("first response body %d bytes, want the whole %d-byte padding", len(first.Body), pad)
		}

		rec := e.gw.mustRecord(t, "create_ticket", "c10")
		if rec.State != "committed" || rec.ResponseStatus != http.StatusCreated {
			t.Errorf("receipt state %q, response_status %d; want committed, 201", rec.State, rec.ResponseStatus)
		}
		if rec.RemoteID != id {
			t.Errorf("receipt remote_id %q, want %q: C10 wants the remote id kept when the body is not", rec.RemoteID, id)
		}
		if rec.ResponseBodyKept == nil || *rec.ResponseBodyKept {
			t.Errorf("receipt response_body_kept %v, want false", rec.ResponseBodyKept)
		}

		r := e.gw.do(t, Request{Key: "c10", Body: ticketBody})
		expectDecision(t, r, http.StatusCreated, "replay")
		if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("Idempotent-Replayed %q, want true", r.Header.Get("Idempotent-Replayed"))
		}
		if len(r.Body) >= pad {
			t.Errorf("replay body %d bytes: the receipt was to keep a bounded body", len(r.Body))
		}
		if r.Header.Get("Idempotency-Replay-Body") == "" {
			t.Errorf("the replay does not say that the body was not kept (no Idempotency-Replay-Body header); headers %v", r.Header)
		}
		expectUp(t, e.sb, 1)
	})
}

// TestC11_KeepAliveDropNotResent: the gateway's transport must not resend a request that carries
// Idempotency-Key after the upstream closed the reused connection without answering.
func TestC11_KeepAliveDropNotResent(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		// An ordinary call first, so that the gateway holds a keep-alive connection to the sandbox.
		expectCreated(t, e.gw.do(t, Request{Key: "c11-warm", Body: ticketBody}))

		r := e.gw.do(t, Request{Key: "c11", Body: ticketBody, Header: map[string]string{"X-Sandbox-Fail-After-Commit": "drop"}})
		expectUnknownExecution(t, r)
		if rec := e.gw.mustRecord(t, "create_ticket", "c11"); rec.State != "outcome_unknown" || rec.Executions != 1 {
			t.Errorf("record state %q, executions %d; want outcome_unknown, 1", rec.State, rec.Executions)
		}
		expectAttempts(t, e.sb, 2) // one each: the drop was not resent
		expectUp(t, e.sb, 2)
	})
}

// TestC12_InFlightDifferentBody: a retry with another body while the first is in flight is a
// conflict (422), not 409.
func TestC12_InFlightDifferentBody(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := goSend(e.gw, Request{Key: "c12", Body: `{"amount":"10.00"}`, Header: map[string]string{"X-Sandbox-Delay": "700ms"}})
		e.gw.waitState(t, "create_ticket", "c12", "in_progress")

		r := e.gw.do(t, Request{Key: "c12", Body: `{"amount":"99.00"}`})
		fr := first.wait(t)
		expectConflict(t, r, fr.Header.Get("Idempotency-Fingerprint"), "")
		expectCreated(t, fr)
		expectUp(t, e.sb, 1)
	})
}

// TestTwoReplicasShareAStore: two gateway processes on one Redis, or one PostgreSQL, get the same
// key at the same moment: one executes, held at the upstream until the five others have been
// answered 409 in progress; then both replicas replay it. (Field case C13 of docs/cases.md, with
// a failover, is TestC13_FailoverClaimOnNewPrimary.)
func TestTwoReplicasShareAStore(t *testing.T) {
	t.Parallel()
	for _, kind := range []storeKind{redisStore, postgresStore} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			twoReplicas(t, newEnv(t, kind))
		})
	}
}

// twoReplicas is TestTwoReplicasShareAStore on e's store.
func twoReplicas(t *testing.T, e *env) {
	other := e.startGateway(t)
	req := Request{Key: "c13", Body: ticketBody}
	gws := []*Gateway{e.gw, other, e.gw, other, e.gw, other}
	resps, heldAt := sendHeldDuplicates(t, e.sb, "c13", req, gws)
	for i, r := range resps {
		if i == heldAt {
			expectCreated(t, r)
			continue
		}
		expectProblem(t, r, http.StatusConflict, "request-in-progress", "in_progress", true)
		expectRetryAfter(t, r)
	}
	for _, g := range []*Gateway{e.gw, other} {
		expectReplayOf(t, g.do(t, req), resps[heldAt])
	}
	expectUp(t, e.sb, 1)
	expectAttempts(t, e.sb, 1)
}

// TestC20_EncodingHeadersAndStatusesReplayed (case C20): the upstream answers gzip to a client that
// asked for it, with Location, ETag, Link and a Content-Type with parameters, or answers 202, 204
// or a committed 402. The receipt holds a body its stored headers describe (the gateway lets its
// transport negotiate and undo compression, docs/unknown-outcomes.md), so every replay, to a
// client that accepts gzip and to one that does not, decodes to the first answer's document;
// status and those headers are replayed verbatim. Up×1 each.
func TestC20_EncodingHeadersAndStatusesReplayed(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		for _, c := range []struct {
			name, path string
			fault      map[string]string
			status     int
			headers    []string // replayed verbatim, each present on the first answer
		}{
			{"gzip 201", PathTickets, map[string]string{"X-Sandbox-Gzip": "1"}, http.StatusCreated, []string{"Content-Type", "Location", "Etag", "Link"}},
			{"202", PathTickets, map[string]string{"X-Sandbox-Success-Status": "202", "X-Sandbox-Gzip": "1"}, http.StatusAccepted, []string{"Content-Type", "Location", "Etag", "Link"}},
			{"204", PathTickets, map[string]string{"X-Sandbox-Success-Status": "204"}, http.StatusNoContent, []string{"Location", "Etag", "Link"}},
			{"committed 402", pathDeclined, map[string]string{"X-Sandbox-Fail-After-Commit": "402"}, http.StatusPaymentRequired, []string{"Content-Type"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				key := "c20-" + strings.ReplaceAll(c.name, " ", "-")
				before := e.sb.Stats(t).ByEndpoint[TicketsEndpoint]
				call := func(acceptEncoding string, fault map[string]string) (Response, []byte) {
					h := map[string]string{"Accept-Encoding": acceptEncoding}
					maps.Copy(h, fault)
					r := e.gw.do(t, Request{Path: c.path, Key: key, Body: ticketBody, Header: h})
					return r, decodedBody(t, r, acceptEncoding)
				}
				first, doc := call("gzip", c.fault)
				expectDecision(t, first, c.status, "execute")
				for _, name := range c.headers {
					if first.Header.Get(name) == "" {
						t.Fatalf("the first answer has no %s: %v", name, first.Header)
					}
				}
				if c.status == http.StatusNoContent && len(doc) != 0 {
					t.Errorf("the first 204 has a body: %q", doc)
				}
				for _, accept := range []string{"gzip", "identity"} {
					r, got := call(accept, nil)
					expectDecision(t, r, c.status, "replay")
					if !bytes.Equal(got, doc) {
						t.Errorf("the replay to Accept-Encoding %s decodes to %q, want the first answer's %q", accept, got, doc)
					}
					for _, name := range c.headers {
						if !slices.Equal(r.Header.Values(name), first.Header.Values(name)) {
							t.Errorf("the replay to Accept-Encoding %s has %s %q, want %q", accept, name, r.Header.Values(name), first.Header.Values(name))
						}
					}
				}
				if got := e.sb.Stats(t).ByEndpoint[TicketsEndpoint] - before; got != 1 {
					t.Errorf("%d side effects, want 1", got)
				}
			})
		}
	})
}

// decodedBody is r's body as its Content-Encoding describes it: gunzipped when gzip, else as it
// came. An encoding the request's Accept-Encoding (accepted) did not allow, or that it cannot
// undo, fails the test: the client could not read the answer.
func decodedBody(t *testing.T, r Response, accepted string) []byte {
	t.Helper()
	switch enc := r.Header.Get("Content-Encoding"); {
	case enc == "" || enc == "identity":
		return r.Body
	case enc != accepted:
		t.Fatalf("Content-Encoding %q to a client that accepts %q", enc, accepted)
		return nil
	case enc == "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatalf("Content-Encoding gzip, but the body is not: %v", err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("Content-Encoding gzip, but the body is not: %v", err)
		}
		return b
	default:
		t.Fatalf("Content-Encoding %q", enc)
		return nil
	}
}

// TestC19_ClientGoneMidCallOrMidBody (case C19): the client closes its connection, with a FIN and
// with an RST, while the upstream call runs: the call finishes, its receipt is stored, and the
// retry replays (Up×1). Another time it sends half the body it declared and closes: the
// truncated body is refused, never forwarded, and no claim is left behind: the retry with the
// whole body executes (Up×1, the cut request Up×0).
func TestC19_ClientGoneMidCallOrMidBody(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		for _, rst := range []bool{false, true} {
			how := map[bool]string{false: "fin", true: "rst"}[rst]
			t.Run("mid call, "+how, func(t *testing.T) {
				key, hold := "c19-call-"+how, t.Name()
				before := e.sb.Stats(t).ByEndpoint[TicketsEndpoint]
				conn, _ := rawConn(t, e.gw.Proxy, 0)
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nIdempotency-Key: %s\r\n"+
					"%s: %s\r\n%s: 1\r\nContent-Length: %d\r\n\r\n%s", PathTickets, key, headerHold, hold, HeaderDetach, len(ticketBody), ticketBody)
				e.sb.waitHeld(t, hold, 1) // the upstream call runs
				closeConn(t, conn, rst)
				e.sb.release(t, hold)
				e.gw.waitState(t, "create_ticket", key, "committed")
				r := e.gw.do(t, Request{Key: key, Body: ticketBody})
				expectDecision(t, r, http.StatusCreated, "replay")
				if id, _ := r.json(t)["id"].(string); id != e.gw.mustRecord(t, "create_ticket", key).RemoteID {
					t.Errorf("the replay's id %q is not the receipt's", id)
				}
				if got := e.sb.Stats(t).ByEndpoint[TicketsEndpoint] - before; got != 1 {
					t.Errorf("%d side effects, want 1", got)
				}
			})
			t.Run("mid body, "+how, func(t *testing.T) {
				key := "c19-body-" + how
				rejected := `idemgateway_decisions_total{decision="rejected",tool="create_ticket"}`
				before, attempts := e.gw.metric(t, rejected), e.sb.Stats(t).Requests.ByEndpoint[TicketsEndpoint]
				conn, _ := rawConn(t, e.gw.Proxy, 0)
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nIdempotency-Key: %s\r\n"+
					"Content-Length: %d\r\n\r\n%s", PathTickets, key, len(ticketBody), ticketBody[:len(ticketBody)/2])
				closeConn(t, conn, rst)
				e.gw.waitMetric(t, rejected, before+1) // the gateway has read the cut body, and refused it
				if _, found := e.gw.Record(t, "default", "create_ticket", key); found {
					t.Errorf("the cut request left a record of %s", key)
				}
				expectCreated(t, e.gw.do(t, Request{Key: key, Body: ticketBody}))
				if got := e.sb.Stats(t).Requests.ByEndpoint[TicketsEndpoint] - attempts; got != 1 {
					t.Errorf("%d upstream attempts, want 1: the retry's alone", got)
				}
			})
		}
	})
}

// closeConn closes conn with a FIN, or with an RST (SO_LINGER 0).
func closeConn(t *testing.T, conn *net.TCPConn, rst bool) {
	t.Helper()
	if rst {
		if err := conn.SetLinger(0); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
}
