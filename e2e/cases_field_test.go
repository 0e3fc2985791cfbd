package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// watchedBody is a request body that counts the bytes read of it: a body never asked for has 0.
type watchedBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

// sendExpecting sends req as Go's HTTP client does with "Expect: 100-continue": the head first,
// the body only after "100 Continue" (or the client's timeout, here the test's ceiling on a hang,
// so a body sent means the gateway asked for it). declared, when not 0, is the Content-Length
// sent in place of the body's (a larger one: the client never sends more than the gateway asks
// for). It returns the answer and the body bytes the client sent.
func sendExpecting(t *testing.T, g *Gateway, req Request, declared int64) (Response, int64) {
	t.Helper()
	body := &watchedBody{r: strings.NewReader(req.Body)}
	hr, err := http.NewRequest(http.MethodPost, g.Proxy+req.Path, body)
	if err != nil {
		t.Fatal(err)
	}
	hr.ContentLength = int64(len(req.Body))
	if declared != 0 {
		hr.ContentLength = declared
		body.r = io.MultiReader(body.r, strings.NewReader(strings.Repeat(" ", int(declared)-len(req.Body))))
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Expect", "100-continue")
	if !req.NoKey {
		hr.Header.Set("Idempotency-Key", req.Key)
	}
	tr := &http.Transport{ExpectContinueTimeout: eventually.Ceiling}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(hr)
	if err != nil {
		t.Fatalf("POST %s with Expect: 100-continue: %v", req.Path, err)
	}
	r, err := readResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	return r, body.read.Load()
}

// TestC26_ExpectContinue (docs/cases.md C26): a client that sends "Expect: 100-continue" and
// waits for "100 Continue" before its body gets a refusal decided from the head (no key, no
// route, a declared length over max_body_bytes) at once, without being asked for a byte of the
// body; a good request is asked for its body, executes once, and its retry replays.
func TestC26_ExpectContinue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embeddedStore)
	refused := func(status int, name string) func(*testing.T, Response) {
		return func(t *testing.T, r Response) { expectProblem(t, r, status, name, "", false) }
	}
	for _, tc := range []struct {
		name     string
		req      Request
		declared int64
		expect   func(*testing.T, Response)
	}{
		{"no key", Request{Path: PathTickets, NoKey: true, Body: ticketBody}, 0, refused(http.StatusBadRequest, "missing-idempotency-key")},
		{"invalid key", Request{Path: PathTickets, Key: strings.Repeat("k", 256), Body: ticketBody}, 0, refused(http.StatusBadRequest, "invalid-idempotency-key")},
		{"no route", Request{Path: "/v1/nowhere", Key: "c26", Body: ticketBody}, 0, expectNoRoute},
		{"declared too large", Request{Path: PathTickets, Key: "c26", Body: ticketBody}, 1 << 20, refused(http.StatusRequestEntityTooLarge, "body-too-large")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, sent := sendExpecting(t, e.gw, tc.req, tc.declared)
			tc.expect(t, r)
			if sent != 0 {
				t.Errorf("the client sent %d body bytes: the gateway asked for the body (100 Continue) before refusing from the head", sent)
			}
		})
	}
	good := Request{Path: PathTickets, Key: "c26", Body: ticketBody}
	r, sent := sendExpecting(t, e.gw, good, 0)
	expectCreated(t, r)
	if sent != int64(len(ticketBody)) {
		t.Errorf("the client sent %d body bytes of %d", sent, len(ticketBody))
	}
	retry, _ := sendExpecting(t, e.gw, good, 0)
	expectReplayOf(t, retry, r)
	expectUp(t, e.sb, 1)
}

