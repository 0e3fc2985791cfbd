package main

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgateway/idemgateway/internal/testlog"
)

var uuidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestEndpoints: each endpoint of the sandbox answers a valid request as the API it plays does,
// counting one effect, and refuses an invalid one without counting any.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	for _, tc := range slices.Concat(jiraCases, zendeskCases, linearCases, stripeCases, ticketsCases, jsonrpcCases) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, srv := newTestSandbox(t)
			resp, body := send(t, srv.Client(), srv.URL, tc.req)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if tc.check != nil {
				tc.check(t, srv.URL, resp, decode(t, body))
			}
			want := newCounter(effectEndpoints).byEndpoint
			var wantTotal int64
			if tc.wantEffect != "" {
				want[tc.wantEffect], wantTotal = 1, 1
			}
			st := s.snapshot()
			if st.Total != wantTotal || !maps.Equal(st.ByEndpoint, want) {
				t.Errorf("effects = %d %v, want %d %v", st.Total, st.ByEndpoint, wantTotal, want)
			}
			if st.Requests.Total != 1 {
				t.Errorf("requests = %d, want 1", st.Requests.Total)
			}
		})
	}
}

// endpointCase is a request of TestEndpoints, and what the sandbox must answer and count.
type endpointCase struct {
	name       string
	req        request
	wantStatus int
	wantEffect string // the endpoint counted once; "" for none
	check      func(t *testing.T, base string, resp *http.Response, v map[string]any)
}

// jiraCases are the cases of Jira's create issue: the issue created, and the 400s of a missing
// summary, a bad project key and malformed JSON.
var jiraCases = []endpointCase{
	{
		name: "jira create issue", req: creates[0].req, wantStatus: 201, wantEffect: jiraCreateIssue,
		check: func(t *testing.T, base string, _ *http.Response, v map[string]any) {
			want := map[string]any{"id": "10001", "key": "OPS-1", "self": base + "/rest/api/3/issue/10001"}
			if len(v) != len(want) {
				t.Errorf("members = %v, want %v", v, want)
			}
			for k, w := range want {
				if got := at(v, k); got != w {
					t.Errorf("%s = %v, want %v", k, got, w)
				}
			}
		},
	},
	{
		name:       "jira create issue without summary",
		req:        request{path: "/rest/api/3/issue", body: `{"fields":{"project":{"key":"OPS"},"issuetype":{"name":"Task"}}}`},
		wantStatus: 400,
		check: func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
			if at(v, "errors", "summary") == nil {
				t.Errorf("errors.summary missing: %v", v)
			}
		},
	},
	{
		name:       "jira create issue with a bad project key",
		req:        request{path: "/rest/api/3/issue", body: `{"fields":{"project":{"key":"ops team"},"summary":"s","issuetype":{"name":"Task"}}}`},
		wantStatus: 400,
		check: func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
			if at(v, "errors", "project") == nil {
				t.Errorf("errors.project missing: %v", v)
			}
		},
	},
	{
		name:       "jira create issue with malformed JSON",
		req:        request{path: "/rest/api/3/issue", body: `{"fields":`},
		wantStatus: 400,
		check: func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
			if msgs, _ := at(v, "errorMessages").([]any); len(msgs) == 0 {
				t.Errorf("errorMessages empty: %v", v)
			}
		},
	},
}

// zendeskCases are the cases of Zendesk's create ticket: the ticket created, and the 422s of a
// missing comment and an unknown priority.
var zendeskCases = []endpointCase{
	{
		name: "zendesk create ticket", req: creates[1].req, wantStatus: 201, wantEffect: zendeskCreateTicket,
		check: func(t *testing.T, base string, resp *http.Response, v map[string]any) {
			url := base + "/api/v2/tickets/35436.json"
			want := map[string]any{
				"id": "35436", "url": url, "subject": "My printer is on fire!",
				"description": "The smoke is very colorful.", "priority": "urgent", "status": "new",
			}
			for k, w := range want {
				if got := at(v, "ticket", k); got != w {
					t.Errorf("ticket.%s = %v, want %v", k, got, w)
				}
			}
			if at(v, "ticket", "requester_id") == nil {
				t.Error("ticket.requester_id missing")
			}
			if got := resp.Header.Get("Location"); got != url {
				t.Errorf("Location = %q, want %q", got, url)
			}
		},
	},
	{
		name:       "zendesk create ticket without comment",
		req:        request{path: "/api/v2/tickets.json", body: `{"ticket":{"subject":"s"}}`},
		wantStatus: 422,
		check: func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
			if at(v, "error") != "BlankValue" {
				t.Errorf("error = %v, want BlankValue", at(v, "error"))
			}
		},
	},
	{
		name:       "zendesk create ticket with an unknown priority",
		req:        request{path: "/api/v2/tickets.json", body: `{"ticket":{"comment":{"body":"b"},"priority":"asap"}}`},
		wantStatus: 422,
	},
}

