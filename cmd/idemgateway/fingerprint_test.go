package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

func TestFingerprintCommand(t *testing.T) {
	raw := "POST /rest/api/3/issue HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: k1\r\nContent-Length: 86\r\n\r\n" +
		`{"fields":{"project":{"key":"OPS"},"summary":"Disk full","issuetype":{"name":"Task"}}}`
	var fromRaw, fromFlags bytes.Buffer
	if err := fingerprint([]string{"-routes", "../../examples/routes.yaml", "-route", "jira_create_issue", "-explain"}, strings.NewReader(raw), &fromRaw); err != nil {
		t.Fatal(err)
	}
	if err := fingerprint([]string{"-routes", "../../examples/routes.yaml", "-route", "jira_create_issue", "-method", "POST", "-path", "/rest/api/3/issue",
		"-H", "Content-Type: application/json", "-H", "Idempotency-Key: k1",
		"-body", `{ "fields": {"summary":"Disk full","issuetype":{"name":"Task"},"project":{"key":"OPS"}} }`}, nil, &fromFlags); err != nil {
		t.Fatal(err)
	}
	var a, b struct {
		Class       string `json:"class"`
		Fingerprint string `json:"fingerprint"`
		Key         string `json:"key"`
		Steps       []struct{ Pointer, Action string }
	}
	if err := json.Unmarshal(fromRaw.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fromFlags.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Fingerprint, "sha256:") || a.Fingerprint != b.Fingerprint {
		t.Fatalf("fingerprints %q and %q: want one, the same", a.Fingerprint, b.Fingerprint)
	}
	if a.Key != "k1" || b.Key != "k1" {
		t.Fatalf("keys %q and %q, want k1", a.Key, b.Key)
	}
	if a.Class != "non_idempotent" || b.Class != "non_idempotent" {
		t.Fatalf("classes %q and %q, want the route's non_idempotent", a.Class, b.Class)
	}
	if len(a.Steps) == 0 || len(b.Steps) != 0 {
		t.Fatalf("steps: %d with -explain, %d without", len(a.Steps), len(b.Steps))
	}
	for _, bad := range [][]string{
		{"-routes", "../../examples/routes.yaml"},
		{"-routes", "../../examples/routes.yaml", "-route", "nope", "-method", "POST", "-path", "/x"},
		{"-routes", "../../examples/routes.yaml", "-route", "jira_create_issue", "-method", "POST", "-path", "/elsewhere"},
		{"-routes", "../../examples/routes.yaml", "-route", "jira_create_issue", "-method", "POST", "-path", "/rest/api/3/issue",
			"-H", "Content-Type: application/json", "-body", `{"a":1,"a":2}`},
	} {
		if err := fingerprint(bad, strings.NewReader(""), &bytes.Buffer{}); err == nil {
			t.Errorf("fingerprint %q succeeded", bad)
		}
	}
}

