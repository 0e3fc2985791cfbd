package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idemgateway/idemgateway/routes"
)

// Decisions, as sent in the Idempotency-Decision header and the agent.idempotency.decision span
// attribute (contract §4, §6).
const (
	DecisionExecute        = "execute"
	DecisionReplay         = "replay"
	DecisionConflict       = "conflict"
	DecisionInProgress     = "in_progress"
	DecisionOutcomeUnknown = "outcome_unknown"
	DecisionRejected       = "rejected"
)

// Receipt is what the gateway tells of one idempotency record (contract §5), as served by the
// admin API. Times are UTC, RFC 3339.
type Receipt struct {
	IdempotencyKey string `json:"idempotency_key"`
	Tenant         string `json:"tenant"`
	Tool           string `json:"tool"`
	// CredentialScope is the hash of the caller's credential on routes with scope.credential;
	// the admin API addresses such a record with ?credential=<this>.
	CredentialScope   string     `json:"credential_scope,omitempty"`
	EffectFingerprint string     `json:"effect_fingerprint"`
	State             string     `json:"state"` // one of the State constants
	Actor             string     `json:"actor,omitempty"`
	RemoteSystem      string     `json:"remote_system"` // the upstream's name in the routes file
	RemoteID          string     `json:"remote_id,omitempty"`
	RemoteURL         string     `json:"remote_url,omitempty"`
	ResponseStatus    int        `json:"response_status,omitempty"`
	CommittedAt       *time.Time `json:"committed_at,omitempty"`
	ExpiresAt         time.Time  `json:"expires_at"`
	Executions        int        `json:"executions"` // how many times the upstream was called for this key
	// ResponseBodyKept is false when the committed response's body was larger than the gateway
	// keeps (Options.MaxReceiptBodyBytes) or arrived broken: replays then carry no body.
	ResponseBodyKept bool `json:"response_body_kept"`
	// Detail says why an outcome is unknown.
	Detail string `json:"detail,omitempty"`
}

// record is the payload the gateway keeps in the store for one key: the receipt (without its
// state, which the store owns), the owner token of the current execution, and the stored response.
type record struct {
	Receipt
	Owner     string          `json:"owner"`
	StartedAt time.Time       `json:"started_at"`
	Response  *storedResponse `json:"response,omitempty"`
	// Document is the canonical document of the request that claimed the key, kept so that a
	// conflict can name the fields that differ; absent when larger than MaxRecordDocumentBytes.
	Document json.RawMessage `json:"document,omitempty"`
}

// MaxRecordDocumentBytes bounds the canonical document a record keeps (64 KiB). A request whose
// document is larger still gets its fingerprint checked; its conflicts carry no differing_fields.
const MaxRecordDocumentBytes = 64 << 10

// storedResponse is what a replay sends: the upstream's status, filtered headers and body.
type storedResponse struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

func (rec *record) encode() []byte {
	b, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("gateway: encoding a record: %v", err)) // strings, ints, times and bytes always encode
	}
	return b
}

func decodeRecord(state string, payload []byte) (*record, error) {
	rec := new(record)
	if err := json.Unmarshal(payload, rec); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	rec.State = state
	return rec, nil
}

// storedHeader returns the headers of an upstream response that a replay repeats: those of
// routes.DefaultReplayHeaders and of the route's receipt.replay_headers (an allow-list), less any
// header that routes.NeverReplayed names or the response's Connection header lists.
func storedHeader(h http.Header, extra []string) http.Header {
	out := make(http.Header)
	connection := map[string]bool{}
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			connection[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
		}
	}
	for _, list := range [][]string{routes.DefaultReplayHeaders, extra} {
		for _, name := range list {
			if values, ok := h[name]; ok && !connection[name] && !routes.NeverReplayed(name) {
				out[name] = append([]string(nil), values...)
			}
		}
	}
	return out
}