// TestC25_CaseFoldingUpstream (docs/cases.md C25): an upstream de-duplicates by the key the
// gateway forwards (forward_key) in an index that folds case (the sandbox's
// X-Sandbox-Key-Collation: ci, as a MySQL _ci collation). Two keys that differ only in case, and
// two tenants that do, are two operations each: two executions, each answered with its own
// ticket, each replayed to its own retries. On both stores.
func TestC25_CaseFoldingUpstream(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		call := func(tenant, key string) Request {
			return Request{Path: pathForward, Key: key, Body: ticketBody,
				Header: map[string]string{"X-Tenant-ID": tenant, "X-Sandbox-Key-Collation": "ci"}}
		}
		for _, pair := range [][2]Request{
			{call("acme", "Refund-7"), call("acme", "refund-7")},
			{call("Acme", "c25"), call("acme", "c25")},
		} {
			first, second := e.gw.do(t, pair[0]), e.gw.do(t, pair[1])
			id1, id2 := expectCreated(t, first), expectCreated(t, second)
			if id1 == id2 {
				t.Errorf("tenant %s key %s and tenant %s key %s got one ticket %s: the upstream took them for one operation",
					pair[0].Header["X-Tenant-ID"], pair[0].Key, pair[1].Header["X-Tenant-ID"], pair[1].Key, id1)
			}
			expectReplayOf(t, e.gw.do(t, pair[0]), first)
			expectReplayOf(t, e.gw.do(t, pair[1]), second)
		}
		expectUp(t, e.sb, 4)
	})
}

// unknownTTL is the default unknown_ttl (docs/configuration.md): 30 days.
const unknownTTL = 30 * 24 * time.Hour

// expectExpiresIn checks that r's Idempotency-Expires is about ttl from now: within ten minutes,
// which tells the route's ttl (an hour in testdata/routes.yaml.tmpl) from unknown_ttl (30 days)
// however slow the machine. It returns the time.
func expectExpiresIn(t *testing.T, r Response, ttl time.Duration) time.Time {
	t.Helper()
	v := r.Header.Get("Idempotency-Expires")
	at, err := http.ParseTime(v)
	if err != nil {
		t.Errorf("Idempotency-Expires %q: %v", v, err)
		return at
	}
	if d := time.Until(at) - ttl; d < -10*time.Minute || d > 10*time.Minute {
		t.Errorf("Idempotency-Expires %s is %s from now, want about %s", v, time.Until(at).Round(time.Second), ttl)
	}
	return at
}

// TestC23_RetentionSaid (docs/cases.md C23): every answer the store decided says when the key
// expires: a receipt its ttl (1h), its replays the same time. A call whose outcome is unknown,
// under block, is kept for unknown_ttl (30 days), and says so to the call and its refused
// retries; the admin record says it too, and on Redis the record's own expiry is that far off, so
// the key does not lapse into a second execution when the receipt's ttl would have ended. (An
// executor that dies mid-call leaves the same: e2e TestKill9InFlight.) On both stores.
func TestC23_RetentionSaid(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		done := Request{Key: "c23-done", Body: ticketBody}
		first := e.gw.do(t, done)
		expectCreated(t, first)
		at := expectExpiresIn(t, first, time.Hour)
		if r := e.gw.do(t, done); r.Header.Get("Idempotency-Expires") != at.Format(http.TimeFormat) {
			t.Errorf("replay: Idempotency-Expires %q, want the receipt's %q", r.Header.Get("Idempotency-Expires"), at.Format(http.TimeFormat))
		}

		unknown := Request{Key: "c23-unknown", Body: ticketBody}
		r := e.gw.do(t, Request{Key: unknown.Key, Body: ticketBody, Header: map[string]string{"X-Sandbox-Fail-After-Commit": "drop"}})
		expectUnknownExecution(t, r)
		at = expectExpiresIn(t, r, unknownTTL)
		retry := e.gw.do(t, unknown)
		expectProblem(t, retry, http.StatusConflict, "outcome-unknown", "outcome_unknown", false)
		if retry.Header.Get("Idempotency-Expires") != at.Format(http.TimeFormat) {
			t.Errorf("refused retry: Idempotency-Expires %q, want the record's %q", retry.Header.Get("Idempotency-Expires"), at.Format(http.TimeFormat))
		}
		if rec := e.gw.mustRecord(t, "create_ticket", unknown.Key); !rec.ExpiresAt.Truncate(time.Second).Equal(at) {
			t.Errorf("admin record expires_at %s, want %s", rec.ExpiresAt, at)
		}
		if e.redis != nil {
			raw := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
			defer raw.Close()
			pttl, err := raw.PTTL(context.Background(), "idemgateway:{default/create_ticket/c23-unknown}").Result()
			if err != nil || pttl < unknownTTL-10*time.Minute {
				t.Errorf("Redis PTTL of the unknown record %v (%v), want about %s", pttl, err, unknownTTL)
			}
		}
		expectUp(t, e.sb, 2)
	})
}