// linearCases are the cases of Linear's GraphQL issueCreate: the issue created, by team id or key,
// and the GraphQL errors of other queries and bad input.
var linearCases = []endpointCase{
	{
		name: "linear issueCreate", req: creates[2].req, wantStatus: 200, wantEffect: linearIssueCreate,
		check: func(t *testing.T, base string, _ *http.Response, v map[string]any) {
			if at(v, "data", "issueCreate", "success") != true {
				t.Errorf("success = %v, want true", at(v, "data", "issueCreate", "success"))
			}
			issue := at(v, "data", "issueCreate", "issue")
			if got := at(issue, "identifier"); got != "ENG-1" {
				t.Errorf("identifier = %v, want ENG-1", got)
			}
			if id, _ := at(issue, "id").(string); !uuidRe.MatchString(id) {
				t.Errorf("id = %q, want a UUID", id)
			}
			if got := at(issue, "url"); got != base+"/sandbox/issue/ENG-1" {
				t.Errorf("url = %v", got)
			}
			if v["errors"] != nil {
				t.Errorf("errors = %v", v["errors"])
			}
		},
	},
	{
		name: "linear issueCreate with a team key as teamId",
		req: request{path: "/graphql", body: `{"query":"mutation($in: IssueCreateInput!) { issueCreate(input: $in) { issue { identifier } } }",` +
			`"variables":{"in":{"teamId":"ops","title":"t"}}}`},
		wantStatus: 200, wantEffect: linearIssueCreate,
		check: func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
			if got := at(v, "data", "issueCreate", "issue", "identifier"); got != "OPS-1" {
				t.Errorf("identifier = %v, want OPS-1", got)
			}
		},
	},
	{
		name:       "linear query that is not issueCreate",
		req:        request{path: "/graphql", body: `{"query":"query { viewer { id name } }"}`},
		wantStatus: 200,
		check:      wantGraphQLErrors(false),
	},
	{
		name:       "linear issueCreate named but not a mutation",
		req:        request{path: "/graphql", body: `{"query":"query { issueCreate(input: $input) { success } }","variables":{"input":{"teamId":"x","title":"t"}}}`},
		wantStatus: 200,
		check:      wantGraphQLErrors(false),
	},
	{
		name: "linear issueCreate without title",
		req: request{path: "/graphql", body: `{"query":"mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success } }",` +
			`"variables":{"input":{"teamId":"x"}}}`},
		wantStatus: 200,
		check:      wantGraphQLErrors(true),
	},
	{
		name:       "linear body that is not JSON",
		req:        request{path: "/graphql", body: `mutation { issueCreate }`},
		wantStatus: 400,
		check:      wantGraphQLErrors(false),
	},
}

