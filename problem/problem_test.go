package problem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgateway/idemgateway/record"
)

func TestProblemOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err       error
		status    int
		name      string
		retryable bool
	}{
		{ErrMissingKey, 400, "missing-idempotency-key", false},
		{ErrInvalidKey, 400, "invalid-idempotency-key", false},
		{ErrBodyTooLarge, 413, "body-too-large", false},
		{ErrBodyTooComplex, 413, "body-too-complex", false},
		{ErrInvalidBody, 400, "invalid-body", false},
		{ErrConflict, 422, "idempotency-key-reused", false},
		{ErrUnauthenticated, 401, "unauthenticated", false},
		{ErrTenantMismatch, 403, "tenant-mismatch", false},
		{ErrActorMismatch, 403, "actor-mismatch", false},
		{ErrInProgress, 409, "request-in-progress", true},
		{ErrOutcomeUnknown, 409, "outcome-unknown", false},
		{ErrStoreUnavailable, 503, "store-unavailable", true},
		{ErrOverloaded, 503, "overloaded", true},
		{ErrShuttingDown, 503, "shutting-down", true},
		{record.ErrCorrupt, 500, "corrupt-record", false},
		{fmt.Errorf("redisstore: claim %q: %w: hash has no state field", "k", record.ErrCorrupt), 500, "corrupt-record", false},
		{ErrNoRoute, 404, "no-route", false},
		{ErrUpstreamTimeout, 504, "upstream-timeout", false},
		{ErrUpstream, 502, "upstream-failed", false},
		{fmt.Errorf("wrapped: %w", ErrConflict), 422, "idempotency-key-reused", false},
		{fmt.Errorf("anything else"), 500, "internal", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			New(tt.err, "rejected", "k1").Write(w, 1)
			if w.Code != tt.status {
				t.Errorf("status = %d, want %d", w.Code, tt.status)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var p map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p["type"] != TypePrefix+tt.name || p["status"] != float64(tt.status) ||
				p["retryable"] != tt.retryable || p["detail"] != tt.err.Error() || p["idempotency_key"] != "k1" {
				t.Errorf("problem = %v", p)
			}
			if got := Retryable(tt.err); got != tt.retryable {
				t.Errorf("Retryable = %v, want %v", got, tt.retryable)
			}
			if got := w.Header().Get("Retry-After") != ""; got != tt.retryable {
				t.Errorf("Retry-After present = %v, want %v", got, tt.retryable)
			}
			if w.Code == http.StatusInternalServerError && p["title"] == "" {
				t.Errorf("no title")
			}
		})
	}
}