// TestC24_AnswersThatSayNothingHappened (docs/cases.md C24): a GraphQL mutation answered 200 with
// errors and data {"issueCreate": null}, and a plain JSON-RPC API's error -32602 at 200, did
// nothing: neither is stored as a receipt; the key is free, and its next request executes and is
// committed (Up×1 each in all), then replayed. On both stores.
func TestC24_AnswersThatSayNothingHappened(t *testing.T) {
	t.Parallel()
	const mutation = `{"query":"mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id identifier url } } }","variables":{"input":{"teamId":"OPS","title":%q}}}`
	forEachStore(t, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			name, path, tool, endpoint string
			failed, fixed              string
			saysWhy                    string // a part of the failed answer's body
		}{
			{"graphql", "/graphql", "linear_issue_create", "linear.issue_create",
				fmt.Sprintf(mutation, ""), fmt.Sprintf(mutation, "Disk full"), `"issueCreate":null`},
			{"jsonrpc", "/jsonrpc", "jsonrpc_create_ticket", "jsonrpc.create_ticket",
				`{"jsonrpc":"2.0","id":1,"method":"tickets.create","params":{}}`,
				`{"jsonrpc":"2.0","id":2,"method":"tickets.create","params":{"title":"Disk full"}}`, `-32602`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				key := "c24-" + tc.name
				r := e.gw.do(t, Request{Path: tc.path, Key: key, Body: tc.failed})
				if r.Status != http.StatusOK || r.Decision() != "execute" || !strings.Contains(string(r.Body), tc.saysWhy) {
					t.Fatalf("failed call: %d %q %s, want the upstream's 200 with %s", r.Status, r.Decision(), r.Body, tc.saysWhy)
				}
				if r.Header.Get("Idempotency-Expires") != "" {
					t.Errorf("Idempotency-Expires %q on an answer that freed its key", r.Header.Get("Idempotency-Expires"))
				}
				if rec, found := e.gw.Record(t, "default", tc.tool, key); found {
					t.Errorf("the answer that did nothing was stored: %+v", rec)
				}
				first := e.gw.do(t, Request{Path: tc.path, Key: key, Body: tc.fixed})
				if first.Status != http.StatusOK || first.Decision() != "execute" {
					t.Fatalf("the corrected call under the same key: %d %q %s, want an execution", first.Status, first.Decision(), first.Body)
				}
				retry := e.gw.do(t, Request{Path: tc.path, Key: key, Body: tc.fixed})
				if retry.Decision() != "replay" || retry.Status != http.StatusOK {
					t.Errorf("retry: %d %q, want the replay", retry.Status, retry.Decision())
				}
				if rec := e.gw.mustRecord(t, tc.tool, key); rec.State != "committed" || rec.RemoteID == "" {
					t.Errorf("record %+v, want committed with a remote id", rec)
				}
				if n := e.sb.Stats(t).ByEndpoint[tc.endpoint]; n != 1 {
					t.Errorf("%s: Up×%d, want Up×1", tc.endpoint, n)
				}
			})
		}
	})
}

