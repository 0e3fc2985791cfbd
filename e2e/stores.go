package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"text/template"

	"github.com/idemgateway/idemgateway/internal/deadaddr"
	"github.com/idemgateway/idemgateway/internal/pgtest"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

// storeKind names a store the gateway can run on.
type storeKind string

const (
	embeddedStore storeKind = "embedded" // IDEMGATEWAY_DATA_DIR
	redisStore    storeKind = "redis"    // IDEMGATEWAY_REDIS_URL, a redis-server of the test's own
	postgresStore storeKind = "postgres" // IDEMGATEWAY_POSTGRES_URL, a PostgreSQL of the test's own
)

var storeKinds = []storeKind{embeddedStore, redisStore, postgresStore}

// env is one test's world: a sandbox, a routes file pointing at it, a store, and a gateway.
type env struct {
	kind     storeKind
	sb       *Sandbox
	gw       *Gateway
	redis    *redistest.Server // nil on the other stores
	postgres *pgtest.Server    // nil on the other stores
	routes   string            // path of the routes file
	storeEnv []string          // the gateway's store settings, and envOptions.env
}

// envOptions change what newEnv starts.
type envOptions struct {
	redis  redistest.Options // options of the redis-server, on the Redis store
	routes string            // the routes template in testdata; default routes.yaml.tmpl
	env    []string          // more settings of every gateway process, e.g. IDEMGATEWAY_SHUTDOWN_GRACE=1s
}

// newEnv starts a store of kind, a sandbox and a gateway for t; all stop when t ends.
func newEnv(t *testing.T, kind storeKind, opts ...envOptions) *env {
	t.Helper()
	var o envOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	e := &env{kind: kind}
	switch kind {
	case embeddedStore:
		e.storeEnv = []string{"IDEMGATEWAY_DATA_DIR=" + filepath.Join(t.TempDir(), "data")}
	case redisStore:
		e.redis = redistest.Start(t, o.redis)
		e.storeEnv = []string{"IDEMGATEWAY_REDIS_URL=" + e.redis.URL()}
	case postgresStore:
		e.postgres = pgtest.Start(t)
		e.storeEnv = []string{"IDEMGATEWAY_POSTGRES_URL=" + e.postgres.URL()}
	default:
		t.Fatalf("unknown store kind %q", kind)
	}
	e.storeEnv = append(e.storeEnv, o.env...)
	e.sb = StartSandbox(t)
	if o.routes == "" {
		o.routes = "routes.yaml.tmpl"
	}
	e.routes = WriteRoutes(t, o.routes, e.sb.URL)
	e.gw = e.startGateway(t)
	return e
}

// startGateway starts another gateway process on e's routes and store.
func (e *env) startGateway(t *testing.T) *Gateway {
	t.Helper()
	return StartGateway(t, e.routes, e.storeEnv)
}

// forEachStore runs test as a parallel subtest per store kind, each in its own env (started with
// opts, if any).
func forEachStore(t *testing.T, test func(t *testing.T, e *env), opts ...envOptions) {
	t.Helper()
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			test(t, newEnv(t, kind, opts...))
		})
	}
}

// WriteRoutes executes the routes template testdata/name for the sandbox at sandboxURL into t's
// temporary directory and returns the file's path.
func WriteRoutes(t *testing.T, name, sandboxURL string) string {
	t.Helper()
	tmpl, err := template.ParseFiles(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("routes template: %v", err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, map[string]string{"Sandbox": sandboxURL, "Dead": deadaddr.URL(t)}); err != nil {
		t.Fatalf("routes template %s: %v", name, err)
	}
	path := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
