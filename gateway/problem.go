package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
)

// Sentinel errors for the decisions of docs/contract.md §4 that answer with a problem. problemOf maps each
// to its HTTP status and problem type; wrap them with %w to add a precise detail.
var (
	ErrMissingKey       = errors.New("missing idempotency key")
	ErrMissingTenant    = errors.New("missing tenant")
	ErrInvalidKey       = errors.New("invalid idempotency key")
	ErrBodyTooLarge     = errors.New("request body too large")
	ErrBodyTooComplex   = canonical.ErrBodyTooComplex
	ErrInvalidBody      = canonical.ErrInvalidBody
	ErrInvalidRequest   = errors.New("invalid request")
	ErrUnauthenticated  = errors.New("unauthenticated")
	ErrTenantMismatch   = errors.New("tenant mismatch")
	ErrActorMismatch    = errors.New("actor mismatch")
	ErrConflict         = errors.New("idempotency key reused with a different effect")
	ErrInProgress       = errors.New("a request with this idempotency key is in progress")
	ErrOutcomeUnknown   = errors.New("the outcome of the request with this idempotency key is unknown")
	ErrStoreUnavailable = errors.New("idempotency store unavailable")
	ErrOverloaded       = errors.New("gateway overloaded") // a body parse found no room in time (parsegate.go)
	ErrNoRoute          = errors.New("no route")
	ErrNoRecord         = errors.New("no record")
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrUpstream         = errors.New("upstream exchange failed")
	ErrUpstreamTimeout  = errors.New("upstream timed out")
)

// ProblemTypePrefix starts the type URI of every problem the gateway writes; the problem's name
// (e.g. "idempotency-key-reused") follows it.
const ProblemTypePrefix = "urn:idemgateway:problem:"

type problemKind struct {
	status    int
	name      string
	title     string
	retryable bool
}

// problemOf maps an error to the problem the client gets. Errors of no known kind are the gateway's
// own fault: 500, not retryable.
func problemOf(err error) problemKind {
	kinds := []struct {
		err  error
		kind problemKind
	}{
		{ErrMissingKey, problemKind{http.StatusBadRequest, "missing-idempotency-key", "Missing idempotency key", false}},
		{ErrMissingTenant, problemKind{http.StatusBadRequest, "missing-tenant", "Missing tenant", false}},
		{ErrInvalidKey, problemKind{http.StatusBadRequest, "invalid-idempotency-key", "Invalid idempotency key", false}},
		{ErrBodyTooLarge, problemKind{http.StatusRequestEntityTooLarge, "body-too-large", "Request body too large", false}},
		{ErrBodyTooComplex, problemKind{http.StatusRequestEntityTooLarge, "body-too-complex", "Request body too complex", false}},
		{ErrInvalidBody, problemKind{http.StatusBadRequest, "invalid-body", "Invalid request body", false}},
		{ErrInvalidRequest, problemKind{http.StatusBadRequest, "invalid-request", "Invalid request", false}},
		{ErrUnauthenticated, problemKind{http.StatusUnauthorized, "unauthenticated", "Unauthenticated", false}},
		{ErrTenantMismatch, problemKind{http.StatusForbidden, "tenant-mismatch", "Tenant mismatch", false}},
		{ErrActorMismatch, problemKind{http.StatusForbidden, "actor-mismatch", "Actor mismatch", false}},
		{ErrConflict, problemKind{http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused", false}},
		{ErrInProgress, problemKind{http.StatusConflict, "request-in-progress", "Request in progress", true}},
		{ErrOutcomeUnknown, problemKind{http.StatusConflict, "outcome-unknown", "Outcome unknown", false}},
		{ErrStoreUnavailable, problemKind{http.StatusServiceUnavailable, "store-unavailable", "Idempotency store unavailable", true}},
		{ErrOverloaded, problemKind{http.StatusServiceUnavailable, "overloaded", "Gateway overloaded", true}},
		{record.ErrCorrupt, problemKind{http.StatusInternalServerError, "corrupt-record", "Idempotency record unreadable", false}},
		{ErrNoRoute, problemKind{http.StatusNotFound, "no-route", "No route", false}},
		{ErrNoRecord, problemKind{http.StatusNotFound, "no-record", "No record", false}},
		{ErrMethodNotAllowed, problemKind{http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", false}},
		{ErrUpstreamTimeout, problemKind{http.StatusGatewayTimeout, "upstream-timeout", "Upstream timed out", false}},
		{ErrUpstream, problemKind{http.StatusBadGateway, "upstream-failed", "Upstream exchange failed", false}},
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return problemKind{http.StatusInternalServerError, "internal", "Internal gateway error", false}
}

// problem is an RFC 9457 problem details object with the members of docs/contract.md §4.
type problem struct {
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

// maxDifferingFields bounds the differing_fields of a 422; the last entry is then
// canonical.TruncatedMarker.
const maxDifferingFields = 32

// newProblem builds the problem for err; detail is err's message.
func newProblem(err error, decision, key string) *problem {
	k := problemOf(err)
	return &problem{
		Type:           ProblemTypePrefix + k.name,
		Title:          k.title,
		Status:         k.status,
		Detail:         err.Error(),
		Decision:       decision,
		Retryable:      k.retryable,
		IdempotencyKey: key,
	}
}

// write sends p as application/problem+json. A 409 request-in-progress and a 503 carry Retry-After.
func (p *problem) write(w http.ResponseWriter, retryAfterSeconds int) {
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
