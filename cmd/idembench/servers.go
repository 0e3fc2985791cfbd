package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpfront"
	"github.com/idemgateway/idemgateway/pgstore"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
	"github.com/idemgateway/idemgateway/routes"
	gwserver "github.com/idemgateway/idemgateway/server"
)

// Body sizes, in bytes, of the requests and of the upstream's responses.
const (
	smallBody  = 256
	mediumBody = 1 << 10 // the default of every measure that names no size
	largeBody  = 64 << 10
)

// routePath is the path of the one route, on the gateway, the bare proxy and the upstream.
const routePath = "/v1/tickets"

// padding fills bodies up to their size.
var padding = strings.Repeat("x", largeBody)

// makeBody returns a JSON object of exactly size bytes (at least the object's fixed part) whose
// title is key: bodies differ per key, as different operations of an agent would (the same body
// under many keys would make the gateway report key churn on every execution), and a replay sends
// the same body as the execution it replays.
func makeBody(key string, size int) []byte {
	const head, mid, tail = `{"title":"`, `","pad":"`, `"}`
	pad := max(size-len(head)-len(key)-len(mid)-len(tail), 0)
	b := make([]byte, 0, size)
	b = append(b, head...)
	b = append(b, key...)
	b = append(b, mid...)
	b = append(b, padding[:pad]...)
	return append(b, tail...)
}

// upstream answers every request 201 with a JSON body of the request body's size (1 KiB for a
// size it was not built for), {"id":"T-1","url":…,"pad":"xx…"}, after reading the request whole.
type upstream struct {
	bodies map[int][]byte
}

func newUpstream() *upstream {
	u := &upstream{bodies: make(map[int][]byte)}
	for _, size := range []int{smallBody, mediumBody, largeBody} {
		const head, tail = `{"id":"T-1","url":"https://tickets.example/T-1","pad":"`, `"}`
		u.bodies[size] = []byte(head + padding[:size-len(head)-len(tail)] + tail)
	}
	return u
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	body, ok := u.bodies[int(n)]
	if !ok {
		body = u.bodies[mediumBody]
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

// newBareProxy returns the baseline: an httputil.ReverseProxy to target with the gateway's tuned
// transport and nothing else.
func newBareProxy(target *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: gateway.NewTransport(),
	}
}

// routesYAML is the gateway's routes file (a format string: the upstream's URL): the contract's
// create_ticket route (a key is required, the whole body is the effect) in front of the upstream,
// with room for the 64 KiB bodies; and a kind: mcp route on each path of the MCP server (mcp.go),
// whose create_ticket tool takes its key from params._meta (on mcpArgPath also from an argument)
// and keeps the remote id (docs/mcp.md#fronting-an-mcp-server).
const routesYAML = `
upstreams:
  tickets: {url: %[1]s, timeout: 10s}
  tickets_mcp: {url: %[1]s, timeout: 10s}
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: ` + routePath + `
    class: non_idempotent
    receipt: {remote_id: /id, remote_url: /url}
    max_body_bytes: 1048576
  - name: mcp_json
    kind: mcp
    upstream: tickets_mcp
    path: ` + mcpJSONPath + `
    key: {meta: ` + mcpKeyMeta + `}
    tools:
      create_ticket: {receipt: {remote_id: /result/structuredContent/id, remote_url: /result/structuredContent/url}}
  - name: mcp_sse
    kind: mcp
    upstream: tickets_mcp
    path: ` + mcpSSEPath + `
    key: {meta: ` + mcpKeyMeta + `}
    tools:
      create_ticket: {receipt: {remote_id: /result/structuredContent/id, remote_url: /result/structuredContent/url}}
  - name: mcp_json_arg
    kind: mcp
    upstream: tickets_mcp
    path: ` + mcpArgPath + `
    key: {meta: ` + mcpKeyMeta + `, argument: ` + mcpKeyArg + `}
    tools:
      create_ticket: {receipt: {remote_id: /result/structuredContent/id, remote_url: /result/structuredContent/url}}
`

// newRedisClient returns a go-redis client of addr configured as cmd/idemgateway configures it by
// default (go-redis's pool size, 5 s dial, 3 s read and write timeouts, context deadlines honoured).
func newRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		DialTimeout:           5 * time.Second,
		ReadTimeout:           3 * time.Second,
		WriteTimeout:          3 * time.Second,
		ContextTimeoutEnabled: true,
	})
}

