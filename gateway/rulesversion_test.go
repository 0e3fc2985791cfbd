package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/routes"
)

// rulesYAML is a create_ticket route in front of upstream whose fingerprint leaves out exclude.
func rulesYAML(upstream, exclude string) string {
	return fmt.Sprintf(`
upstreams:
  tickets: {url: %q, timeout: 10s}
routes:
  - {name: create_ticket, upstream: tickets, method: POST, path: /v1/tickets, class: non_idempotent,
     receipt: {remote_id: /id}, fingerprint: {body: {exclude: [%s]}}}
`, upstream, exclude)
}

// TestRulesChangeBetweenAttempts (docs/cases.md C22): a key is used under rules that leave /note
// out; a reload changes them to leave /priority out instead. The identical retry replays (and a
// duplicate of a call still in flight is in progress), since the retry fingerprinted under the
// record's rules is the record's; a retry that changed /title, which both rule sets read, is 422
// naming /title alone; one that changed only /priority, which the new rules no longer read, is
// fingerprint-rules-changed, naming no field; one that changed only /note, which the record's
// rules never read, replays. The upstream acts once per key. On both stores.
func TestRulesChangeBetweenAttempts(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up := newHeldUpstream(t, nil)
		up.release(1)
		srv, _, gw := newGatewayYAML(t, open, rulesYAML(up.URL, "/note"), gateway.Options{})
		const body = `{"title":"Disk full","priority":"high","note":"a"}`
		if r := await(t, sendAsync(srv.URL, "k", body), "first call"); r.String() != "201 execute" {
			t.Fatalf("first call: %s %s", r, r.body)
		}
		inFlight := sendAsync(srv.URL, "held", body) // call 2, held under the old rules
		up.awaitCalls(t, 2)

		cfg, err := routes.Parse("routes.yaml", []byte(rulesYAML(up.URL, "/priority")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := gw.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, key, body, want string
			fields                string // the problem's differing_fields, for a 422
		}{
			{"identical retry", "k", body, "201 replay", ""},
			{"duplicate in flight", "held", body, "409 in_progress", ""},
			{"a field both rule sets read", "k", `{"title":"Disk empty","priority":"high","note":"a"}`, "422 conflict", "[/title]"},
			{"a field only the record's rules read", "k", `{"title":"Disk full","priority":"low","note":"a"}`, "422 conflict", ""},
			{"a field only the new rules read", "k", `{"title":"Disk full","priority":"high","note":"b"}`, "201 replay", ""},
		} {
			r, err := send(srv.URL, tc.key, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != tc.want {
				t.Errorf("%s: %s %s, want %s", tc.name, r, r.body, tc.want)
				continue
			}
			if r.status != http.StatusUnprocessableEntity {
				continue
			}
			got := fmt.Sprint(r.problem["differing_fields"])
			wantType := "idempotency-key-reused"
			if tc.fields == "" {
				got, wantType = fmt.Sprint(r.problem["differing_fields"] != nil), "fingerprint-rules-changed"
				tc.fields = "false"
			}
			if got != tc.fields || !strings.HasSuffix(fmt.Sprint(r.problem["type"]), ":"+wantType) {
				t.Errorf("%s: problem %v, want type %s naming %s", tc.name, r.problem, wantType, tc.fields)
			}
		}
		up.release(2)
		if r := await(t, inFlight, "the held call"); r.String() != "201 execute" {
			t.Errorf("the held call: %s", r)
		}
		if n := up.calls.Load(); n != 2 {
			t.Errorf("upstream calls %d, want 2 (one per key)", n)
		}
	})
}
