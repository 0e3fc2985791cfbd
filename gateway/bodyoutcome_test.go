package gateway

import (
	"testing"

	"github.com/idemgateway/idemgateway/routes"
)

// bodyOutcomeYAML has a route per way an answer's body classes it: GraphQL, JSON-RPC (with
// outcome.error_codes), outcome.body rules, and a plain route whose body says nothing.
const bodyOutcomeYAML = `
upstreams:
  up: {url: "http://127.0.0.1:9"}
routes:
  - {name: gql, upstream: up, method: POST, path: /graphql, class: non_idempotent,
     fingerprint: {body: {format: graphql}}}
  - {name: rpc, upstream: up, method: POST, path: /rpc, class: non_idempotent,
     fingerprint: {body: {format: jsonrpc}}, outcome: {error_codes: {committed: [-32001], not_committed: [-32000]}}}
  - name: rules
    upstream: up
    method: POST
    path: /rules
    class: non_idempotent
    outcome:
      committed: [409]
      body:
        - {pointer: /status, equals: failed, class: not_committed}
        - {pointer: /status, equals: {state: queued, n: 1.0}, class: unknown}
        - {pointer: /error, present: true, class: unknown}
        - {pointer: /duplicate, equals: true, class: committed}
  - {name: plain, upstream: up, method: POST, path: /plain, class: non_idempotent}
`

// TestAnswerClass is the table of docs/unknown-outcomes.md#answers-that-say-what-happened: what
// an answer's status and body say of its outcome, and the rule a record's detail names.
func TestAnswerClass(t *testing.T) {
	t.Parallel()
	cfg, err := routes.Parse("body.yaml", []byte(bodyOutcomeYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	route := map[string]*routes.Route{}
	for _, rt := range cfg.Routes {
		route[rt.Name] = rt
	}
	for _, tc := range []struct {
		route  string
		status int
		body   string
		whole  bool
		class  OutcomeClass
		rule   string
	}{
		// GraphQL: errors and no data did nothing; errors beside data, part of it.
		{"gql", 200, `{"data":{"issueCreate":{"id":"ENG-1"}}}`, true, Committed, ""},
		{"gql", 200, `{"errors":[{"message":"title must be provided"}],"data":null}`, true, NotCommitted, "graphql: errors and no data"},
		{"gql", 200, `{"errors":[{"message":"no"}]}`, true, NotCommitted, "graphql: errors and no data"},
		{"gql", 200, `{"errors":[{"message":"no"}],"data":{"issueCreate":null,"other":null}}`, true, NotCommitted, "graphql: errors and no data"},
		{"gql", 200, `{"errors":[{"message":"labels failed"}],"data":{"issueCreate":{"id":"ENG-2"},"addLabel":null}}`, true, Unknown, "graphql: errors beside data"},
		{"gql", 200, `{"errors":[],"data":{"issueCreate":{"id":"ENG-3"}}}`, true, Committed, ""},
		{"gql", 200, `{"errors":[{"message":"no"}],"data":null}`, false, Committed, ""}, // cut off: its status decides
		{"gql", 500, `{"errors":[{"message":"no"}],"data":null}`, true, Unknown, ""},    // status rows first
		{"gql", 200, `not json`, true, Committed, ""},
		{"gql", 200, `{"Errors":[{"message":"no"}],"data":null}`, true, Committed, ""}, // members by exact name
		{"gql", 200, `{"errors":null,"data":null}`, true, Committed, ""},
		{"gql", 200, `{"errors":[{"message":"no"}],"data":[1]}`, true, Unknown, "graphql: errors beside data that is no object"},
		// JSON-RPC: an error by its code.
		{"rpc", 200, `{"jsonrpc":"2.0","id":1,"result":{"id":"T-1"}}`, true, Committed, ""},
		{"rpc", 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid params"}}`, true, NotCommitted, "jsonrpc: error -32602"},
		{"rpc", 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal"}}`, true, Unknown, "jsonrpc: error -32603"},
		{"rpc", 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"refused"}}`, true, NotCommitted, "jsonrpc: error -32000"},
		{"rpc", 200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"done twice"}}`, true, Committed, "jsonrpc: error -32001"},
		// outcome.body rules, in order, before the status rows.
		{"rules", 200, `{"status":"failed"}`, true, NotCommitted, `outcome.body[0] (/status equals "failed")`},
		{"rules", 200, `{"status":{"n":1,"state":"queued"}}`, true, Unknown, `outcome.body[1] (/status equals {"n":1,"state":"queued"})`},
		{"rules", 200, `{"status":"ok","error":{"code":7}}`, true, Unknown, "outcome.body[2] (/error present)"},
		{"rules", 200, `{"status":"ok","error":null}`, true, Committed, ""},
		{"rules", 422, `{"duplicate":true}`, true, Committed, "outcome.body[3] (/duplicate equals true)"},
		{"rules", 409, `{}`, true, Committed, ""},
		{"rules", 500, `{"status":"failed"}`, true, NotCommitted, `outcome.body[0] (/status equals "failed")`},
		{"rules", 200, `<html>`, true, Committed, ""},
		// Read as clients read an answer: invalid UTF-8, a member named twice (the last counts).
		{"rules", 200, "{\"status\":\"failed\",\"note\":\"caf\xe9\"}", true, NotCommitted, `outcome.body[0] (/status equals "failed")`},
		{"rules", 200, `{"status":"ok","status":"failed"}`, true, NotCommitted, `outcome.body[0] (/status equals "failed")`},
		{"rules", 200, `{"status":"failed"} trailing`, true, Committed, ""},
		// A route whose body says nothing: its status decides.
		{"plain", 200, `{"errors":[{"message":"no"}],"data":null}`, true, Committed, ""},
	} {
		class, rule := answerClass(tc.status, []byte(tc.body), tc.whole, route[tc.route])
		if class != tc.class || rule != tc.rule {
			t.Errorf("%s %d %s (whole %v): %s by %q, want %s by %q", tc.route, tc.status, tc.body, tc.whole, class, rule, tc.class, tc.rule)
		}
	}
	for name, want := range map[string]bool{"gql": true, "rpc": true, "rules": true, "plain": false} {
		if got := readsBody(200, route[name]); got != want {
			t.Errorf("readsBody(200, %s) = %v, want %v", name, got, want)
		}
	}
	if readsBody(500, route["gql"]) {
		t.Error("readsBody(500, gql): a GraphQL answer its status does not commit need not be read")
	}
}