// newRedisGateway returns the gateway in front of target on a Redis store at redisAddr whose
// client counts its round trips in trips (nil: not counted), auto-pipelined with autoPipeline
// (redisstore.Options.AutoPipeline). The returned close function closes the store.
func newRedisGateway(target *url.URL, redisAddr string, trips *roundTrips, autoPipeline bool) (*gateway.Gateway, func(), error) {
	client := newRedisClient(redisAddr)
	if trips != nil {
		client.AddHook(trips)
	}
	store, err := redisstore.New(client, redisstore.Options{AutoPipeline: autoPipeline})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return newGateway(target, store)
}

// newEmbeddedGateway returns the gateway in front of target on the embedded store in dir, opened
// as cmd/idemgateway opens it (boltstore's defaults). The returned close function closes the
// store.
func newEmbeddedGateway(target *url.URL, dir string) (*gateway.Gateway, func(), error) {
	store, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		return nil, nil, err
	}
	return newGateway(target, store)
}

// newPostgresPool returns a pool on the PostgreSQL at url as cmd/idemgateway opens one
// (pgstore.ParseConfig's size).
func newPostgresPool(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	cfg, err := pgstore.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// newPostgresFloorOn returns the floor's store on the PostgreSQL at url, on a pool of the size
// the gateway's has.
func newPostgresFloorOn(dbURL string) (postgresFloor, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := newPostgresPool(ctx, dbURL)
	if err != nil {
		return postgresFloor{}, nil, err
	}
	store, err := newPostgresFloor(ctx, pool)
	if err != nil {
		pool.Close()
		return postgresFloor{}, nil, fmt.Errorf("the floor's table: %w", err)
	}
	return store, pool.Close, nil
}

// newPostgresGateway returns the gateway in front of target on the PostgreSQL store at url, as
// cmd/idemgateway opens it (pgstore.ParseConfig's pool, schema idemgateway).
func newPostgresGateway(target *url.URL, dbURL string) (*gateway.Gateway, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := newPostgresPool(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	store, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	gw, closeStore, err := newGateway(target, store)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return gw, func() { closeStore(); pool.Close() }, nil
}

// newGateway returns the gateway in front of target on store, which it compresses as
// cmd/idemgateway does (record.Compressed: parts from 4 KiB). It logs as cmd/idemgateway does by
// default (JSON at level info), to io.Discard: the access line is formatted, not written; and
// without a tracer provider, as cmd/idemgateway runs without OTEL_TRACES_EXPORTER. The returned
// close function closes the store; on error, the store is closed.
func newGateway(target *url.URL, store interface {
	record.Store
	Close() error
}) (*gateway.Gateway, func(), error) {
	closeStore := func() { _ = store.Close() }
	stored := record.Compressed(store, record.DefaultCompressMinBytes) // as cmd/idemgateway wraps every store
	cfg, err := routes.Parse("idembench-routes.yaml", fmt.Appendf(nil, routesYAML, target), nil)
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	gw, err := gateway.New(cfg, stored, gateway.Options{
		Logger:    slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Transport: gateway.NewTransport(),
		Fronts:    map[routes.Kind]gateway.NewFront{routes.KindMCP: mcpfront.New},
	})
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	return gw, closeStore, nil
}

// server is an http.Server on a free 127.0.0.1 port.
type server struct {
	srv *http.Server
	url string // http://127.0.0.1:<port>
}

// serve serves h on a free loopback port with cmd/idemgateway's header and idle timeouts: the
// upstream, the bare proxy and the floor.
func serve(h http.Handler) (*server, error) {
	return listen(&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute})
}

// serveGateway serves the gateway as cmd/idemgateway does: server.New, whose per-request
// deadlines (docs/security.md#deadlines) are part of its cost, with the default limits.
func serveGateway(h http.Handler) (*server, error) {
	srv, err := gwserver.New(h, gwserver.Limits{})
	if err != nil {
		return nil, err
	}
	return listen(srv)
}

func listen(srv *http.Server) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve(l) }()
	return &server{srv: srv, url: "http://" + l.Addr().String()}, nil
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
