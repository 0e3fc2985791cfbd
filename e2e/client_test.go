package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// client is the agent's HTTP client. Its transport is shared by all tests; requests that must
// arrive at the same moment get connections of their own from its pool.
var client = &http.Client{
	Timeout:   20 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
}

// Paths of the routes in testdata/routes.yaml.tmpl.
const (
	pathTickets  = "/v1/tickets"          // create_ticket
	pathOptional = "/optional/v1/tickets" // create_ticket_optional: key not required
	pathRelease  = "/release/v1/tickets"  // create_ticket_release: on_unknown_outcome release
	pathWait     = "/wait/v1/tickets"     // create_ticket_wait: concurrency wait
	pathLease    = "/lease/v1/tickets"    // create_ticket_lease: lock_lease 2s
	pathSlow     = "/slow/v1/tickets"     // create_ticket_slow: upstream timeout 300ms
	pathDead     = "/dead/v1/tickets"     // create_ticket_dead: upstream refuses connections
	pathDeclined = "/declined/v1/tickets" // create_ticket_committed_402: a 402 is committed
)

// The sandbox's side-effect counter behind every create_ticket route.
const ticketsEndpoint = "tickets.create_ticket"

// request is one call of the agent through the gateway.
type request struct {
	Method      string            // default POST
	Path        string            // default pathTickets
	Key         string            // the Idempotency-Key value, sent as is unless NoKey or Keys
	NoKey       bool              // send no Idempotency-Key header
	Keys        []string          // send one Idempotency-Key line per element
	Body        string            // the request body
	ContentType string            // default application/json when Body is not empty
	Header      map[string]string // more headers: tenant, actor, sandbox faults
	Chunked     bool              // send the body without Content-Length
	Ctx         context.Context   // default context.Background()
}

// response is what the gateway answered.
type response struct {
	Status  int
	Header  http.Header
	Body    []byte
	Problem *problem // the body, when it is application/problem+json
}

// problem is an RFC 9457 problem of the gateway (docs/contract.md §4).
type problem struct {
	Type                string `json:"type"`
	Title               string `json:"title"`
	Status              int    `json:"status"`
	Detail              string `json:"detail"`
	Decision            string `json:"decision"`
	Retryable           *bool  `json:"retryable"`
	IdempotencyKey      string `json:"idempotency_key"`
	Reason              string `json:"reason"`
	ExistingFingerprint string `json:"existing_fingerprint"`
	ReceivedFingerprint string `json:"received_fingerprint"`
	ExistingRemoteID    string `json:"existing_remote_id"`
}

// decision is the response's Idempotency-Decision header.
func (r response) decision() string { return r.Header.Get("Idempotency-Decision") }

// json decodes the body as a JSON object.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response body is not a JSON object: %v: %.300q", err, r.Body)
	}
	return m
}

// send makes one request to the gateway's proxy listener. It is safe to call from any goroutine.
func (g *gateway) send(req request) (response, error) {
	method, path := req.Method, req.Path
	if method == "" {
		method = http.MethodPost
	}
	if path == "" {
		path = pathTickets
	}
	ctx := req.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
		if req.Chunked {
			body = io.MultiReader(body) // hides the length: the client sends it chunked
		}
	}
	hr, err := http.NewRequestWithContext(ctx, method, g.proxy+path, body)
	if err != nil {
		return response{}, err
	}
	if req.Body != "" {
		ct := req.ContentType
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
	}
	switch {
	case req.Keys != nil:
		hr.Header["Idempotency-Key"] = req.Keys
	case !req.NoKey:
		hr.Header["Idempotency-Key"] = []string{req.Key}
	}
	for name, value := range req.Header {
		hr.Header.Set(name, value)
	}
	resp, err := client.Do(hr)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("reading the response body: %w", err)
	}
	r := response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/problem+json" {
		r.Problem = new(problem)
		if err := json.Unmarshal(b, r.Problem); err != nil {
			return r, fmt.Errorf("problem body: %w: %q", err, b)
		}
	}
	return r, nil
}

// do is send that fails the test on a transport error.
func (g *gateway) do(t *testing.T, req request) response {
	t.Helper()
	r, err := g.send(req)
	if err != nil {
		t.Fatalf("%s %s (key %q): %v", req.Method, req.Path, req.Key, err)
	}
	return r
}