// servingRoutes are the routes of TestFingerprintMatchesServing (a format string: the upstream's
// URL, then the MCP server's): one route per request shape, so that every part of the identify
// path is used: tenant, credential scope, key header, key.from, key.derive, path parameters,
// listed query parameters and headers, and each body format; and a kind: mcp route with a
// configured tool and the key in params._meta (docs/mcp.md).
const servingRoutes = `
upstreams:
  up: {url: %s}
  mcp_up: {url: %s}
defaults: {ttl: 1h}
routes:
  - name: json_projected
    upstream: up
    method: POST
    path: /v1/projects/{project}/tickets
    class: non_idempotent
    opaque_path_params: [project]
    fingerprint:
      body:
        include: [/title, /priority, /labels, /meta]
        exclude: [/meta/trace]
        sets: [/labels]
        defaults: {/labels: []}
        normalize: {/title: [trim, collapse_space]}
      query: [dry_run]
      headers: [X-Account]
  - {name: json_whole, upstream: up, method: POST, path: /v1/whole, class: non_idempotent}
  - {name: form_by_type, upstream: up, method: POST, path: /v1/refunds, class: non_idempotent,
     fingerprint: {body: {include: [/charge, /amount]}}}
  - {name: form_forced, upstream: up, method: POST, path: /v1/forced-form, class: non_idempotent,
     fingerprint: {body: {format: form}}}
  - {name: graphql, upstream: up, method: POST, path: /graphql, class: non_idempotent,
     fingerprint: {body: {format: graphql, sets: [/variables/input/labelIds]}}}
  - {name: jsonrpc, upstream: up, method: POST, path: /mcp, class: non_idempotent, key: {required: false},
     fingerprint: {body: {format: jsonrpc}}}
  - {name: raw_bytes, upstream: up, method: POST, path: /v1/upload, class: non_idempotent}
  - {name: key_from_body, upstream: up, method: POST, path: /v1/from-body, class: non_idempotent,
     key: {from: "body:/params/_meta/idempotency_key"}}
  - {name: key_from_query, upstream: up, method: POST, path: /v1/from-query, class: non_idempotent,
     key: {from: "query:request_id"}}
  - {name: key_from_header, upstream: up, method: POST, path: /v1/from-header, class: non_idempotent,
     key: {from: "header:X-Request-Id"}}
  - {name: key_derived, upstream: up, method: POST, path: "/v1/incidents/{incident}/tickets", class: non_idempotent,
     key: {derive: "{tenant}:{path:incident}:{body:/incident_id}:{query:v}:{header:X-Source}"}}
  - {name: credential, upstream: up, method: POST, path: /v1/private, class: non_idempotent,
     scope: {credential: true}}
  - {name: credential_header, upstream: up, method: POST, path: /v1/private-key, class: non_idempotent,
     scope: {credential: true, credential_header: X-Api-Key}}
  - name: tickets
    kind: mcp
    upstream: mcp_up
    path: /mcp/tickets
    key: {meta: io.github.idemgateway/idempotencyKey}
    tools:
      create_ticket:
        key: {derive: "{tenant}:{body:/params/arguments/incident_id}"}
        fingerprint: {body: {exclude: [/params/arguments/client_note]}}
      search_tickets: {class: read_only}
`

// mcpServer is the MCP server of TestFingerprintMatchesServing's kind: mcp route: go-sdk,
// stateless, JSON answers, each tool a result with structuredContent {id}.
func mcpServer(t *testing.T) *httptest.Server {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	for _, name := range []string{"create_ticket", "close_ticket", "search_tickets"} {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "T-1"}}, StructuredContent: map[string]string{"id": "T-1"}}, nil
			})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFingerprintMatchesServing: `idemgateway fingerprint` (gateway.Explain) says what the serving
