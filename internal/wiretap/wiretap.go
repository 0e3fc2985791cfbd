// Package wiretap records the HTTP side of a gateway's answers to an MCP client: for each
// tools/call POST, the status, Idempotency-Decision, Idempotent-Replayed, Idempotency-Fingerprint,
// Mcp-Session-Id and Content-Type of the answer, and the statuses of the answers to DELETE (the end
// of a session). The MCP SDK clients hand a program the JSON-RPC result of a call and keep the
// HTTP answer that carried it to themselves; a Tap, the transport of the client's http.Client,
// keeps what the gateway said there, for the demo to print and the tests to check.
package wiretap

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
)

// Answer is the HTTP side of the gateway's answer to one tools/call POST.
type Answer struct {
	Status      int
	Decision    string // Idempotency-Decision; "" when the gateway did not guard the call
	Replayed    string // Idempotent-Replayed: "true" on a replay
	Fingerprint string // Idempotency-Fingerprint
	SessionID   string // Mcp-Session-Id
	ContentType string
}

// Tap is an http.RoundTripper that records the answers to tools/call POSTs and DELETEs that pass
// through it, in the order they arrive. A request that fails without an answer records nothing.
// It is safe for concurrent use.
type Tap struct {
	next    http.RoundTripper
	mu      sync.Mutex
	answers []Answer
	deletes []int
}

// New returns a Tap that sends requests on next (nil: http.DefaultTransport).
func New(next http.RoundTripper) *Tap {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Tap{next: next}
}

// RoundTrip sends req on the next transport and records its answer when req is a tools/call POST
// (told by its body, which it reads and gives back to the request) or a DELETE.
func (t *Tap) RoundTrip(req *http.Request) (*http.Response, error) {
	isCall := false
	if req.Method == http.MethodPost && req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		isCall = isToolsCall(b)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case isCall:
		t.answers = append(t.answers, Answer{
			Status:      resp.StatusCode,
			Decision:    resp.Header.Get("Idempotency-Decision"),
			Replayed:    resp.Header.Get("Idempotent-Replayed"),
			Fingerprint: resp.Header.Get("Idempotency-Fingerprint"),
			SessionID:   resp.Header.Get("Mcp-Session-Id"),
			ContentType: resp.Header.Get("Content-Type"),
		})
	case req.Method == http.MethodDelete:
		t.deletes = append(t.deletes, resp.StatusCode)
	}
	return resp, nil
}

// isToolsCall reports whether body is one JSON-RPC message whose method is tools/call; a batch or
// a message of another method (notifications/cancelled, tools/list) is not.
func isToolsCall(body []byte) bool {
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call"
}

// Answers are the answers to the tools/call POSTs so far, oldest first.
func (t *Tap) Answers() []Answer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.answers)
}

// Last is the answer to the latest tools/call POST; the zero Answer (Status 0) when there was
// none.
func (t *Tap) Last() Answer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.answers) == 0 {
		return Answer{}
	}
	return t.answers[len(t.answers)-1]
}

// Deletes are the statuses of the answers to DELETE requests so far, oldest first.
func (t *Tap) Deletes() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.deletes)
}
