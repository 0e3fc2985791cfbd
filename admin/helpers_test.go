package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/redisstore"
)

// openEmbedded opens an embedded store in a directory of the test's, closed when it ends.
func openEmbedded(t *testing.T) record.Store {
	t.Helper()
	s, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openRedis starts a redis-server of the test's and opens a store on it; raw is a plain client
// of the server, for the test to change it.
func openRedis(t *testing.T) (store *redisstore.Store, raw *redis.Client) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	store, err = redisstore.New(redis.NewClient(opts), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	raw = redis.NewClient(opts)
	t.Cleanup(func() { _ = raw.Close() })
	return store, raw
}

// markUnknown stores an outcome_unknown record at the scope key of tenant, tool and key, as an
// execution whose upstream answered 502 leaves it.
func markUnknown(t *testing.T, s record.Store, tenant, tool, key string) {
	t.Helper()
	skey := record.ScopeKey{Tenant: tenant, Tool: tool, Key: key}.String()
	rec := &record.Record{Receipt: record.Receipt{IdempotencyKey: key, Tenant: tenant, Tool: tool,
		EffectFingerprint: "sha256:" + strings.Repeat("0", 64), Executions: 1}, Owner: record.NewOwner(), StartedAt: time.Now()}
	ctx := context.Background()
	if claimed, _, _, err := s.Claim(ctx, skey, rec.Owner, rec.Encode(), time.Minute, time.Hour); err != nil || !claimed {
		t.Fatalf("Claim: %v %v", claimed, err)
	}
	rec.Detail = "upstream answered 502"
	if ok, err := s.MarkUnknown(ctx, skey, rec.Owner, rec.EncodeSettle(), time.Hour); err != nil || !ok {
		t.Fatalf("MarkUnknown: %v %v", ok, err)
	}
}

// adminDo sends method path (with body as application/json when not "") to admin, with the
// bearer token when not "", and returns the status and the decoded JSON answer.
func adminDo(t *testing.T, admin http.Handler, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	admin.ServeHTTP(w, req)
	var v map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &v)
	return w.Code, v
}

// clock is a clock that moves only when the test advances it.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }
