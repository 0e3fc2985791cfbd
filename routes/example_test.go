package routes_test

import (
	"errors"
	"fmt"

	"github.com/idemgateway/idemgateway/routes"
)

func ExampleParse() {
	file := []byte(`
upstreams:
  tickets:
    url: http://127.0.0.1:9000
    headers:
      Authorization: "Bearer ${TICKETS_TOKEN}"
defaults:
  ttl: 1h
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/tickets
    class: non_idempotent
  - name: get_ticket
    upstream: tickets
    method: GET
    path: /v1/tickets/{id}
    class: read_only
`)
	env := func(name string) (string, bool) {
		if name == "TICKETS_TOKEN" {
			return "secret-token", true
		}
		return "", false
	}
	cfg, err := routes.Parse("routes.yaml", file, env)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range cfg.Routes {
		fmt.Printf("%s: %s %s %s, key %s required=%v, ttl %v, on unknown outcome: %s\n",
			r.Name, r.Method, r.Path, r.Class, r.Key.Header, r.Key.Required, r.TTL, r.OnUnknownOutcome)
	}
	fmt.Printf("%+v\n", cfg.Upstreams["tickets"])
	// Output:
	// create_ticket: POST /v1/tickets non_idempotent, key Idempotency-Key required=true, ttl 1h0m0s, on unknown outcome: block
	// get_ticket: GET /v1/tickets/{id} read_only, key Idempotency-Key required=false, ttl 1h0m0s, on unknown outcome: release
	// {Name:tickets URL:http://127.0.0.1:9000 Timeout:30s StripPrefix: Headers:Authorization: [redacted] ForwardKey: MCP:<nil>}
}

func ExampleErrors() {
	file := []byte(`
upstreams:
  tickets:
    url: ftp://tickets.example.com
    headers:
      Authorization: "Bearer ${TICKETS_TOKEN}"
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/tickets/{id
    class: non_idempotent
    fingerprint:
      body:
        include: [/title, /title~2]
`)
	noEnv := func(string) (string, bool) { return "", false }
	_, err := routes.Parse("routes.yaml", file, noEnv)
	var errs routes.Errors
	if errors.As(err, &errs) {
		fmt.Printf("%d problems:\n", len(errs))
	}
	fmt.Println(err)
	// Output:
	// 4 problems:
	// routes.yaml: upstreams.tickets.url: "ftp://tickets.example.com": scheme must be http or https
	// routes.yaml: upstreams.tickets.headers.Authorization: environment variable TICKETS_TOKEN is not set
	// routes.yaml: routes[0] "create_ticket": path: "/v1/tickets/{id": unclosed "{" at byte 12
	// routes.yaml: routes[0] "create_ticket": fingerprint.body.include[1]: "/title~2": invalid JSON Pointer escape
}
