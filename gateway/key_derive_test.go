package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgateway/idemgateway/gateway"
)

// TestKeyDerivedFromTheOperation: without a key header, key.from and key.derive name the
// operation, so any worker retrying "the ticket for incident X" hits the same key; a sent key
// always wins; a missing field is a 400 naming it; a conflict lists the differing fields.
func TestKeyDerivedFromTheOperation(t *testing.T) {
	t.Parallel()
	var executions atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := executions.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-%d"}`, n)
	}))
	t.Cleanup(upstream.Close)
	srv, _, _ := newGatewayYAML(t, openEmbedded, `
upstreams:
  tickets: {url: `+upstream.URL+`}
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/incidents/{incident}/tickets
    class: non_idempotent
    key:
      from: "body:/meta/key"
      derive: "{tenant}:{path:incident}:{body:/kind}:create_ticket"
    fingerprint: {body: {exclude: [/meta]}}
    receipt: {remote_id: /id}
`, gateway.Options{})

	send := func(incident, key, body string) reply {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/incidents/"+incident+"/tickets", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant-ID", "acme")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		a := reply{status: resp.StatusCode, decision: resp.Header.Get("Idempotency-Decision")}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &a.problem); err != nil {
				t.Fatal(err)
			}
		}
		return a
	}

	steps := []struct {
		name, incident, key, body string
		status                    int
		decision                  string
		check                     func(map[string]any) bool
	}{
		{name: "derived key executes", incident: "INC-1", body: `{"kind":"outage","title":"db down"}`, status: 201, decision: "execute"},
		{name: "another worker, same operation: replay", incident: "INC-1", body: `{"title":"db down","kind":"outage"}`, status: 201, decision: "replay"},
		{name: "same operation, different effect: conflict naming the field", incident: "INC-1", body: `{"kind":"outage","title":"db up"}`,
			status: 422, decision: "conflict", check: func(p map[string]any) bool {
				fields, _ := p["differing_fields"].([]any)
				return p["idempotency_key"] == "acme:INC-1:outage:create_ticket" && len(fields) == 1 && fields[0] == "/title"
			}},
		{name: "another incident is another operation", incident: "INC-2", body: `{"kind":"outage","title":"db down"}`, status: 201, decision: "execute"},
		{name: "a sent key wins", incident: "INC-1", key: "mine", body: `{"kind":"outage","title":"db down"}`, status: 201, decision: "execute"},
		{name: "key.from reads the body", incident: "INC-3", body: `{"meta":{"key":"k-from"},"kind":"x"}`, status: 201, decision: "execute"},
		{name: "key.from again: replay", incident: "INC-3", body: `{"kind":"x","meta":{"key":"k-from"}}`, status: 201, decision: "replay"},
		{name: "key.from with an invalid key", incident: "INC-3", body: `{"meta":{"key":"clé"},"kind":"x"}`, status: 400, check: func(p map[string]any) bool {
			return strings.HasSuffix(p["type"].(string), "invalid-idempotency-key")
		}},
		{name: "a missing field is named", incident: "INC-4", body: `{"title":"no kind"}`, status: 400, check: func(p map[string]any) bool {
			return strings.HasSuffix(p["type"].(string), "missing-idempotency-key") &&
				strings.Contains(p["detail"].(string), "field {body:/kind} is missing")
		}},
	}
	for _, s := range steps {
		a := send(s.incident, s.key, s.body)
		if a.status != s.status || a.decision != s.decision || (s.check != nil && !s.check(a.problem)) {
			t.Fatalf("%s: %d %q %v; want %d %q", s.name, a.status, a.decision, a.problem, s.status, s.decision)
		}
	}
	if n := executions.Load(); n != 4 {
		t.Fatalf("upstream executions = %d, want 4", n)
	}
}