// gateway does with the same request bytes: the same Idempotency-Fingerprint, and a record stored
// under the tenant, key and credential scope that the command prints, holding that fingerprint;
// and where the gateway refuses the key (400), the command names a key problem and still prints the
// fingerprint. Both run one identify phase (gateway/identify.go); the command is compared with the
// serving gateway, not only with itself.
func TestFingerprintMatchesServing(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	graphqlQuery := `mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id } } }`
	// A tools/call as an MCP client sends it (the go-sdk server wants both Accept types).
	const mcpHead = "POST /mcp/tickets HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25"
	toolCall := func(id, tool, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `"` + params + `}}`
	}
	matchServing(t, fmt.Sprintf(servingRoutes, upstream.URL, mcpServer(t).URL), []servingCase{
		{"json, tenant, path parameter, query and header", "json_projected",
			"POST /v1/projects/a%2Fb/tickets?dry_run=false&trace=1 HTTP/1.1\r\nX-Tenant-ID: acme\r\nX-Account: acct-7\r\nIdempotency-Key: k-json\r\nContent-Type: application/json",
			`{"title":"  Printer   out ","priority":1.50,"labels":["b","a","b"],"meta":{"x":1,"trace":"t"},"other":true}`, false, false, 0},
		{"json without the listed members", "json_projected",
			"POST /v1/projects/p/tickets HTTP/1.1\r\nIdempotency-Key: \"k-json-sf\"\r\nContent-Type: application/json; charset=utf-8", `{}`, false, false, 0},
		{"json whole body, big numbers", "json_whole",
			"POST /v1/whole HTTP/1.1\r\nIdempotency-Key: k-whole\r\nContent-Type: application/json",
			`{"n":9007199254740993,"e":1e0,"s":"\u00e9"}`, false, false, 0},
		{"empty body", "json_whole", "POST /v1/whole HTTP/1.1\r\nIdempotency-Key: k-empty", ``, false, false, 0},
		{"form by Content-Type", "form_by_type",
			"POST /v1/refunds HTTP/1.1\r\nX-Tenant-ID: globex\r\nIdempotency-Key: k-form\r\nContent-Type: application/x-www-form-urlencoded",
			`amount=1000&charge=ch_1&metadata%5Border%5D=7&amount=5`, false, false, 0},
		{"form format whatever the Content-Type", "form_forced",
			"POST /v1/forced-form HTTP/1.1\r\nIdempotency-Key: k-form-forced\r\nContent-Type: text/plain", `b=2&a=1&a=0`, false, false, 0},
		{"graphql", "graphql",
			"POST /graphql HTTP/1.1\r\nIdempotency-Key: k-graphql\r\nContent-Type: application/json",
			`{"query":"` + graphqlQuery + `","variables":{"input":{"title":"T","labelIds":["l2","l1"]}},"extensions":{"h":1}}`, false, false, 0},
		{"jsonrpc tools/call", "jsonrpc",
			"POST /mcp HTTP/1.1\r\nIdempotency-Key: k-rpc\r\nContent-Type: application/json",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create","arguments":{"title":"x"},"_meta":{"progressToken":3}}}`, false, false, 0},
		{"raw bytes", "raw_bytes",
			"POST /v1/upload HTTP/1.1\r\nIdempotency-Key: k-raw\r\nContent-Type: application/octet-stream", "\x00\x01binary\xff", false, false, 0},
		{"text without Content-Type", "raw_bytes", "POST /v1/upload HTTP/1.1\r\nIdempotency-Key: k-text", "plain text", false, false, 0},
		{"key from the body", "key_from_body",
			"POST /v1/from-body HTTP/1.1\r\nContent-Type: application/json", `{"params":{"_meta":{"idempotency_key":"k-body"}}}`, false, false, 0},
		{"key from the query", "key_from_query", "POST /v1/from-query?request_id=k%20query HTTP/1.1\r\nContent-Type: application/json", `{"a":1}`, false, false, 0},
		{"key from a header", "key_from_header", "POST /v1/from-header HTTP/1.1\r\nX-Request-Id: k-hdr\r\nContent-Type: application/json", `{"a":1}`, false, false, 0},
		{"a sent key wins over key.from", "key_from_header",
			"POST /v1/from-header HTTP/1.1\r\nIdempotency-Key: k-sent\r\nX-Request-Id: k-hdr-2\r\nContent-Type: application/json", `{"a":2}`, false, false, 0},
		{"derived key", "key_derived",
			"POST /v1/incidents/INC-9/tickets?v=3 HTTP/1.1\r\nX-Tenant-ID: acme\r\nX-Source: pager\r\nContent-Type: application/json", `{"incident_id":"I-1","title":"t"}`, false, false, 0},
		{"derived key with a field missing", "key_derived",
			"POST /v1/incidents/INC-9/tickets HTTP/1.1\r\nContent-Type: application/json", `{"title":"t"}`, true, false, 0},
		{"key missing", "json_whole", "POST /v1/whole HTTP/1.1\r\nContent-Type: application/json", `{}`, true, false, 0},
		{"credential scope", "credential",
			"POST /v1/private HTTP/1.1\r\nX-Tenant-ID: acme\r\nAuthorization: Bearer user-1\r\nIdempotency-Key: k-cred\r\nContent-Type: application/json", `{"a":1}`, false, false, 0},
		{"credential scope, another header", "credential_header",
			"POST /v1/private-key HTTP/1.1\r\nX-Api-Key: key-2\r\nIdempotency-Key: k-cred-2\r\nContent-Type: application/json", `{"a":1}`, false, false, 0},
		{"credential missing", "credential",
			"POST /v1/private HTTP/1.1\r\nIdempotency-Key: k-cred-missing\r\nContent-Type: application/json", `{"a":1}`, true, false, 0},
		{"key sent twice", "json_whole",
			"POST /v1/whole HTTP/1.1\r\nIdempotency-Key: a\r\nIdempotency-Key: b\r\nContent-Type: application/json", `{}`, true, false, 0},
		{"a path parameter that reads as another path", "key_derived",
			"POST /v1/incidents/a%2Fb/tickets HTTP/1.1\r\nIdempotency-Key: k-path\r\nContent-Type: application/json", `{}`, false, true, 0},
		{"a tenant of 129 bytes", "json_whole",
			"POST /v1/whole HTTP/1.1\r\nX-Tenant-ID: " + strings.Repeat("t", 129) + "\r\nIdempotency-Key: k-long\r\nContent-Type: application/json", `{}`, false, true, 0},
		{"credential scope, another spelling", "credential",
			"POST /v1/private HTTP/1.1\r\nX-Tenant-ID: acme\r\nAuthorization: bearer   user-1\r\nIdempotency-Key: k-cred-spelling\r\nContent-Type: application/json", `{"a":1}`, false, false, 0},
		{"credential sent twice", "credential",
			"POST /v1/private HTTP/1.1\r\nAuthorization: Bearer user-1\r\nAuthorization: Bearer user-2\r\nIdempotency-Key: k-cred-twice\r\nContent-Type: application/json", `{"a":1}`, true, false, 0},
		{"tenant sent twice", "json_whole",
			"POST /v1/whole HTTP/1.1\r\nX-Tenant-ID: a\r\nX-Tenant-ID: b\r\nIdempotency-Key: k-tenants\r\nContent-Type: application/json", `{}`, false, true, 0},
		{"Content-Type sent twice", "json_whole",
			"POST /v1/whole HTTP/1.1\r\nIdempotency-Key: k-types\r\nContent-Type: application/json\r\nContent-Type: text/plain", `{}`, false, true, 0},
		{"a repeated member", "json_whole",
			"POST /v1/whole HTTP/1.1\r\nIdempotency-Key: k-repeat\r\nContent-Type: application/json", `{"a":1,"a":2}`, false, true, 0},
		// MCP tools/calls (docs/contract.md §7): the scope is route/tool, the fingerprint the
		// tool's (the id and _meta never count, absent arguments count as {}).
		{"tools/call of a configured tool, key derived", "tickets/create_ticket", mcpHead,
			toolCall(`"a"`, "create_ticket", `,"arguments":{"incident_id":"I-7","title":"Disk full","client_note":"n"},"_meta":{"progressToken":1}`),
			false, false, http.StatusOK},
		{"tools/call, key in _meta before key.derive", "tickets", mcpHead,
			toolCall(`12345678901234567890`, "create_ticket", `,"arguments":{"incident_id":"I-8"},"_meta":{"io.github.idemgateway/idempotencyKey":"k-meta"}`),
			false, false, http.StatusOK},
		{"tools/call of an unconfigured tool, key header", "tickets",
			mcpHead + "\r\nX-Tenant-ID: acme\r\nIdempotency-Key: k-close", toolCall(`3`, "close_ticket", `,"arguments":{"ticket":"T-1"}`),
			false, false, http.StatusOK},
		{"tools/call without arguments", "tickets/close_ticket", mcpHead,
			toolCall(`4`, "close_ticket", `,"_meta":{"io.github.idemgateway/idempotencyKey":"k-no-args"}`), false, false, http.StatusOK},
		{"tools/call of a read_only tool", "tickets", mcpHead + "\r\nIdempotency-Key: k-search",
			toolCall(`6`, "search_tickets", `,"arguments":{}`), false, true, http.StatusOK},
		{"tools/call whose Mcp-Name names another tool", "tickets",
			strings.Replace(mcpHead, "2025-11-25", "2026-07-28", 1) + "\r\nMcp-Method: tools/call\r\nMcp-Name: create_ticket\r\nIdempotency-Key: k-mismatch",
			toolCall(`7`, "close_ticket", `,"arguments":{}`), false, true, 0},
	})
}

// TestFingerprintMatchesServingWithClients: with a clients section, the command authenticates as
// the gateway does: it prints the client's tenant (which a derived key may hold) whether or not
// the request repeats it, and fails where the gateway answers 401 or 403.
func TestFingerprintMatchesServingWithClients(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(upstream.Close)
	sum := sha256.Sum256([]byte("cmd-key"))
	matchServing(t, fmt.Sprintf(`
upstreams:
  up: {url: %s}
clients:
  api_keys:
    - {name: agent, key: "sha256:%x", header: X-Api-Key, tenant: acme, actor: agent-7}
routes:
  - {name: create, upstream: up, method: POST, path: /v1/tickets, class: non_idempotent}
  - {name: derived, upstream: up, method: POST, path: /v1/derived, class: non_idempotent, key: {derive: "{tenant}:{body:/id}"}}
`, upstream.URL, sum), []servingCase{
		{"the client's tenant", "create",
			"POST /v1/tickets HTTP/1.1\r\nX-Api-Key: cmd-key\r\nIdempotency-Key: k-1\r\nContent-Type: application/json", `{"a":1}`, false, false, 0},
		{"the tenant header agrees", "create",
			"POST /v1/tickets HTTP/1.1\r\nX-Api-Key: cmd-key\r\nX-Tenant-ID: acme\r\nIdempotency-Key: k-2\r\nContent-Type: application/json", `{"a":1}`, false, false, 0},
		{"a key derived from the client's tenant", "derived",
			"POST /v1/derived HTTP/1.1\r\nX-Api-Key: cmd-key\r\nContent-Type: application/json", `{"id":"I-1"}`, false, false, 0},
		{"no credential", "create",
			"POST /v1/tickets HTTP/1.1\r\nX-Tenant-ID: acme\r\nIdempotency-Key: k-3\r\nContent-Type: application/json", `{"a":1}`, false, true, http.StatusUnauthorized},
		{"a wrong key", "create",
			"POST /v1/tickets HTTP/1.1\r\nX-Api-Key: cmd-key-2\r\nIdempotency-Key: k-4\r\nContent-Type: application/json", `{"a":1}`, false, true, http.StatusUnauthorized},
		{"the tenant header disagrees", "create",
			"POST /v1/tickets HTTP/1.1\r\nX-Api-Key: cmd-key\r\nX-Tenant-ID: globex\r\nIdempotency-Key: k-5\r\nContent-Type: application/json", `{"a":1}`, false, true, http.StatusForbidden},
	})
}

// servingCase is a request of matchServing.
type servingCase struct {
	name, route string
	head        string // request line and headers, without Content-Length and the blank line
	body        string
	// refused: the gateway answers 400 for the key, and the command names a key problem;
	// invalid: the gateway answers status (0: 400) before the key, with no decision, and the
	// command fails; else the gateway executes the request (status; 0: 201) and stores a record.
	refused, invalid bool
	status           int
}

// matchServing serves a gateway with the routes file routesYAML, sends it each case, and checks
// that the command says what the gateway did.
func matchServing(t *testing.T, routesYAML string, cases []servingCase) {
	t.Helper()
	routesFile := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(routesFile, []byte(routesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := routes.Load(routesFile)
	if err != nil {
		t.Fatal(err)
	}
	store, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	gw, err := gateway.New(cfg, store, gateway.Options{Fronts: fronts, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	serving := httptest.NewServer(gw)
	t.Cleanup(serving.Close)
	adminSrv := httptest.NewServer(admin.Handler(admin.Options{Store: store, Pipeline: gw, Token: ""}))
	t.Cleanup(adminSrv.Close)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := fmt.Sprintf("%s\r\nHost: gateway\r\nContent-Length: %d\r\n\r\n%s", tc.head, len(tc.body), tc.body)
			var out bytes.Buffer
			err := fingerprint([]string{"-routes", routesFile, "-route", tc.route}, strings.NewReader(raw), &out)
			if tc.invalid {
				want := cmp.Or(tc.status, http.StatusBadRequest)
				if resp := sendRaw(t, serving.Listener.Addr().String(), raw); resp.StatusCode != want || resp.Header.Get("Idempotency-Decision") != "" || err == nil {
					t.Fatalf("gateway answered %d %q; the command: %v, printed %s; want %d, no decision and an error",
						resp.StatusCode, resp.Header.Get("Idempotency-Decision"), err, out.Bytes(), want)
				}
				return
			}
			if err != nil {
				t.Fatalf("fingerprint: %v", err)
			}
			var e struct {
				Route, Tenant, Key, Fingerprint string
				KeySource                       string `json:"key_source"`
				KeyProblem                      string `json:"key_problem"`
				CredentialScope                 string `json:"credential_scope"`
			}
			if err := json.Unmarshal(out.Bytes(), &e); err != nil {
				t.Fatalf("fingerprint printed %s: %v", out.Bytes(), err)
			}
			resp := sendRaw(t, serving.Listener.Addr().String(), raw)
			if tc.refused {
				if resp.StatusCode != http.StatusBadRequest || e.KeyProblem == "" || e.Key != "" || e.Fingerprint == "" {
					t.Fatalf("gateway answered %d; command: key %q, key problem %q, fingerprint %q; want 400, a key problem and the fingerprint", resp.StatusCode, e.Key, e.KeyProblem, e.Fingerprint)
				}
				return
			}
			if want := cmp.Or(tc.status, http.StatusCreated); resp.StatusCode != want || resp.Header.Get("Idempotency-Decision") != "execute" {
				t.Fatalf("gateway answered %d %q, want %d execute", resp.StatusCode, resp.Header.Get("Idempotency-Decision"), want)
			}
			if got := resp.Header.Get("Idempotency-Fingerprint"); got != e.Fingerprint || e.KeyProblem != "" {
				t.Fatalf("Idempotency-Fingerprint %q; the command printed %q (key problem %q)", got, e.Fingerprint, e.KeyProblem)
			}
			// The record the gateway stored, addressed with what the command printed: on a kind:
			// mcp route the scope name is route/tool.
			if name, _, _ := strings.Cut(tc.route, "/"); e.Route != tc.route && !strings.HasPrefix(e.Route, name+"/") {
				t.Fatalf("the command printed route %q for %q", e.Route, tc.route)
			}
			u := adminSrv.URL + "/v1/records/" + url.PathEscape(e.Tenant) + "/" + url.PathEscape(e.Route) + "/" + url.PathEscape(e.Key)
			if e.CredentialScope != "" {
				u += "?credential=" + url.QueryEscape(e.CredentialScope)
			}
			got, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Body.Close()
			var rec record.Receipt
			if err := json.NewDecoder(got.Body).Decode(&rec); err != nil || got.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d, %v: the gateway stored no record under the command's tenant %q, key %q, credential scope %q",
					u, got.StatusCode, err, e.Tenant, e.Key, e.CredentialScope)
			}
			if rec.EffectFingerprint != e.Fingerprint || rec.Tenant != e.Tenant || rec.IdempotencyKey != e.Key || rec.CredentialScope != e.CredentialScope {
				t.Errorf("record %+v; the command printed tenant %q, key %q, credential scope %q, fingerprint %q",
					rec, e.Tenant, e.Key, e.CredentialScope, e.Fingerprint)
			}
		})
	}
}

