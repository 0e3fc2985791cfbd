package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/routes"
)

// fingerprint prints what the gateway makes of one request under one route: the canonical
// document, the fingerprint and the key (docs/contract.md §1). The request is a raw HTTP/1.1 request on
// stdin, or -method/-path/-body/-H. On a kind: mcp route it is a POST of one tools/call, and
// -route names the tool ("tickets/create_ticket") or the route (the tool is the body's); the
// route printed is the tool's scope name, route/tool (docs/mcp.md).
func fingerprint(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("idemgateway fingerprint", flag.ContinueOnError)
	routesFile := fs.String("routes", envOr("IDEMGATEWAY_ROUTES", "routes.yaml"), "path of the routes file")
	route := fs.String("route", "", "the route (tool) name; on a kind: mcp route, route/tool or the route (the tool read from the body)")
	explain := fs.Bool("explain", false, "also list what each fingerprint rule did")
	method := fs.String("method", "", "the request's method (with -path; else a raw HTTP request is read from stdin)")
	path := fs.String("path", "", "the request's path and query")
	body := fs.String("body", "", "the request's body; @FILE reads it from FILE")
	var headers []string
	fs.Func("H", "a request header, 'Name: value' (repeatable)", func(h string) error { headers = append(headers, h); return nil })
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *route == "" {
		return errors.New("fingerprint: -route is required")
	}
	cfg, err := routes.Load(*routesFile)
	if err != nil {
		return err
	}
	var r *http.Request
	if *path == "" {
		if r, err = http.ReadRequest(bufio.NewReader(stdin)); err != nil {
			return errors.New("fingerprint: reading a raw HTTP request from stdin: " + err.Error())
		}
	} else {
		b := *body
		if name, ok := strings.CutPrefix(b, "@"); ok {
			data, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			b = string(data)
		}
		r = httptest.NewRequest(*method, *path, strings.NewReader(b))
		for _, h := range headers {
			name, value, _ := strings.Cut(h, ":")
			r.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
	}
	e, err := gateway.Explain(cfg, *route, r, *explain, readers)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(e)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