// stripeCases are the cases of Stripe's create refund: a refund of part or all of a charge, and
// the 400s of bad parameters.
var stripeCases = []endpointCase{
	{
		name: "stripe create refund", req: creates[3].req, wantStatus: 200, wantEffect: stripeCreateRefund,
		check: func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
			want := map[string]any{"object": "refund", "amount": "1000", "charge": "ch_3MmlLrLkdIwHu7ix0snN0B15",
				"status": "succeeded", "reason": "requested_by_customer", "currency": "usd"}
			for k, w := range want {
				if got := at(v, k); got != w {
					t.Errorf("%s = %v, want %v", k, got, w)
				}
			}
			if id, _ := at(v, "id").(string); !regexp.MustCompile(`^re_[0-9A-Za-z]{24}$`).MatchString(id) {
				t.Errorf("id = %q, want re_ and 24 letters or digits", id)
			}
		},
	},
	{
		name:       "stripe create refund of the whole charge, with metadata",
		req:        request{path: "/v1/refunds", body: "payment_intent=pi_1&metadata[order_id]=6735"},
		wantStatus: 200, wantEffect: stripeCreateRefund,
		check: func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
			if got := at(v, "amount"); got != "10000" {
				t.Errorf("amount = %v, want 10000", got)
			}
			if got := at(v, "metadata", "order_id"); got != "6735" {
				t.Errorf("metadata.order_id = %v, want 6735", got)
			}
			if got, ok := v["charge"]; !ok || got != nil {
				t.Errorf("charge = %v, want null", got)
			}
		},
	},
	{
		name: "stripe create refund without charge", req: request{path: "/v1/refunds", body: "amount=1000"}, wantStatus: 400,
		check: wantStripeError("parameter_missing"),
	},
	{
		name: "stripe create refund with a bad amount", req: request{path: "/v1/refunds", body: "charge=ch_1&amount=-5"}, wantStatus: 400,
		check: wantStripeError("parameter_invalid_integer"),
	},
	{
		name: "stripe create refund with a bad reason", req: request{path: "/v1/refunds", body: "charge=ch_1&reason=bored"}, wantStatus: 400,
		check: wantStripeError("parameter_invalid_string"),
	},
}

// ticketsCases are the cases of the tickets API's create ticket: the ticket created, every digit
// of its numbers kept, and the 400 of a body that is not an object.
var ticketsCases = []endpointCase{
	{
		name: "tickets create ticket", req: creates[4].req, wantStatus: 201, wantEffect: ticketsCreateTicket,
		check: func(t *testing.T, base string, _ *http.Response, v map[string]any) {
			want := map[string]any{"id": "T-1842", "url": base + "/v1/tickets/T-1842", "status": "open",
				"title": "Printer on fire", "customer_id": "C-77"}
			for k, w := range want {
				if got := at(v, k); got != w {
					t.Errorf("%s = %v, want %v", k, got, w)
				}
			}
		},
	},
	{
		name:       "tickets create ticket keeps every digit of a number",
		req:        request{path: "/v1/tickets", body: `{"amount":9007199254740993,"price":10.50}`},
		wantStatus: 201, wantEffect: ticketsCreateTicket,
		check: func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
			if got := at(v, "amount"); got != "9007199254740993" {
				t.Errorf("amount = %v", got)
			}
			if got := at(v, "price"); got != "10.50" {
				t.Errorf("price = %v", got)
			}
		},
	},
	{
		name: "tickets create ticket with an array", req: request{path: "/v1/tickets", body: `[1]`}, wantStatus: 400,
	},
}

var jsonrpcCases = []endpointCase{
	{
		name: "jsonrpc tickets.create", req: creates[5].req, wantStatus: 200, wantEffect: jsonrpcCreateTicket,
		check: func(t *testing.T, base string, _ *http.Response, v map[string]any) {
			if fmt.Sprint(v["id"]) != "7" || at(v, "result", "id") != "T-1842" || at(v, "result", "url") != base+"/v1/tickets/T-1842" {
				t.Errorf("answer = %v", v)
			}
		},
	},
	{name: "jsonrpc without a title", wantStatus: 200, check: wantJSONRPCError(-32602),
		req: request{path: "/jsonrpc", body: `{"jsonrpc":"2.0","id":1,"method":"tickets.create","params":{}}`}},
	{name: "jsonrpc another method", wantStatus: 200, check: wantJSONRPCError(-32601),
		req: request{path: "/jsonrpc", body: `{"jsonrpc":"2.0","id":1,"method":"tickets.delete","params":{"title":"x"}}`}},
	{name: "jsonrpc not a request", wantStatus: 200, check: wantJSONRPCError(-32600),
		req: request{path: "/jsonrpc", body: `[1]`}},
}

// wantJSONRPCError checks a JSON-RPC error answer of code.
func wantJSONRPCError(code int) func(*testing.T, string, *http.Response, map[string]any) {
	return func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
		t.Helper()
		if fmt.Sprint(at(v, "error", "code")) != fmt.Sprint(code) || at(v, "error", "message") == "" || v["result"] != nil {
			t.Errorf("answer = %v, want error %d", v, code)
		}
	}
}

