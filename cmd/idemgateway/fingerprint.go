package main

import (
	"bufio"
	"bytes"
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
	answerStatus := fs.Int("answer-status", 0, "also say how the route classes an upstream answer of this status (with -answer)")
	answer := fs.String("answer", "", "that answer's body; @FILE reads it from FILE")
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
	var answerBody []byte
	if *answerStatus != 0 {
		if answerBody, err = fileOrValue(*answer); err != nil {
			return err
		}
	}
	var r *http.Request
	if *path == "" {
		if r, err = http.ReadRequest(bufio.NewReader(stdin)); err != nil {
			return errors.New("fingerprint: reading a raw HTTP request from stdin: " + err.Error())
		}
	} else {
		b, err := fileOrValue(*body)
		if err != nil {
			return err
		}
		r = httptest.NewRequest(*method, *path, bytes.NewReader(b))
		for _, h := range headers {
			name, value, _ := strings.Cut(h, ":")
			r.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
	}
	e, err := gateway.Explain(cfg, *route, r, *explain, readers)
	if err != nil {
		return err
	}
	if *answerStatus != 0 {
		if e.Answer, err = gateway.ExplainAnswer(cfg, *route, *answerStatus, answerBody); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(e)
}

// fileOrValue is v, or the contents of the file v names after "@".
func fileOrValue(v string) ([]byte, error) {
	if name, ok := strings.CutPrefix(v, "@"); ok {
		return os.ReadFile(name)
	}
	return []byte(v), nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
