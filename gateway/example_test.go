package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/routes"
)

// A gateway in front of a ticket API, on the embedded store: the first call executes, the retry
// replays the stored receipt, and the same key with another body is refused.
func Example() {
	tickets := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tickets++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-%d"}`, tickets)
	}))
	defer upstream.Close()

	cfg, err := routes.Parse("routes.yaml", []byte(`
upstreams:
  tickets: {url: `+upstream.URL+`}
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/tickets
    class: non_idempotent
    fingerprint: {body: {include: [/title]}}
    receipt: {remote_id: /id}
`), nil)
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	store, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	gw, err := gateway.New(cfg, store, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()

	for _, body := range []string{`{"title":"Printer on fire"}`, `{ "title": "Printer on fire" }`, `{"title":"Printer fixed"}`} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "ticket-42")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotency-Decision"))
	}
	fmt.Println("tickets created:", tickets)
	// Output:
	// 201 execute
	// 201 replay
	// 422 conflict
	// tickets created: 1
}