func wantGraphQLErrors(withData bool) func(*testing.T, string, *http.Response, map[string]any) {
	return func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
		t.Helper()
		if errs, _ := v["errors"].([]any); len(errs) == 0 || at(errs[0], "message") == "" {
			t.Errorf("errors = %v, want one with a message", v["errors"])
		}
		data, ok := v["data"]
		switch {
		case !withData && ok:
			t.Errorf("data = %v, want none", data)
		case withData && (!ok || at(data, "issueCreate") != nil || len(data.(map[string]any)) != 1):
			t.Errorf("data = %v (present %v), want {\"issueCreate\":null}", data, ok)
		}
	}
}

func wantStripeError(code string) func(*testing.T, string, *http.Response, map[string]any) {
	return func(t *testing.T, _ string, _ *http.Response, v map[string]any) {
		t.Helper()
		if at(v, "error", "type") != "invalid_request_error" || at(v, "error", "code") != code {
			t.Errorf("error = %v, want invalid_request_error %s", v["error"], code)
		}
	}
}

func TestJiraGetIssue(t *testing.T) {
	t.Parallel()
	s, srv := newTestSandbox(t)
	c := srv.Client()
	for range 2 {
		if resp, body := send(t, c, srv.URL, creates[0].req); resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
	}
	tests := []struct {
		name, path string
		wantStatus int
		wantKey    string
	}{
		{"by id", "/rest/api/3/issue/10002", 200, "OPS-2"},
		{"by key", "/rest/api/3/issue/OPS-1", 200, "OPS-1"},
		{"by lower-case key", "/rest/api/3/issue/ops-1", 200, "OPS-1"},
		{"unknown id", "/rest/api/3/issue/99999", 404, ""},
		{"unknown key", "/rest/api/3/issue/OPS-3", 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := send(t, c, srv.URL, request{method: "GET", path: tc.path})
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.wantStatus, body)
			}
			v := decode(t, body)
			if tc.wantStatus != 200 {
				if msgs, _ := v["errorMessages"].([]any); len(msgs) != 1 {
					t.Errorf("errorMessages = %v, want one", v["errorMessages"])
				}
				return
			}
			if got := at(v, "key"); got != tc.wantKey {
				t.Errorf("key = %v, want %s", got, tc.wantKey)
			}
			if got := at(v, "fields", "summary"); got != "Disk full on db-1" {
				t.Errorf("fields.summary = %v", got)
			}
			if got := at(v, "fields", "status", "name"); got != "To Do" {
				t.Errorf("fields.status.name = %v", got)
			}
			if at(v, "fields", "created") == nil {
				t.Error("fields.created missing")
			}
		})
	}
	if st := s.snapshot(); st.Total != 2 || st.Requests.ByEndpoint[jiraGetIssue] != int64(len(tests)) {
		t.Errorf("stats = %+v, want 2 effects and %d reads", st, len(tests))
	}

	t.Run("reset forgets issues but never reuses an id", func(t *testing.T) {
		send(t, c, srv.URL, request{path: "/_sandbox/reset"})
		if resp, _ := send(t, c, srv.URL, request{method: "GET", path: "/rest/api/3/issue/OPS-1"}); resp.StatusCode != 404 {
			t.Errorf("after reset: status = %d, want 404", resp.StatusCode)
		}
		_, body := send(t, c, srv.URL, creates[0].req)
		if v := decode(t, body); at(v, "id") != "10003" || at(v, "key") != "OPS-3" {
			t.Errorf("after reset: created %v, want 10003 OPS-3", v)
		}
	})
}

