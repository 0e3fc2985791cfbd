package admin

import (
	"encoding/json"
	"net/http"
	"time"
)

// Activity is what a gateway process is doing now (Pipeline.Activity), served by GET /v1/activity
// for the operator console: its own calls and writes, not those of other replicas.
type Activity struct {
	InFlight  []Call         // upstream calls under way, oldest first
	Pending   []PendingWrite // settle writes the store failed, retried in the background, oldest first
	Decisions []Minute       // the last 60 minutes, oldest first, the current (partial) one last
}

// Record names a record as the records API addresses it.
type Record struct {
	Tenant          string `json:"tenant"`
	Tool            string `json:"tool"`
	IdempotencyKey  string `json:"idempotency_key"`
	CredentialScope string `json:"credential_scope,omitempty"`
}

// Call is an upstream call under way.
type Call struct {
	Record
	StartedAt time.Time `json:"started_at"`
}

// PendingWrite is a settle write retried in the background: its record answered
// Idempotency-Receipt: pending (commit), or was to be freed (release) or marked outcome_unknown
// (mark_unknown) when the store failed.
type PendingWrite struct {
	Record
	Op    string    `json:"op"` // commit, release or mark_unknown
	Since time.Time `json:"since"`
}

// Minute is the decisions of one minute, by decision (execute, replay, conflict, in_progress,
// outcome_unknown, rejected), as counted by idemgateway_decisions_total.
type Minute struct {
	Start     time.Time      `json:"start"`
	Decisions map[string]int `json:"decisions"`
}

// maxActivityItems bounds each list of GET /v1/activity: the oldest are served, and the count
// says how many there are.
const maxActivityItems = 100

// activityPage is the answer of GET /v1/activity.
type activityPage struct {
	InFlight           []Call         `json:"in_flight"`
	InFlightCount      int            `json:"in_flight_count"`
	Pending            []PendingWrite `json:"pending"`
	PendingCount       int            `json:"pending_count"`
	DecisionsPerMinute []Minute       `json:"decisions_per_minute"`
}

func (a *admin) activity(w http.ResponseWriter, _ *http.Request) {
	act := a.pipeline.Activity()
	page := activityPage{InFlight: oldest(act.InFlight), InFlightCount: len(act.InFlight), Pending: oldest(act.Pending),
		PendingCount: len(act.Pending), DecisionsPerMinute: act.Decisions}
	if page.DecisionsPerMinute == nil {
		page.DecisionsPerMinute = []Minute{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(page)
}

// oldest returns the first maxActivityItems of list (oldest first), never nil.
func oldest[T any](list []T) []T {
	if len(list) > maxActivityItems {
		list = list[:maxActivityItems]
	}
	if list == nil {
		list = []T{}
	}
	return list
}
