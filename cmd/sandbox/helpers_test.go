package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// newTestSandbox serves a fresh sandbox on an httptest server that is closed at the end of the test.
func newTestSandbox(t *testing.T) (*sandbox, *httptest.Server) {
	t.Helper()
	s := newSandbox(slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// request is one request to the sandbox.
type request struct {
	method, path, contentType, body string
	header                          map[string]string
}

// with returns rq with the extra headers.
func (rq request) with(header map[string]string) request {
	h := maps.Clone(rq.header)
	if h == nil {
		h = map[string]string{}
	}
	maps.Copy(h, header)
	rq.header = h
	return rq
}

// send sends rq to the server at base and returns the response with its body read.
func send(t *testing.T, client *http.Client, base string, rq request) (*http.Response, []byte) {
	t.Helper()
	resp, body, err := trySend(client, base, rq)
	if err != nil {
		t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	return resp, body
}

// trySend is send for callers that expect an error.
func trySend(client *http.Client, base string, rq request) (*http.Response, []byte, error) {
	method := rq.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, base+rq.path, strings.NewReader(rq.body))
	if err != nil {
		return nil, nil, err
	}
	if rq.contentType != "" {
		req.Header.Set("Content-Type", rq.contentType)
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// decode decodes a JSON body, keeping numbers as json.Number.
func decode(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := decodeJSON(body, &v); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%.500s", err, body)
	}
	return v
}

// at returns the value at the path of object members in v, as a string when it is a string or a
// number, else as is; nil when absent.
func at(v any, path ...string) any {
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[name]
	}
	if n, ok := v.(json.Number); ok {
		return n.String()
	}
	return v
}

// createCase is a valid create request of an endpoint with a side effect, and where its response
// holds the id a receipt would record.
type createCase struct {
	endpoint string
	req      request
	idPath   []string // where the response holds the created object's id
}

// creates are the create cases of every endpoint with a side effect.
var creates = []createCase{
	{jiraCreateIssue, request{path: "/rest/api/3/issue", contentType: "application/json",
		body: `{"fields":{"project":{"key":"OPS"},"summary":"Disk full on db-1","issuetype":{"name":"Task"},"description":{"type":"doc","version":1,"content":[]}}}`},
		[]string{"key"}},
	{zendeskCreateTicket, request{path: "/api/v2/tickets.json", contentType: "application/json",
		body: `{"ticket":{"subject":"My printer is on fire!","comment":{"body":"The smoke is very colorful."},"priority":"urgent","requester":{"name":"The Customer","email":"thecustomer@example.com"}}}`},
		[]string{"ticket", "id"}},
	{linearIssueCreate, request{path: "/graphql", contentType: "application/json",
		body: `{"query":"mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id identifier url } } }","variables":{"input":{"teamId":"9cfb482a-81e3-4154-b5b9-2c805e70a02d","title":"New exception"}}}`},
		[]string{"data", "issueCreate", "issue", "identifier"}},
	{stripeCreateRefund, request{path: "/v1/refunds", contentType: "application/x-www-form-urlencoded",
		body: "charge=ch_3MmlLrLkdIwHu7ix0snN0B15&amount=1000&reason=requested_by_customer"},
		[]string{"id"}},
	{ticketsCreateTicket, request{path: "/v1/tickets", contentType: "application/json",
		body: `{"title":"Printer on fire","priority":"high","customer_id":"C-77"}`},
		[]string{"id"}},
	{jsonrpcCreateTicket, request{path: "/jsonrpc", contentType: "application/json",
		body: `{"jsonrpc":"2.0","id":7,"method":"tickets.create","params":{"title":"Printer on fire"}}`},
		[]string{"result", "id"}},
}

// getStats reads GET /_sandbox/stats.
func getStats(t *testing.T, c *http.Client, base string) stats {
	t.Helper()
	resp, body := send(t, c, base, request{method: "GET", path: "/_sandbox/stats"})
	if resp.StatusCode != 200 {
		t.Fatalf("stats: %d %s", resp.StatusCode, body)
	}
	var st stats
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("stats: %v: %s", err, body)
	}
	return st
}

// newClient returns a client that opens a new connection for every request, so that a dropped
// connection is never a reused one that the transport might retry on its own.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// wantProblem checks an RFC 9457 body of the sandbox.
func wantProblem(t *testing.T, resp *http.Response, body []byte, status int, effect bool) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, body)
	}
	if p.Status != status || p.Title != http.StatusText(status) || p.Type == "" || p.Detail == "" || p.EffectPerformed != effect {
		t.Errorf("problem = %+v, want status %d, its title, a type, a detail, effect_performed %v", p, status, effect)
	}
}

// setScript posts a script and returns the response.
func setScript(t *testing.T, base, script string) (*http.Response, []byte) {
	t.Helper()
	return send(t, http.DefaultClient, base, request{path: "/_sandbox/script", contentType: "application/json", body: script})
}

// getScript reads the queued faults.
func getScript(t *testing.T, base string) []faultJSON {
	t.Helper()
	resp, body := send(t, http.DefaultClient, base, request{method: "GET", path: "/_sandbox/script"})
	if resp.StatusCode != 200 {
		t.Fatalf("GET script: %d %s", resp.StatusCode, body)
	}
	var sc script
	if err := json.Unmarshal(body, &sc); err != nil || sc.FailNext == nil {
		t.Fatalf("GET script: %v: %s", err, body)
	}
	return sc.FailNext
}

// waitHeld polls until n requests wait on the hold called name.
func waitHeld(t *testing.T, s *sandbox, name string, n int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%d requests on hold %q", n, name), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		got := 0
		if h := s.holds[name]; h != nil {
			got = h.waiting
		}
		return got == n
	})
}

// release releases a hold through the admin endpoint.
func release(t *testing.T, base, name string) {
	t.Helper()
	resp, body := send(t, newClient(), base, request{path: "/_sandbox/release", contentType: "application/json", body: `{"hold":"` + name + `"}`})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("release: %d %s", resp.StatusCode, body)
	}
}

// connectMCP connects a go-sdk client to the MCP endpoint at url in the protocol version, and
// closes it when the test ends.
func connectMCP(t *testing.T, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "sandbox-test", Version: "1"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s (%s): %v", url, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls tool with args and fails the test on a protocol error.
func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}