// TestC21_MultipartRetry (docs/cases.md C21): a file upload (multipart/form-data, written by Go's
// mime/multipart, which picks a random boundary) is sent again by another writer: a new boundary,
// and its part headers in another order and letter case. The retry replays (Up×1); an upload whose
// file changed under the same key is 422 naming the part. On both stores.
func TestC21_MultipartRetry(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		createJiraIssue(t, e.sb)
		const pdf = "%PDF-1.7 quarterly report"
		var first bytes.Buffer
		w := multipart.NewWriter(&first)
		_ = w.WriteField("comment", "Q3 numbers")
		fw, _ := w.CreatePart(textproto.MIMEHeader{"Content-Disposition": {`form-data; name="file"; filename="q3.pdf"`}, "Content-Type": {"application/pdf"}})
		_, _ = io.WriteString(fw, pdf)
		_ = w.Close()
		upload := func(contentType, body string) Request {
			return Request{Path: "/rest/api/3/issue/OPS-1/attachments", Key: "c21", Body: body, ContentType: contentType,
				Header: map[string]string{"X-Atlassian-Token": "no-check"}}
		}
		r := e.gw.do(t, upload(w.FormDataContentType(), first.String()))
		if r.Status != http.StatusOK || r.Decision() != "execute" {
			t.Fatalf("upload: %d %q %s", r.Status, r.Decision(), r.Body)
		}
		retry := func(file string) string {
			return "--retry-7MA4YWxk\r\ncontent-disposition: form-data; name=comment\r\n\r\nQ3 numbers\r\n" +
				"--retry-7MA4YWxk\r\nCONTENT-TYPE: application/pdf\r\nContent-Disposition: form-data; filename=\"q3.pdf\"; name=\"file\"\r\n\r\n" +
				file + "\r\n--retry-7MA4YWxk--\r\n"
		}
		expectReplayOf(t, e.gw.do(t, upload("multipart/form-data; boundary=retry-7MA4YWxk", retry(pdf))), r)
		changed := e.gw.do(t, upload("multipart/form-data; boundary=retry-7MA4YWxk", retry("%PDF-1.7 another report")))
		expectProblem(t, changed, http.StatusUnprocessableEntity, "idempotency-key-reused", "conflict", false)
		if !strings.Contains(string(changed.Body), `"differing_fields":["/file"]`) {
			t.Errorf("the 422 does not name the changed part /file alone: %s", changed.Body)
		}
		if n := e.sb.Stats(t).ByEndpoint["jira.add_attachment"]; n != 1 {
			t.Errorf("jira.add_attachment: Up×%d, want Up×1", n)
		}
	})
}

// TestC22_RulesChangeBetweenAttempts (docs/cases.md C22): key K executes under rules that leave
// /customer_id out; the routes file is changed to leave /priority out instead and reloaded
// (SIGHUP). K's identical retry replays; a retry that changed /title, which both rule sets read,
// is 422 naming /title alone; one that changed only /priority is fingerprint-rules-changed, naming
// no field (never a 422 naming a field the route no longer reads). Up×1. On both stores.
func TestC22_RulesChangeBetweenAttempts(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		first := e.gw.do(t, Request{Key: "c22", Body: ticketBody})
		expectCreated(t, first)

		old, err := os.ReadFile(e.routes)
		if err != nil {
			t.Fatal(err)
		}
		changed := strings.Replace(string(old), "exclude: [/customer_id]", "exclude: [/priority]", 1)
		if changed == string(old) {
			t.Fatal("testdata/c22.yaml.tmpl no longer excludes /customer_id")
		}
		if err := os.WriteFile(e.routes, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := e.gw.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		e.gw.waitLog(t, "routes reloaded", 1)

		// The replay: the first answer, under this request's fingerprint (the route's rules now).
		replay := e.gw.do(t, Request{Key: "c22", Body: ticketBody})
		expectDecision(t, replay, first.Status, "replay")
		if !bytes.Equal(replay.Body, first.Body) {
			t.Errorf("replayed body %s, want the first answer's %s", replay.Body, first.Body)
		}
		r := e.gw.do(t, Request{Key: "c22", Body: strings.Replace(ticketBody, "Disk full", "Disk empty", 1)})
		expectProblem(t, r, http.StatusUnprocessableEntity, "idempotency-key-reused", "conflict", false)
		if !strings.Contains(string(r.Body), `"differing_fields":["/title"]`) {
			t.Errorf("the 422 does not name /title alone: %s", r.Body)
		}
		r = e.gw.do(t, Request{Key: "c22", Body: strings.Replace(ticketBody, `"high"`, `"low"`, 1)})
		expectProblem(t, r, http.StatusUnprocessableEntity, "fingerprint-rules-changed", "conflict", false)
		if strings.Contains(string(r.Body), "differing_fields") {
			t.Errorf("fingerprint-rules-changed names fields: %s", r.Body)
		}
		expectUp(t, e.sb, 1)
	}, envOptions{routes: "c22.yaml.tmpl", env: []string{"IDEMGATEWAY_ROUTES_POLL=0"}})
}