// receipt is the admin API's view of a record (docs/contract.md §5).
type receipt struct {
	IdempotencyKey    string     `json:"idempotency_key"`
	Tenant            string     `json:"tenant"`
	Tool              string     `json:"tool"`
	EffectFingerprint string     `json:"effect_fingerprint"`
	State             string     `json:"state"`
	Actor             string     `json:"actor"`
	RemoteSystem      string     `json:"remote_system"`
	RemoteID          string     `json:"remote_id"`
	RemoteURL         string     `json:"remote_url"`
	ResponseStatus    int        `json:"response_status"`
	CommittedAt       *time.Time `json:"committed_at"`
	ExpiresAt         time.Time  `json:"expires_at"`
	Executions        int        `json:"executions"`
	ResponseBodyKept  *bool      `json:"response_body_kept"`
	Detail            string     `json:"detail"`
}

// recordPath is the admin API path of a record, its segments URL-escaped.
func recordPath(tenant, tool, key string) string {
	return "/v1/records/" + url.PathEscape(tenant) + "/" + url.PathEscape(tool) + "/" + url.PathEscape(key)
}

// record reads a record through the admin API; found is false on 404.
func (g *gateway) record(t *testing.T, tenant, tool, key string) (rec receipt, found bool) {
	t.Helper()
	resp, err := client.Get(g.admin + recordPath(tenant, tool, key))
	if err != nil {
		t.Fatalf("admin GET record: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return receipt{}, false
	default:
		t.Fatalf("admin GET %s: %d %s", recordPath(tenant, tool, key), resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("admin GET record: %v: %s", err, b)
	}
	return rec, true
}

// mustRecord reads a record of the default tenant that must exist.
func (g *gateway) mustRecord(t *testing.T, tool, key string) receipt {
	t.Helper()
	rec, found := g.record(t, "default", tool, key)
	if !found {
		t.Fatalf("no record for tool %s, key %q", tool, key)
	}
	return rec
}

// waitState polls the record of the default tenant until its state is state.
func (g *gateway) waitState(t *testing.T, tool, key, state string) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("record %s/%s to be %s", tool, key, state), func() bool {
		rec, found := g.record(t, "default", tool, key)
		return found && rec.State == state
	})
}

// adminDo sends a request to the admin API and returns status and body.
func (g *gateway) adminDo(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.admin+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// sandboxStats is the body of the sandbox's GET /_sandbox/stats: side effects, and requests
// (attempts, effects or not).
type sandboxStats struct {
	Total      int            `json:"total"`
	ByEndpoint map[string]int `json:"by_endpoint"`
	Requests   struct {
		Total      int            `json:"total"`
		ByEndpoint map[string]int `json:"by_endpoint"`
	} `json:"requests"`
	Cancelled struct {
		ByEndpoint map[string]int `json:"by_endpoint"`
	} `json:"cancelled"` // MCP tool calls the server saw cancelled (notifications/cancelled)
	InFlight *int `json:"in_flight"` // requests being served now; nil from a sandbox without it
}

// stats reads the sandbox's counters.
func (sb *sandbox) stats(t *testing.T) sandboxStats {
	t.Helper()
	resp, err := client.Get(sb.url + "/_sandbox/stats")
	if err != nil {
		t.Fatalf("sandbox stats: %v", err)
	}
	defer resp.Body.Close()
	var st sandboxStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("sandbox stats: %v", err)
	}
	return st
}

// script queues faults for the sandbox's next requests (POST /_sandbox/script).
func (sb *sandbox) script(t *testing.T, failNext string) {
	t.Helper()
	resp, err := client.Post(sb.url+"/_sandbox/script", "application/json", strings.NewReader(`{"fail_next":`+failNext+`}`))
	if err != nil {
		t.Fatalf("sandbox script: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sandbox script: %d %s", resp.StatusCode, b)
	}
}

// expectUp checks how many tickets the sandbox created: the upstream side effects ("Up×N").
func expectUp(t *testing.T, sb *sandbox, want int) {
	t.Helper()
	if got := sb.stats(t).ByEndpoint[ticketsEndpoint]; got != want {
		t.Errorf("upstream side effects: Up×%d, want Up×%d", got, want)
	}
}

// expectAttempts checks how many requests reached the sandbox's ticket endpoint.
func expectAttempts(t *testing.T, sb *sandbox, want int) {
	t.Helper()
	if got := sb.stats(t).Requests.ByEndpoint[ticketsEndpoint]; got != want {
		t.Errorf("upstream attempts: %d, want %d", got, want)
	}
}

