package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkExecute measures a first execution through the gateway's handler on the embedded
// store, a 1 KiB JSON request and an answer of 1 KiB or 64 KiB, the upstream a real HTTP server, the access line
// formatted and discarded (as cmd/idembench's gateway logs it). Its allocations per execution
// are the gateway's own work beside the store's (docs/performance.md).
func BenchmarkExecute(b *testing.B) {
	answers := map[string]string{}
	for _, n := range []int{1 << 10, 64 << 10} {
		answers[strconv.Itoa(n)] = `{"id":"T-1","text":"` + strings.Repeat("x", n-20) + `"}`
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		answer := answers[r.Header.Get(resultBytes)]
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, answer)
	}))
	b.Cleanup(up.Close)
	gw := newBenchGateway(b, fmt.Sprintf(`
upstreams:
  http: {url: %q}
routes:
  - {name: create_ticket, upstream: http, method: POST, path: /v1/tickets, class: non_idempotent, receipt: {remote_id: /id}}
`, up.URL))
	body := `{"title":"` + strings.Repeat("y", 1000) + `"}`
	n := 0
	for _, size := range []string{"1024", "65536"} {
		b.Run(size, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n++
				req := httptest.NewRequest(http.MethodPost, "/v1/tickets", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "k"+strconv.Itoa(n))
				req.Header.Set(resultBytes, size)
				rec := httptest.NewRecorder()
				gw.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
