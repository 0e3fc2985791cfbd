package gateway_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/allocs"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// memoryStore is a record.Store in a map, for TestAllocationsPerCall alone: it allocates next to
// nothing, so what the test counts is the gateway's. It keeps no leases or expiries (the test
// settles every call at once) and is not a store to test the gateway's promises on: those run on
// the real ones (recordtest, stores_test.go).
type memoryStore struct {
	mu      sync.Mutex
	records map[string]*memoryRecord
}

type memoryRecord struct {
	state, owner string
	payload      record.Payload
}

func (s *memoryStore) Claim(_ context.Context, key, owner string, payload []byte, _, _ time.Duration) (bool, string, record.Payload, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[key]; ok {
		if len(r.payload.Settle) > 0 { // a settled record: its settle part alone (record.Store.Claim)
			return false, r.state, record.Payload{Settle: r.payload.Settle}, nil
		}
		return false, r.state, r.payload, nil
	}
	s.records[key] = &memoryRecord{state: record.StateInProgress, owner: owner, payload: record.Payload{Claim: payload}}
	return true, record.StateInProgress, record.Payload{Claim: payload}, nil
}

// settle moves the record at key, owned by owner, to state with settle as its settle part.
func (s *memoryStore) settle(key, owner, state string, settle []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[key]
	if !ok || r.owner != owner {
		return false
	}
	r.state, r.payload.Settle = state, settle
	return true
}

func (s *memoryStore) Commit(_ context.Context, key, owner string, settle []byte, _ time.Duration) (bool, error) {
	return s.settle(key, owner, record.StateCommitted, settle), nil
}

func (s *memoryStore) MarkUnknown(_ context.Context, key, owner string, settle []byte, _ time.Duration) (bool, error) {
	return s.settle(key, owner, record.StateUnknown, settle), nil
}

func (s *memoryStore) Release(_ context.Context, key, owner string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[key]; !ok || r.owner != owner {
		return false, nil
	}
	delete(s.records, key)
	return true, nil
}

func (s *memoryStore) Renew(context.Context, string, string, time.Duration) (bool, error) {
	return true, nil
}

func (s *memoryStore) Reclaim(context.Context, string, string, string, []byte, time.Duration, time.Duration) (bool, error) {
	return false, nil
}

func (s *memoryStore) Get(_ context.Context, key string) (string, record.Payload, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[key]; ok {
		return r.state, r.payload, nil
	}
	return "", record.Payload{}, nil
}

func (s *memoryStore) ListUnknown(context.Context, string, string, int) ([]string, []record.Payload, string, error) {
	return nil, nil, "", nil
}

func (s *memoryStore) Delete(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.records[key]
	delete(s.records, key)
	return ok, nil
}

func (s *memoryStore) Ping(context.Context) error { return nil }

// answerTransport answers every upstream call in the process: 201 and answer, after reading the
// request's body, as an upstream would.
type answerTransport struct{ answer []byte }

func (t answerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	_ = r.Body.Close()
	return &http.Response{StatusCode: http.StatusCreated, ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(t.answer))}},
		ContentLength: int64(len(t.answer)), Body: io.NopCloser(bytes.NewReader(t.answer))}, nil
}

// Allocations per call beyond a bare handler's, at most (docs/performance.md#records-buffers-and-allocations):
// the budgets of a first execution and of a replay of a 1 KiB JSON request and answer.
const (
	maxAllocsPerExecute = 150
	maxAllocsPerReplay  = 60
)

// TestAllocationsPerCall keeps the gateway's allocations per call from growing back: a first
// execution and a replay through its handler, with the store in memory and the upstream answered
// in the process, less those of a bare handler that reads the same request and writes the same
// answer (the request and recorder the test makes, the answer's write): what is left is the
// gateway's own work. Allocation counts are not timings: the least of 50 calls (internal/allocs)
// is the same on a busy machine. The race detector allocates on its own, so the test does not run
// under -race.
func TestAllocationsPerCall(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's allocations would be counted")
	}
	answer := []byte(`{"id":"T-1","text":"` + strings.Repeat("x", 1<<10-22) + `"}`)
	cfg, err := routes.Parse("routes.yaml", []byte(`
upstreams:
  tickets: {url: "http://tickets.invalid"}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent, receipt: {remote_id: /id}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, &memoryStore{records: map[string]*memoryRecord{}}, gateway.Options{Fronts: fronts,
		Transport: answerTransport{answer}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	})
	body := `{"title":"` + strings.Repeat("y", 1<<10-12) + `"}`
	call := func(h http.Handler, key string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/tickets", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated || rec.Body.Len() != len(answer) {
			t.Fatalf("%s: %d, %d bytes", key, rec.Code, rec.Body.Len())
		}
	}
	keys := make([]string, 60) // made before counting
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	n := 0
	base := allocs.Objects(50, func() { call(bare, keys[0]) })
	execute := allocs.Objects(50, func() { call(gw, keys[n]); n++ })
	replay := allocs.Objects(50, func() { call(gw, keys[0]) })
	t.Logf("allocations per call: bare handler %d, execute %d, replay %d", base, execute, replay)
	if execute-base > maxAllocsPerExecute {
		t.Errorf("a first execution makes %d allocations more than a bare handler, want at most %d", execute-base, maxAllocsPerExecute)
	}
	if replay-base > maxAllocsPerReplay {
		t.Errorf("a replay makes %d allocations more than a bare handler, want at most %d", replay-base, maxAllocsPerReplay)
	}
}
