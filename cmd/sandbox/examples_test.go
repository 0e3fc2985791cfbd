package main

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/routes"
)

// TestExampleRoutes keeps examples/routes.yaml and the sandbox in step: the file loads under the
// gateway's strict loader, every upstream is the sandbox's default address (cmd/demo rewrites that
// exact string), every route is served by the sandbox, its fingerprint rule reads the sandbox's
// request, and its receipt pointers find the id and URL in the sandbox's response (for a kind: mcp
// route: in the final JSON-RPC message of the tool's call).
func TestExampleRoutes(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../examples/routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := routes.Parse("examples/routes.yaml", data, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("examples/routes.yaml does not load:\n%v", err)
	}
	for name, up := range cfg.Upstreams {
		if up.URL.String() != "http://127.0.0.1:9000" {
			t.Errorf("upstream %s: url %s, want http://127.0.0.1:9000", name, up.URL)
		}
	}
	var names []string
	for _, rt := range cfg.Routes {
		names = append(names, rt.Name)
	}
	for _, want := range []string{"jira_create_issue", "jira_get_issue", "zendesk_create_ticket", "linear_issue_create", "stripe_create_refund"} {
		if !slices.Contains(names, want) {
			t.Errorf("route %s missing; routes: %v", want, names)
		}
	}

	_, srv := newTestSandbox(t)
	param := regexp.MustCompile(`\{[^}]*\}`)
	for _, rt := range cfg.Routes {
		t.Run(rt.Name, func(t *testing.T) {
			if rt.Kind == routes.KindMCP {
				checkExampleMCPRoute(t, rt, srv.URL)
				return
			}
			if rt.Class == routes.ReadOnly {
				send(t, srv.Client(), srv.URL, creates[0].req)
				path := param.ReplaceAllString(rt.Path, "OPS-1")
				if resp, body := send(t, srv.Client(), srv.URL, request{method: rt.Method, path: path}); resp.StatusCode != 200 {
					t.Errorf("%s %s: %d %s", rt.Method, path, resp.StatusCode, body)
				}
				return
			}
			i := slices.IndexFunc(creates, func(cr createCase) bool {
				return rt.Method == http.MethodPost && cr.req.path == rt.Path
			})
			if i < 0 {
				t.Fatalf("the sandbox serves no create at %s %s", rt.Method, rt.Path)
			}
			cr := creates[i]
			doc, err := rt.Fingerprint.Document(&canonical.Request{
				Tool:   rt.Name,
				Method: rt.Method,
				Header: http.Header{"Content-Type": {cr.req.contentType}},
				Body:   []byte(cr.req.body),
			})
			if err != nil {
				t.Fatalf("fingerprint of the sandbox's request: %v", err)
			}
			if strings.Contains(string(doc), `"body":{}`) {
				t.Errorf("no include pointer matches the request: %s", doc)
			}
			resp, body := send(t, srv.Client(), srv.URL, cr.req)
			if resp.StatusCode >= 300 {
				t.Fatalf("create: %d %s", resp.StatusCode, body)
			}
			if id, ok := canonical.Lookup(body, rt.Receipt.RemoteID); !ok || id == "" {
				t.Errorf("receipt.remote_id %s finds nothing in %s", rt.Receipt.RemoteID, body)
			}
			if !rt.Receipt.RemoteURL.IsZero() {
				if u, ok := canonical.Lookup(body, rt.Receipt.RemoteURL); !ok || !strings.HasPrefix(u, srv.URL+"/") {
					t.Errorf("receipt.remote_url %s = %q, want a URL of the sandbox", rt.Receipt.RemoteURL, u)
				}
			}
		})
	}
}

// checkExampleMCPRoute checks a kind: mcp route of the examples against the sandbox's MCP server:
// it serves the route's path, lists every tool the route configures, and each tool's
// receipt.remote_id finds the ticket's id in the final message of a call of the tool.
func checkExampleMCPRoute(t *testing.T, rt *routes.Route, base string) {
	t.Helper()
	cs := connectMCP(t, base+rt.Path, "2025-11-25", nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, tool := range rt.MCP.Tools {
		if !slices.ContainsFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == name }) {
			t.Errorf("tool %s: the sandbox does not list it", name)
			continue
		}
		if tool.Receipt.RemoteID.IsZero() {
			continue
		}
		res := callTool(t, t.Context(), cs, name, map[string]any{"title": "Disk full on db-1"})
		final, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": res})
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := canonical.Lookup(final, tool.Receipt.RemoteID); !ok || !strings.HasPrefix(id, "T-") {
			t.Errorf("tool %s: receipt.remote_id %s finds %q in %s, want the ticket's id", name, tool.Receipt.RemoteID, id, final)
		}
	}
}