// sendRaw writes raw, one HTTP/1.1 request, to addr on a connection of its own and returns the
// response, its body read.
func sendRaw(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestFingerprintAnswer: -answer-status and -answer say how a route classes an upstream answer,
// and which body rule did (examples/routes.yaml's linear_issue_create is format: graphql).
func TestFingerprintAnswer(t *testing.T) {
	t.Parallel()
	const req = `{"query":"mutation { issueCreate(input: {title: \"x\"}) { success } }"}`
	for _, tc := range []struct {
		status, body, want string
	}{
		{"200", `{"errors":[{"message":"title must be provided"}],"data":{"issueCreate":null}}`, `{"class":"not_committed","rule":"graphql: errors and no data"}`},
		{"200", `{"data":{"issueCreate":{"success":true}}}`, `{"class":"committed"}`},
		{"502", `{}`, `{"class":"unknown"}`},
	} {
		var out bytes.Buffer
		err := fingerprint([]string{"-routes", "../../examples/routes.yaml", "-route", "linear_issue_create",
			"-method", "POST", "-path", "/graphql", "-H", "Content-Type: application/json", "-H", "Idempotency-Key: k1",
			"-body", req, "-answer-status", tc.status, "-answer", tc.body}, strings.NewReader(""), &out)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Answer json.RawMessage `json:"answer"`
		}
		if err := json.Unmarshal(out.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, e.Answer)
		if compact.String() != tc.want {
			t.Errorf("answer %s %s: %s, want %s", tc.status, tc.body, compact.String(), tc.want)
		}
	}
}
