package gateway_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/pgtest"
	"github.com/idemgateway/idemgateway/pgstore"
	"github.com/idemgateway/idemgateway/record"
)

// openPostgres starts a PostgreSQL server for t and returns a store on it.
func openPostgres(t *testing.T) record.Store {
	t.Helper()
	srv := pgtest.Start(t)
	pool, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(context.Background(), pool, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSettleSendsNoDocument (docs/record-format.md): a record's canonical document is stored once,
// in the claim part. A commit, a mark unknown and an operator's resolve store the settle part,
// which never holds it again; the record read back still has it, so a conflict can name the
// fields that differ. On every store.
func TestSettleSendsNoDocument(t *testing.T) {
	t.Parallel()
	const marker = "document-marker-9f1c"
	stores := []struct {
		name string
		open storeFactory
	}{{"embedded", openEmbedded}, {"redis", openRedis}, {"postgres", openPostgres}}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			store := s.open(t)
			up := newHeldUpstream(t, func(n int32) int {
				if n == 1 {
					return http.StatusCreated
				}
				return http.StatusBadGateway // unknown: marked, then resolved
			})
			up.releaseAll()
			srv, _, gw := newGatewayOn(t, store, ticketsYAML(up.URL), gateway.Options{})
			body := `{"title":"` + marker + `"}`
			for _, c := range []struct{ key, want string }{{"committed", "201 execute"}, {"unknown", "502 execute"}, {"resolved", "502 execute"}} {
				if r, err := send(srv.URL, c.key, body); err != nil || r.String() != c.want {
					t.Fatalf("%s: %s %v, want %s", c.key, r, err, c.want)
				}
			}
			if code, rec := adminDo(t, gw.AdminHandler(""), http.MethodPost, "/v1/records/default/create_ticket/resolved/resolve", "", `{"outcome":"committed","remote_id":"T-7"}`); code != http.StatusOK {
				t.Fatalf("resolve: %d %v", code, rec)
			}
			for _, key := range []string{"committed", "unknown", "resolved"} {
				state, stored, err := store.Get(context.Background(), record.ScopeKey{Tenant: "default", Tool: "create_ticket", Key: key}.String())
				if err != nil {
					t.Fatal(err)
				}
				if len(stored.Settle) == 0 || bytes.Contains(stored.Settle, []byte(marker)) {
					t.Errorf("%s: the settle part (%d bytes) holds the canonical document, which the claim part holds already", key, len(stored.Settle))
				}
				if rec, err := record.Decode(state, stored); err != nil || !bytes.Contains(rec.Document, []byte(marker)) {
					t.Errorf("%s: the record read back has the document %q (%v), want the request's", key, rec.Document, err)
				}
			}
		})
	}
}
