package wiretap_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgateway/idemgateway/internal/wiretap"
)

// server answers as a gateway would: a tools/call POST with the idempotency headers (a replay
// when its body says "retry"), DELETE with 204, anything else with 202; it keeps the bodies it
// got, to show that the tap gives each request its body back.
func server(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case strings.Contains(string(b), `"method":"tools/call"`) && !strings.HasPrefix(string(b), "["):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotency-Fingerprint", "sha256:f1")
			if strings.Contains(string(b), "retry") {
				w.Header().Set("Idempotency-Decision", "replay")
				w.Header().Set("Idempotent-Replayed", "true")
			} else {
				w.Header().Set("Idempotency-Decision", "execute")
				w.Header().Set("Mcp-Session-Id", "s1")
			}
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

// TestTapRecordsToolsCallsAndDeletes: the tap records the answers to tools/call POSTs and the
// statuses of DELETEs, in order, and nothing of other requests; every request reaches the server
// with its body.
func TestTapRecordsToolsCallsAndDeletes(t *testing.T) {
	srv, bodies := server(t)
	tap := wiretap.New(nil)
	client := &http.Client{Transport: tap}
	if a := tap.Last(); a != (wiretap.Answer{}) {
		t.Errorf("Last before any call: %+v, want the zero Answer", a)
	}
	sent := []struct{ method, body string }{
		{http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket"}}`},
		{http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"tools/call"}}`},
		{http.MethodPost, `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_ticket"}}]`},
		{http.MethodGet, ""},
		{http.MethodPost, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_ticket","arguments":{"note":"retry"}}}`},
		{http.MethodDelete, ""},
	}
	for _, s := range sent {
		req, err := http.NewRequest(s.method, srv.URL+"/mcp", strings.NewReader(s.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []wiretap.Answer{
		{Status: 200, Decision: "execute", Fingerprint: "sha256:f1", SessionID: "s1", ContentType: "application/json"},
		{Status: 200, Decision: "replay", Replayed: "true", Fingerprint: "sha256:f1", ContentType: "application/json"},
	}
	if got := tap.Answers(); !reflect.DeepEqual(got, want) {
		t.Errorf("Answers:\n%+v\nwant\n%+v", got, want)
	}
	if got := tap.Last(); got != want[1] {
		t.Errorf("Last: %+v, want %+v", got, want[1])
	}
	if got := tap.Deletes(); !reflect.DeepEqual(got, []int{http.StatusNoContent}) {
		t.Errorf("Deletes: %v, want [204]", got)
	}
	var wantBodies []string
	for _, s := range sent {
		wantBodies = append(wantBodies, s.body)
	}
	if got := bodies(); !reflect.DeepEqual(got, wantBodies) {
		t.Errorf("the server got bodies\n%q\nwant\n%q", got, wantBodies)
	}
}

// TestTapRecordsNothingOfAFailedRequest: a tools/call that gets no answer (the server is gone)
// returns the transport's error and records nothing.
func TestTapRecordsNothingOfAFailedRequest(t *testing.T) {
	srv, _ := server(t)
	srv.Close()
	tap := wiretap.New(http.DefaultTransport)
	_, err := (&http.Client{Transport: tap}).Post(srv.URL+"/mcp", "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket"}}`))
	if err == nil {
		t.Fatal("a POST to a closed server answered")
	}
	if got := tap.Answers(); len(got) != 0 {
		t.Errorf("Answers %+v after a failed request, want none", got)
	}
}
