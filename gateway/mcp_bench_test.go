package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/routes"
)

// resultBytes is the request header that tells BenchmarkReplay's upstreams how long a text to
// answer with.
const resultBytes = "X-Result-Bytes"

// BenchmarkReplay measures a replay through the gateway's handler, without the network, on the
// embedded store, logging its access line as JSON (formatted, then discarded, as
// cmd/idembench's gateway does), each of a result whose text is 1 KiB or 64 KiB: an HTTP
// route's with a small JSON body; the same tools/call body on a plain JSON-RPC route (kind: http,
// format: jsonrpc, its id replaced); on a kind: mcp route (re-enveloped under the retry's id,
// docs/contract.md §7; mcp-bytes: with replay_meta: false, the stored result alone); and on the
// HTTP route as a JSON body (http-mcp-body: the fingerprint and the record grow with the body, so
// this is the HTTP replay to hold the MCP one against). The pairs (mcp÷http-mcp-body,
// jsonrpc÷http-mcp-body, and mcp÷mcp-bytes: what the replay's _meta costs) run both replays in one
// loop and report their ratio. The budget: an MCP replay costs no more than an HTTP one, and re-enveloping is a
// splice of bytes: what either JSON-RPC replay costs beyond http-mcp-body does not grow with the
// result (docs/performance.md#mcp-tool-calls).
func BenchmarkReplay(b *testing.B) {
	answer := func(w http.ResponseWriter, r *http.Request) string {
		n, err := strconv.Atoi(r.Header.Get(resultBytes))
		if err != nil {
			http.Error(w, "no "+resultBytes, http.StatusBadRequest)
		}
		w.Header().Set("Content-Type", "application/json")
		return strings.Repeat("x", n)
	}
	httpUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		text := answer(w, r)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-1","text":%q}`, text)
	}))
	b.Cleanup(httpUp.Close)
	mcpUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		text := answer(w, r)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":%q}],"structuredContent":{"id":"T-1"}}}`, text)
	}))
	b.Cleanup(mcpUp.Close)
	gw := newBenchGateway(b, fmt.Sprintf(`
upstreams:
  http: {url: %q}
  mcp: {url: %q}
routes:
  - {name: create_ticket, upstream: http, method: POST, path: /v1/tickets, class: non_idempotent}
  - {name: rpc, upstream: mcp, method: POST, path: /rpc, class: non_idempotent, fingerprint: {body: {format: jsonrpc}}}
  - {name: tickets, kind: mcp, upstream: mcp, path: /mcp, key: {meta: %[3]s}}
  - {name: tickets_bytes, kind: mcp, upstream: mcp, path: /mcp-bytes, key: {meta: %[3]s}, replay_meta: false}
  - {name: tickets_arg, kind: mcp, upstream: mcp, path: /mcp-arg, key: {meta: %[3]s, argument: idempotency_key}}
`, httpUp.URL, mcpUp.URL, metaKey))
	for _, size := range []int{1 << 10, 64 << 10} {
		serves := map[string]func() *httptest.ResponseRecorder{}
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"printer on fire"},"_meta":{"` + metaKey + `":"k` + strconv.Itoa(size) + `"}}}`
		key := func(route string) string { return route + "-" + strconv.Itoa(size) }
		argCall := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","arguments":{"idempotency_key":"k` + strconv.Itoa(size) + `","title":"printer on fire"}}}`
		for _, c := range []struct {
			name, path, body string
			header           http.Header
		}{
			{"http", "/v1/tickets", `{"title":"printer on fire"}`, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key("http")}}},
			{"jsonrpc", "/rpc", call, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key("rpc")}}},
			{"mcp", "/mcp", call, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}},
			{"mcp-bytes", "/mcp-bytes", call, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}},
			{"mcp-arg", "/mcp-arg", argCall, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}},
			{"http-mcp-body", "/v1/tickets", call, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key("http-mcp-body")}}},
		} {
			c.header.Set(resultBytes, strconv.Itoa(size))
			serve := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
				r.Header = c.header.Clone()
				w := httptest.NewRecorder()
				gw.ServeHTTP(w, r)
				return w
			}
			if w := serve(); w.Header().Get("Idempotency-Decision") != "execute" || w.Body.Len() < size {
				b.Fatalf("%s, %d B: first call %d %.300s", c.name, size, w.Code, w.Body)
			}
			serves[c.name] = serve
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if w := serve(); w.Header().Get("Idempotency-Decision") != "replay" {
						b.Fatalf("%d %.300s", w.Code, w.Body)
					}
				}
			})
		}
		for _, route := range []string{"mcp", "jsonrpc"} {
			b.Run(fmt.Sprintf("%s÷http-mcp-body/%dKiB", route, size>>10), func(b *testing.B) {
				pairReplays(b, serves[route], serves["http-mcp-body"])
			})
		}
		b.Run(fmt.Sprintf("mcp÷mcp-bytes/%dKiB", size>>10), func(b *testing.B) {
			pairReplays(b, serves["mcp"], serves["mcp-bytes"])
		})
		b.Run(fmt.Sprintf("mcp-arg÷mcp/%dKiB", size>>10), func(b *testing.B) {
			pairReplays(b, serves["mcp-arg"], serves["mcp"])
		})
	}
}

// pairReplays measures two replays in the same loop, one after the other, and reports the time
// of each and their ratio (a÷b): what slows the machine down for a while (another process, the
// collector, a slower core) slows both alike, so the ratio holds where the times of two
// benchmarks run apart do not (docs/performance.md#mcp-tool-calls).
func pairReplays(b *testing.B, a, c func() *httptest.ResponseRecorder) {
	var ta, tc time.Duration
	for b.Loop() {
		start := time.Now()
		wa := a()
		mid := time.Now()
		wc := c()
		ta, tc = ta+mid.Sub(start), tc+time.Since(mid)
		if wa.Header().Get("Idempotency-Decision") != "replay" || wc.Header().Get("Idempotency-Decision") != "replay" {
			b.Fatalf("%d %.300s; %d %.300s", wa.Code, wa.Body, wc.Code, wc.Body)
		}
	}
	b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N), "ns/a")
	b.ReportMetric(float64(tc.Nanoseconds())/float64(b.N), "ns/b")
	b.ReportMetric(float64(ta)/float64(tc), "a÷b")
}

// newBenchGateway is the gateway of the benchmarks: the routes file yaml, the embedded store in
// b's temporary directory, the front ends of cmd/idemgateway, and its access lines formatted as
// JSON and discarded, as cmd/idembench's gateway logs them.
func newBenchGateway(b *testing.B, yaml string) *gateway.Gateway {
	b.Helper()
	cfg, err := routes.Parse("routes.yaml", []byte(yaml), nil)
	if err != nil {
		b.Fatal(err)
	}
	store, err := boltstore.Open(b.TempDir(), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	gw, err := gateway.New(cfg, store, gateway.Options{Fronts: fronts, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	return gw
}