func TestStatsCountAndReset(t *testing.T) {
	t.Parallel()
	_, srv := newTestSandbox(t)
	c := srv.Client()

	st := getStats(t, c, srv.URL)
	for _, ep := range effectEndpoints {
		if n, ok := st.ByEndpoint[ep]; !ok || n != 0 {
			t.Errorf("fresh: by_endpoint[%s] = %d (listed %v), want a listed 0", ep, n, ok)
		}
	}

	want := newCounter(effectEndpoints)
	wantRequests := newCounter(apiEndpoints)
	for i, cr := range creates {
		for range i + 1 {
			send(t, c, srv.URL, cr.req)
			want.add(cr.endpoint)
			wantRequests.add(cr.endpoint)
		}
		// A request without effect counts as a request only.
		send(t, c, srv.URL, cr.req.with(map[string]string{headerStatus: "503"}))
		wantRequests.add(cr.endpoint)
	}
	send(t, c, srv.URL, request{method: "GET", path: "/rest/api/3/issue/10001"})
	wantRequests.add(jiraGetIssue)
	send(t, c, srv.URL, request{method: "GET", path: "/nowhere"})

	st = getStats(t, c, srv.URL)
	if st.Total != want.total || !maps.Equal(st.ByEndpoint, want.byEndpoint) {
		t.Errorf("effects = %d %v, want %d %v", st.Total, st.ByEndpoint, want.total, want.byEndpoint)
	}
	if st.Requests.Total != wantRequests.total || !maps.Equal(st.Requests.ByEndpoint, wantRequests.byEndpoint) {
		t.Errorf("requests = %d %v, want %d %v", st.Requests.Total, st.Requests.ByEndpoint, wantRequests.total, wantRequests.byEndpoint)
	}

	resp, body := send(t, c, srv.URL, request{path: "/_sandbox/reset"})
	if resp.StatusCode != 200 {
		t.Fatalf("reset: %d %s", resp.StatusCode, body)
	}
	got := getStats(t, c, srv.URL)
	if got.Total != 0 || !maps.Equal(got.ByEndpoint, newCounter(effectEndpoints).byEndpoint) || got.Requests.Total != 0 {
		t.Errorf("after reset: %+v, want zeros", got)
	}
	if resp, _ := send(t, c, srv.URL, request{method: "GET", path: "/_sandbox/reset"}); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /_sandbox/reset: %d, want 405", resp.StatusCode)
	}
}

// TestConcurrentCreates fires 100 creates at every endpoint at once: each endpoint counts exactly
// 100 effects and hands out 100 distinct ids.
func TestConcurrentCreates(t *testing.T) {
	t.Parallel()
	const n = 100
	_, srv := newTestSandbox(t)
	c := srv.Client()

	var mu sync.Mutex
	ids := make(map[string]map[string]bool) // filled before any request goes: the goroutines only read it
	for _, cr := range creates {
		ids[cr.endpoint] = make(map[string]bool)
	}
	var wg sync.WaitGroup
	for _, cr := range creates {
		for range n {
			wg.Go(func() {
				resp, body, err := trySend(c, srv.URL, cr.req)
				if err != nil {
					t.Errorf("%s: %v", cr.endpoint, err)
					return
				}
				if resp.StatusCode >= 300 {
					t.Errorf("%s: status %d", cr.endpoint, resp.StatusCode)
					return
				}
				var v map[string]any
				if err := decodeJSON(body, &v); err != nil {
					t.Errorf("%s: %v", cr.endpoint, err)
					return
				}
				mu.Lock()
				ids[cr.endpoint][fmt.Sprint(at(v, cr.idPath...))] = true
				mu.Unlock()
			})
		}
	}
	wg.Wait()

	st := getStats(t, c, srv.URL)
	if st.Total != n*int64(len(creates)) {
		t.Errorf("total = %d, want %d", st.Total, n*len(creates))
	}
	for _, cr := range creates {
		if got := st.ByEndpoint[cr.endpoint]; got != n {
			t.Errorf("by_endpoint[%s] = %d, want %d", cr.endpoint, got, n)
		}
		if got := len(ids[cr.endpoint]); got != n {
			t.Errorf("%s: %d distinct ids, want %d", cr.endpoint, got, n)
		}
	}
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	s, srv := newTestSandbox(t)
	tests := []struct {
		name, method, path string
		want               int
	}{
		{"unknown path", "POST", "/rest/api/2/issue", 404},
		{"wrong method", "GET", "/v1/refunds", 405},
		{"wrong method on a read", "DELETE", "/rest/api/3/issue/10001", 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := send(t, srv.Client(), srv.URL, request{method: tc.method, path: tc.path})
			if resp.StatusCode != tc.want {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if st := s.snapshot(); st.Total != 0 || st.Requests.Total != 0 {
		t.Errorf("stats = %+v, want zeros", st)
	}
}

// TestLogLine checks the one log line of a request: endpoint, effect and fault.
func TestLogLine(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	s := newSandbox(slog.New(slog.NewTextHandler(&buf, nil)))
	srv := httptest.NewServer(s)
	send(t, srv.Client(), srv.URL, creates[0].req.with(map[string]string{headerFailAfterCommit: "500"}))
	srv.Close()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"msg=request", "endpoint=jira.create_issue", "status=500", "effect=true", `fault="fail_after_commit=500"`, "id=OPS-1"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line %q lacks %q", lines[0], want)
		}
	}
}