// expectDecision checks the status and the Idempotency-Decision header; decision "" means the
// header must be absent.
func expectDecision(t *testing.T, r response, status int, decision string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d; body %.400s", r.Status, status, r.Body)
	}
	got := r.Header.Values("Idempotency-Decision")
	switch {
	case decision == "" && len(got) > 0:
		t.Errorf("Idempotency-Decision %q, want none", got)
	case decision != "" && (len(got) != 1 || got[0] != decision):
		t.Errorf("Idempotency-Decision %q, want %q", got, decision)
	}
}

// expectProblem checks a problem answer: status, Idempotency-Decision header (absent when
// decision is ""), and the problem's type name, status, decision ("rejected" when the header is
// absent) and retryable members.
func expectProblem(t *testing.T, r response, status int, name, decision string, retryable bool) {
	t.Helper()
	expectDecision(t, r, status, decision)
	p := r.Problem
	if p == nil {
		t.Fatalf("Content-Type %q, want application/problem+json; body %.400s", r.Header.Get("Content-Type"), r.Body)
	}
	if !strings.HasSuffix(p.Type, ":"+name) && !strings.HasSuffix(p.Type, "/"+name) {
		t.Errorf("problem type %q, want one ending in %q", p.Type, name)
	}
	if p.Status != status {
		t.Errorf("problem status %d, want %d", p.Status, status)
	}
	wantDecision := decision
	if wantDecision == "" {
		wantDecision = "rejected"
	}
	if p.Decision != wantDecision {
		t.Errorf("problem decision %q, want %q", p.Decision, wantDecision)
	}
	switch {
	case p.Retryable == nil:
		t.Errorf("problem has no retryable member")
	case *p.Retryable != retryable:
		t.Errorf("problem retryable %v, want %v", *p.Retryable, retryable)
	}
	if p.Title == "" || p.Detail == "" {
		t.Errorf("problem title %q, detail %q: want both", p.Title, p.Detail)
	}
}

// expectRetryAfter checks that the response carries a Retry-After of whole seconds.
func expectRetryAfter(t *testing.T, r response) {
	t.Helper()
	if v := r.Header.Get("Retry-After"); !regexp.MustCompile(`^[0-9]+$`).MatchString(v) {
		t.Errorf("Retry-After %q, want a number of seconds", v)
	}
}

var fingerprintPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// expectFingerprint checks the Idempotency-Fingerprint header and returns it.
func expectFingerprint(t *testing.T, r response) string {
	t.Helper()
	fp := r.Header.Get("Idempotency-Fingerprint")
	if !fingerprintPattern.MatchString(fp) {
		t.Errorf("Idempotency-Fingerprint %q, want sha256: and 64 hex digits", fp)
	}
	return fp
}

// expectReplayOf checks that r replays first: the stored status and body, the replay headers.
func expectReplayOf(t *testing.T, r, first response) {
	t.Helper()
	expectDecision(t, r, first.Status, "replay")
	if got := r.Header.Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("Idempotent-Replayed %q, want true", got)
	}
	if !bytes.Equal(r.Body, first.Body) {
		t.Errorf("replayed body\n%.400s\nwant the first response's\n%.400s", r.Body, first.Body)
	}
	if got, want := r.Header.Get("Content-Type"), first.Header.Get("Content-Type"); got != want {
		t.Errorf("replayed Content-Type %q, want %q", got, want)
	}
	if got, want := r.Header.Get("Idempotency-Fingerprint"), first.Header.Get("Idempotency-Fingerprint"); got != want {
		t.Errorf("replayed Idempotency-Fingerprint %q, want %q", got, want)
	}
}

// expectCreated checks a first execution that created a ticket, and returns the ticket's id.
func expectCreated(t *testing.T, r response) string {
	t.Helper()
	expectDecision(t, r, http.StatusCreated, "execute")
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("Idempotent-Replayed %q on an execution", r.Header.Get("Idempotent-Replayed"))
	}
	expectFingerprint(t, r)
	if r.Status != http.StatusCreated {
		t.FailNow()
	}
	id, _ := r.json(t)["id"].(string)
	if !strings.HasPrefix(id, "T-") {
		t.Errorf("ticket id %q, want T-…", id)
	}
	return id
}

// pending is a request sent from another goroutine.
type pending struct {
	done chan struct{}
	resp response
	err  error
}

// goSend sends req from a new goroutine; wait returns its response.
func goSend(g *gateway, req request) *pending {
	p := &pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.resp, p.err = g.send(req)
	}()
	return p
}

func (p *pending) wait(t *testing.T) response {
	t.Helper()
	<-p.done
	if p.err != nil {
		t.Fatalf("request: %v", p.err)
	}
	return p.resp
}
