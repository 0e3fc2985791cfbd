package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// Client is the agent's HTTP Client. Its transport is shared by all tests; requests that must
// arrive at the same moment get connections of their own from its pool.
var Client = &http.Client{
	Timeout:   20 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
}

// Paths of the routes in testdata/routes.yaml.tmpl.
const (
	PathTickets  = "/v1/tickets"          // create_ticket
	pathOptional = "/optional/v1/tickets" // create_ticket_optional: key not required
	pathRelease  = "/release/v1/tickets"  // create_ticket_release: on_unknown_outcome release
	PathWait     = "/wait/v1/tickets"     // create_ticket_wait: concurrency wait
	pathLease    = "/lease/v1/tickets"    // create_ticket_lease: lock_lease 2s
	pathSlow     = "/slow/v1/tickets"     // create_ticket_slow: upstream timeout 300ms
	pathDead     = "/dead/v1/tickets"     // create_ticket_dead: upstream refuses connections
	pathDeclined = "/declined/v1/tickets" // create_ticket_committed_402: a 402 is committed
	pathForward  = "/forward/v1/tickets"  // create_ticket_forward: forward_key X-Sandbox-Idempotency-Key
)

// The sandbox's side-effect counter behind every create_ticket route.
const TicketsEndpoint = "tickets.create_ticket"

// Request is one call of the agent through the gateway.
type Request struct {
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

// Response is what the gateway answered.
type Response struct {
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

// Decision is the response's Idempotency-Decision header.
func (r Response) Decision() string { return r.Header.Get("Idempotency-Decision") }

// json decodes the body as a JSON object.
func (r Response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response body is not a JSON object: %v: %.300q", err, r.Body)
	}
	return m
}

// Receipt is the admin API's view of a record (docs/contract.md §5).
type Receipt struct {
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
