package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/problem"
)

// boundedRoutes has a JSON route and a GraphQL route, each taking bodies of up to 4 MiB.
const boundedRoutes = `
upstreams:
  up: {url: %s}
defaults: {max_body_bytes: 4194304}
routes:
  - {name: create, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent}
  - {name: graphql, upstream: up, method: POST, path: /graphql, class: non_idempotent,
     fingerprint: {body: {format: graphql}}}
`

// sendTo posts body to url with key and reads the answer; failures are errors, so that any
// goroutine can call it.
func sendTo(url, key, body string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), header: resp.Header, body: string(b)}, nil
}

// problemIn decodes r's problem details.
func problemIn(t *testing.T, r reply) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("%d answer %q: %v", r.status, r.body, err)
	}
	return p
}

// parses is the value of idemgateway_body_parses_total{result} on reg.
func parses(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "idemgateway_body_parses_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// graphqlQuery returns a GraphQL request whose document is a query of n short fields, the
// document with the most syntax tree per byte: the slowest to parse.
func graphqlQuery(n int) string {
	var q strings.Builder
	q.WriteString(`{"query":"{`)
	for i := range n {
		fmt.Fprintf(&q, " f%d", i)
	}
	q.WriteString(`}"}`)
	return q.String()
}

// TestBodyTooComplex: a JSON body with more values than MaxBodyValues, or a GraphQL request
// whose values and document tokens are more, is answered 413 body-too-complex, not retryable,
// before any store or upstream call; at the budget it executes.
func TestBodyTooComplex(t *testing.T) {
	t.Parallel()
	up, executions := countingUpstream(t)
	store := &claimCounter{Store: openEmbedded(t)}
	reg := gateway.NewRegistry()
	srv, _, _ := newGatewayOn(t, store, fmt.Sprintf(boundedRoutes, up.URL), gateway.Options{MaxBodyValues: 6, Metrics: reg})
	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"json at the budget", "/v1/tickets", `{"a":[1,2,3],"b":null}`, http.StatusCreated},
		{"json over the budget", "/v1/tickets", `{"a":[1,2,3,4],"b":null}`, http.StatusRequestEntityTooLarge},
		{"graphql at the budget", "/graphql", `{"query":"{ a b }"}`, http.StatusCreated},                   // 3 values, 4 tokens: 7
		{"graphql over the budget", "/graphql", `{"query":"{ a b c }"}`, http.StatusRequestEntityTooLarge}, // 3 values, 5 tokens
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, claims := executions.Load(), store.claims.Load()
			r, err := sendTo(srv.URL+tc.path, "k-"+tc.name, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tc.status {
				t.Fatalf("status %d, want %d", r.status, tc.status)
			}
			if tc.status != http.StatusRequestEntityTooLarge {
				return
			}
			p := problemIn(t, r)
			if p["type"] != problem.TypePrefix+"body-too-complex" || p["retryable"] != false {
				t.Errorf("problem %v, want body-too-complex, not retryable", p)
			}
			if executions.Load() != before || store.claims.Load() != claims {
				t.Error("a body over the budget reached the store or the upstream")
			}
		})
	}
	if n := parses(t, reg, "too_complex"); n != 2 {
		t.Errorf("idemgateway_body_parses_total{result=too_complex} = %v, want 2", n)
	}
}

// TestParseGate: large bodies sent at once are parsed a few at a time within
// MaxInflightBytes. With no room to wait for, the ones that find the gate full are answered 503
// overloaded, retryable with Retry-After, before any store call, and their retry executes; with
// time to wait, every one executes. Small bodies sent meanwhile never wait or fail.
func TestParseGate(t *testing.T) {
	t.Parallel()
	body := graphqlQuery(90_000) // about 600 KB, the slowest kind of parse
	for _, tc := range []struct {
		name       string
		wait       time.Duration
		overloaded bool
	}{
		{"no time to wait", time.Nanosecond, true},
		// The large parses run one at a time: the last waits for all the others, seconds each
		// under -race on a loaded machine. Five minutes only bounds a hang.
		{"time to wait", 5 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up, _ := countingUpstream(t)
			reg := gateway.NewRegistry()
			// Room for one parse: a second waits or is refused, however many cores there are.
			srv, _, _ := newGatewayOn(t, openEmbedded(t), fmt.Sprintf(boundedRoutes, up.URL), gateway.Options{
				Metrics: reg, MaxInflightBytes: 60 << 20, ParseWait: tc.wait,
			})
			const large, small = 4, 20
			var wg sync.WaitGroup
			replies := make([]reply, large+small)
			errs := make([]error, large+small)
			for i := range large + small {
				wg.Go(func() {
					if i < large {
						replies[i], errs[i] = sendTo(srv.URL+"/graphql", fmt.Sprintf("large-%d", i), body)
					} else {
						replies[i], errs[i] = sendTo(srv.URL+"/v1/tickets", fmt.Sprintf("small-%d", i), `{"title":"x"}`)
					}
				})
			}
			wg.Wait()
			refused := 0
			for i, r := range replies {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				switch {
				case r.status == http.StatusCreated:
				case i < large && r.status == http.StatusServiceUnavailable:
					refused++
					p := problemIn(t, r)
					if p["type"] != problem.TypePrefix+"overloaded" || p["retryable"] != true || r.retryAfter != "1" {
						t.Errorf("problem %v, Retry-After %q: want overloaded, retryable, Retry-After 1", p, r.retryAfter)
					}
					if again, err := sendTo(srv.URL+"/graphql", fmt.Sprintf("large-%d", i), body); err != nil || again.status != http.StatusCreated {
						t.Errorf("the retry of an overloaded request: %d %v, want 201", again.status, err)
					}
				default:
					t.Errorf("request %d: %d %s", i, r.status, r.body)
				}
			}
			if tc.overloaded && refused == 0 {
				t.Error("no large body was refused with the gate full and no time to wait")
			}
			if !tc.overloaded && refused > 0 {
				t.Errorf("%d large bodies refused with time to wait", refused)
			}
			if n := parses(t, reg, "overloaded"); n != float64(refused) {
				t.Errorf("idemgateway_body_parses_total{result=overloaded} = %v, want %d", n, refused)
			}
			if n := parses(t, reg, "small"); n != small {
				t.Errorf("idemgateway_body_parses_total{result=small} = %v, want %d", n, small)
			}
			t.Logf("%d of %d large bodies refused; waited %v", refused, large, parses(t, reg, "waited"))
		})
	}
}
