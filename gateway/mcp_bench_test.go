package gateway_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/routes"
)

// BenchmarkReplay measures a replay through the gateway's handler, without the network, on the
// embedded store, each of a result of about 1 KiB: an HTTP route's with a small JSON body; the
// same tools/call body on a plain JSON-RPC route (kind: http, format: jsonrpc, its id replaced);
// on a kind: mcp route (re-enveloped under the retry's id, docs/contract.md §7); and on the HTTP
// route as a JSON body (http-mcp-body: the fingerprint and the record grow with the body, so this
// is the HTTP replay to hold the MCP one against). Issue 14: an MCP replay costs no more than an
// HTTP one.
func BenchmarkReplay(b *testing.B) {
	text := strings.Repeat("x", 1000)
	httpUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-1","text":%q}`, text)
	}))
	b.Cleanup(httpUp.Close)
	mcpUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":%q}],"structuredContent":{"id":"T-1"}}}`, text)
	}))
	b.Cleanup(mcpUp.Close)
	cfg, err := routes.Parse("routes.yaml", []byte(fmt.Sprintf(`
upstreams:
  http: {url: %q}
  mcp: {url: %q}
routes:
  - {name: create_ticket, upstream: http, method: POST, path: /v1/tickets, class: non_idempotent}
  - {name: rpc, upstream: mcp, method: POST, path: /rpc, class: non_idempotent, fingerprint: {body: {format: jsonrpc}}}
  - {name: tickets, kind: mcp, upstream: mcp, path: /mcp, key: {meta: %s}}
`, httpUp.URL, mcpUp.URL, metaKey)), nil)
	if err != nil {
		b.Fatal(err)
	}
	store, err := boltstore.Open(b.TempDir(), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	gw, err := gateway.New(cfg, store, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"printer on fire"},"_meta":{"` + metaKey + `":"k1"}}}`
	for _, c := range []struct {
		name, path, body string
		header           http.Header
	}{
		{"http", "/v1/tickets", `{"title":"printer on fire"}`, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1"}}},
		{"jsonrpc", "/rpc", call, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1"}}},
		{"mcp", "/mcp", call, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}},
		{"http-mcp-body", "/v1/tickets", call, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k2"}}},
	} {
		serve := func() *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
			r.Header = c.header.Clone()
			w := httptest.NewRecorder()
			gw.ServeHTTP(w, r)
			return w
		}
		if w := serve(); w.Header().Get("Idempotency-Decision") != "execute" {
			b.Fatalf("%s: first call %d %s", c.name, w.Code, w.Body)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if w := serve(); w.Header().Get("Idempotency-Decision") != "replay" {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
