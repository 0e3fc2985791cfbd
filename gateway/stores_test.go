package gateway_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

var (
	_ record.Store          = (*boltstore.Store)(nil)
	_ record.Store          = (*redisstore.Store)(nil)
	_ record.SettleNotifier = (*redisstore.Store)(nil)
)

// storeFactory opens a new, empty store for the test t; the store is closed when t ends.
type storeFactory func(t *testing.T) record.Store

// storeKinds are the stores the gateway's behaviour tests run on: the embedded store, and Redis (a
// redis-server of the test's own, started by internal/redistest), whose settle notices wake the
// waiters of other gateway processes.
var storeKinds = []struct {
	name string
	open storeFactory
}{
	{"embedded", openEmbedded},
	{"redis", openRedis},
}

// forEachStore runs test as a parallel subtest per store kind, named after it.
func forEachStore(t *testing.T, test func(t *testing.T, open storeFactory)) {
	t.Helper()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			test(t, kind.open)
		})
	}
}

// openEmbedded opens a boltstore in a temporary directory of t.
func openEmbedded(t *testing.T) record.Store {
	t.Helper()
	store, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// openRedis starts a redis-server for t and returns a store on it.
func openRedis(t *testing.T) record.Store {
	t.Helper()
	store, _ := openRedisServer(t, redistest.Options{})
	return store
}

// openRedisServer starts a redis-server for t with opts and returns a store on it, and the server.
func openRedisServer(t *testing.T, opts redistest.Options) (*redisstore.Store, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t, opts)
	return redisStoreOn(t, srv), srv
}

// redisStoreOn returns a store of its own (its own client and notice connection, as another
// gateway process has) on srv.
func redisStoreOn(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	copts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	store, err := redisstore.New(redis.NewClient(copts), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// rawRedis returns a plain client of srv, for a test to read or change the server directly;
// it is closed when t ends.
func rawRedis(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	copts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	raw := redis.NewClient(copts)
	t.Cleanup(func() { _ = raw.Close() })
	return raw
}

// redisRecordKey is the Redis key redisstore keeps the record at store key skey under, with the
// default prefix (redisstore/key.go; the test keys need no escaping).
func redisRecordKey(skey string) string {
	return redisstore.DefaultPrefix + "{" + skey + "}"
}

// setMaxmemory sets the server's maxmemory: "1" makes every write that grows memory fail with
// OOM (noeviction), "0" lifts the limit.
func setMaxmemory(t *testing.T, raw *redis.Client, v string) {
	t.Helper()
	if err := raw.ConfigSet(context.Background(), "maxmemory", v).Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory %s: %v", v, err)
	}
}

// quiet drops go-redis's own log lines (a stopped server makes "failed to dial" lines); the tests
// report what matters themselves.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}
