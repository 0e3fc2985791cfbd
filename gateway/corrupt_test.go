package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/internal/testlog"
	"github.com/idemgateway/idemgateway/record"
)

// TestCorruptRecordOneAnswer: a record that exists but cannot be read gets one answer, whichever
// store holds it and whichever layer is damaged (the store's own form of the record, or the
// gateway's payload in it): 500 corrupt-record, not retryable, no Retry-After, logged at ERROR with
// its key, and the upstream is not called. The admin API serves the same problem, and deletes the
// record without ?force, after which the key executes. A damaged Redis hash or bbolt value is never
// 503 store-unavailable, retryable: no retry can repair it.
func TestCorruptRecordOneAnswer(t *testing.T) {
	t.Parallel()
	const key, skey = "k", "default/create_ticket/k"
	ctx := context.Background()
	// payloadNot commits a record that the store reads but whose payload is no record.
	payloadNot := func(t *testing.T, store record.Store) record.Store {
		t.Helper()
		if _, _, _, err := store.Claim(ctx, skey, "o", nil, time.Minute, time.Hour); err != nil {
			t.Fatal(err)
		}
		if ok, err := store.Commit(ctx, skey, "o", []byte("not a record"), time.Hour); !ok || err != nil {
			t.Fatal(ok, err)
		}
		return store
	}
	cases := []struct {
		name    string
		corrupt func(t *testing.T) record.Store // a store holding a damaged record at skey
	}{
		{"embedded/value", func(t *testing.T) record.Store {
			return openEmbeddedHolding(t, skey, []byte("not a record"))
		}},
		{"embedded/payload", func(t *testing.T) record.Store { return payloadNot(t, openEmbedded(t)) }},
		{"redis/hash", func(t *testing.T) record.Store {
			store, srv := openRedisServer(t, redistest.Options{})
			noState := map[string]any{"owner": "o", "lease_until": "9999999999999", "payload": "p"}
			if err := rawRedis(t, srv).HSet(ctx, redisRecordKey(skey), noState).Err(); err != nil {
				t.Fatal(err)
			}
			return store
		}},
		{"redis/payload", func(t *testing.T) record.Store { return payloadNot(t, openRedis(t)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up, executions := countingUpstream(t)
			logs := &testlog.Buffer{}
			srv, _, gw := newGatewayOn(t, tc.corrupt(t), ticketsYAML(up.URL), gateway.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}

			a := do(t, "POST", srv.URL+"/v1/tickets", h, `{}`)
			if a.status != http.StatusInternalServerError || !strings.HasSuffix(fmt.Sprint(a.problem["type"]), ":corrupt-record") ||
				a.problem["retryable"] != false || a.problem["decision"] != gateway.DecisionRejected || a.header.Get("Retry-After") != "" {
				t.Errorf("retry of a corrupt record: %d, Retry-After %q, %v; want 500 corrupt-record, not retryable, rejected, no Retry-After",
					a.status, a.header.Get("Retry-After"), a.problem)
			}
			if n := executions.Load(); n != 0 {
				t.Errorf("the upstream was called %d times for a corrupt record, want 0", n)
			}
			if !hasLog(t, logs, "ERROR", "the key's record is unreadable", key) {
				t.Errorf("no ERROR line names the corrupt record's key:\n%s", logs.String())
			}

			admin := gw.AdminHandler("")
			code, p := adminDo(t, admin, "GET", "/v1/records/default/create_ticket/"+key, "", "")
			if code != http.StatusInternalServerError || !strings.HasSuffix(fmt.Sprint(p["type"]), ":corrupt-record") || p["retryable"] != false {
				t.Errorf("admin GET of a corrupt record: %d %v; want 500 corrupt-record, not retryable", code, p)
			}
			if code, p := adminDo(t, admin, "DELETE", "/v1/records/default/create_ticket/"+key, "", ""); code != http.StatusNoContent {
				t.Fatalf("admin DELETE of a corrupt record: %d %v; want 204", code, p)
			}
			if a := do(t, "POST", srv.URL+"/v1/tickets", h, `{}`); a.status != http.StatusCreated || executions.Load() != 1 {
				t.Errorf("the key after the delete: %d, %d executions; want 201 and 1", a.status, executions.Load())
			}
		})
	}
}

// openEmbeddedHolding opens an embedded store in a temporary directory of t whose records bucket
// holds value at skey as it is, written with bbolt directly (the layout is boltstore's package
// comment), so that the store's own decoding meets it.
func openEmbeddedHolding(t *testing.T, skey string, value []byte) record.Store {
	t.Helper()
	dir := t.TempDir()
	s, err := boltstore.Open(dir, boltstore.Options{}) // creates the file and its buckets
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, boltstore.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("records")).Put([]byte(skey), value) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err = boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
