// Package problem is how idemgateway says no over HTTP: RFC 9457 problem details
// (application/problem+json) with the members of docs/contract.md §4, and the sentinel errors
// whose kind picks each answer's status and type. The gateway's decisions, the admin API and the
// MCP front end's HTTP-level answers all write them; wrap a sentinel with %w to add a detail.
package problem

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
)

// Sentinel errors for the decisions of docs/contract.md §4 that answer with a problem. kindOf maps
// each to its HTTP status and problem type; wrap them with %w to add a precise detail.
var (
	ErrMissingKey       = errors.New("missing idempotency key")
	ErrMissingTenant    = errors.New("missing tenant")
	ErrInvalidKey       = errors.New("invalid idempotency key")
	ErrKeyMismatch      = errors.New("idempotency keys that differ")
	ErrBodyTooLarge     = errors.New("request body too large")
	ErrBodyTooComplex   = canonical.ErrBodyTooComplex
	ErrInvalidBody      = canonical.ErrInvalidBody
	ErrInvalidRequest   = errors.New("invalid request")
	ErrUnauthenticated  = errors.New("unauthenticated")
	ErrTenantMismatch   = errors.New("tenant mismatch")
	ErrActorMismatch    = errors.New("actor mismatch")
	ErrConflict         = errors.New("idempotency key reused with a different effect")
	ErrRulesChanged     = errors.New("fingerprint rules changed since the key was first used")
	ErrInProgress       = errors.New("a request with this idempotency key is in progress")
	ErrOutcomeUnknown   = errors.New("the outcome of the request with this idempotency key is unknown")
	ErrStoreUnavailable = errors.New("idempotency store unavailable")
	ErrOverloaded       = errors.New("gateway overloaded") // a body parse found no room in time
	ErrShuttingDown     = errors.New("gateway shutting down")
	ErrNoRoute          = errors.New("no route")
	ErrNoRecord         = errors.New("no record")
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrUpstream         = errors.New("upstream exchange failed")
	ErrUpstreamTimeout  = errors.New("upstream timed out")
)

// TypePrefix starts the type URI of every problem the gateway writes; the problem's name
// (e.g. "idempotency-key-reused") follows it.
const TypePrefix = "urn:idemgateway:problem:"

// kind is what a sentinel error makes of an answer.
type kind struct {
	status    int
	name      string
	title     string
	retryable bool
}

// kindOf maps an error to the problem the client gets. Errors of no known kind are the gateway's
// own fault: 500, not retryable.
func kindOf(err error) kind {
	kinds := []struct {
		err  error
		kind kind
	}{
		{ErrMissingKey, kind{http.StatusBadRequest, "missing-idempotency-key", "Missing idempotency key", false}},
		{ErrMissingTenant, kind{http.StatusBadRequest, "missing-tenant", "Missing tenant", false}},
		{ErrInvalidKey, kind{http.StatusBadRequest, "invalid-idempotency-key", "Invalid idempotency key", false}},
		{ErrKeyMismatch, kind{http.StatusBadRequest, "idempotency-key-mismatch", "Idempotency key mismatch", false}},
		{ErrBodyTooLarge, kind{http.StatusRequestEntityTooLarge, "body-too-large", "Request body too large", false}},
		{ErrBodyTooComplex, kind{http.StatusRequestEntityTooLarge, "body-too-complex", "Request body too complex", false}},
		{ErrInvalidBody, kind{http.StatusBadRequest, "invalid-body", "Invalid request body", false}},
		{ErrInvalidRequest, kind{http.StatusBadRequest, "invalid-request", "Invalid request", false}},
		{ErrUnauthenticated, kind{http.StatusUnauthorized, "unauthenticated", "Unauthenticated", false}},
		{ErrTenantMismatch, kind{http.StatusForbidden, "tenant-mismatch", "Tenant mismatch", false}},
		{ErrActorMismatch, kind{http.StatusForbidden, "actor-mismatch", "Actor mismatch", false}},
		{ErrConflict, kind{http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused", false}},
		{ErrRulesChanged, kind{http.StatusUnprocessableEntity, "fingerprint-rules-changed", "Fingerprint rules changed", false}},
		{ErrInProgress, kind{http.StatusConflict, "request-in-progress", "Request in progress", true}},
		{ErrOutcomeUnknown, kind{http.StatusConflict, "outcome-unknown", "Outcome unknown", false}},
		{ErrStoreUnavailable, kind{http.StatusServiceUnavailable, "store-unavailable", "Idempotency store unavailable", true}},
		{ErrOverloaded, kind{http.StatusServiceUnavailable, "overloaded", "Gateway overloaded", true}},
		{ErrShuttingDown, kind{http.StatusServiceUnavailable, "shutting-down", "Gateway shutting down", true}},
		{record.ErrCorrupt, kind{http.StatusInternalServerError, "corrupt-record", "Idempotency record unreadable", false}},
		{ErrNoRoute, kind{http.StatusNotFound, "no-route", "No route", false}},
		{ErrNoRecord, kind{http.StatusNotFound, "no-record", "No record", false}},
		{ErrMethodNotAllowed, kind{http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", false}},
		{ErrUpstreamTimeout, kind{http.StatusGatewayTimeout, "upstream-timeout", "Upstream timed out", false}},
		{ErrUpstream, kind{http.StatusBadGateway, "upstream-failed", "Upstream exchange failed", false}},
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return kind{http.StatusInternalServerError, "internal", "Internal gateway error", false}
}

// Retryable reports whether the answer to err says a retry may succeed (a request in progress, a
// store unavailable, a gateway overloaded).
func Retryable(err error) bool { return kindOf(err).retryable }

// Problem is an RFC 9457 problem details object with the members of docs/contract.md §4.
type Problem struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Detail         string `json:"detail"`
	Decision       string `json:"decision,omitempty"`
	Retryable      bool   `json:"retryable"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`

	// Members of the 422 conflict.
	Reason              string `json:"reason,omitempty"`
	ExistingFingerprint string `json:"existing_fingerprint,omitempty"`
	ReceivedFingerprint string `json:"received_fingerprint,omitempty"`
	ExistingRemoteID    string `json:"existing_remote_id,omitempty"`
	// DifferingFields name the fields whose values differ between the request that first used
	// the key and this one, never the values (canonical.Canonicalizer.DifferingFields): inside
	// the body, RFC 6901 JSON Pointers into the request body as the route writes them
	// ("/fields/summary" for an included pointer, "/fields/summary/lang" deeper inside it,
	// "/title" on a whole-body route, "/params/arguments/title" in a JSON-RPC body); "body" when
	// the body differs as a whole; outside it, the part without a leading slash: "method",
	// "path/<parameter>", "query/<name>", "headers/<lower-case name>". Sorted, at most
	// maxDifferingFields; absent when the record kept no document.
	DifferingFields []string `json:"differing_fields,omitempty"`
}

// MaxDifferingFields bounds the differing_fields of a 422; the last entry is then
// canonical.TruncatedMarker.
const MaxDifferingFields = 32

// New builds the problem for err; detail is err's message.
func New(err error, decision, key string) *Problem {
	k := kindOf(err)
	return &Problem{
		Type:           TypePrefix + k.name,
		Title:          k.title,
		Status:         k.status,
		Detail:         err.Error(),
		Decision:       decision,
		Retryable:      k.retryable,
		IdempotencyKey: key,
	}
}

// Write sends p as application/problem+json. A retryable problem (a 409 request-in-progress, a
// 503) carries Retry-After when retryAfterSeconds is positive.
func (p *Problem) Write(w http.ResponseWriter, retryAfterSeconds int) {
	body, _ := json.Marshal(p) // a struct of strings, ints and bools always marshals
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	if p.Retryable && retryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
