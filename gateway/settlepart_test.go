package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/record"
)

// TestSettleSendsNoDocument (docs/record-format.md): a record's canonical document is stored once,
// in the claim part. A commit, a mark unknown and an operator's resolve store the settle part,
// which never holds it again; the record read back still has it, so a conflict can name the
// fields that differ. On every store.
func TestSettleSendsNoDocument(t *testing.T) {
	t.Parallel()
	const marker = "document-marker-9f1c"
	forStores(t, everyStore, func(t *testing.T, open storeFactory) {
		store := open(t)
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

// TestConflictReadsTheClaimPart (docs/stores.md#the-claims-answer): a claim answers a settled
// record with its settle part alone, so a replay reads no document; a request of another effect
// reads the claim part with one Get more, and its conflict still names the fields that differ. A
// record that changes between the two reads is not judged by another execution's claim part: 503,
// and the request sent again executes on the key, free by then. On every store.
func TestConflictReadsTheClaimPart(t *testing.T) {
	t.Parallel()
	forStores(t, everyStore, func(t *testing.T, open storeFactory) {
		up, executions := countingUpstream(t)
		store := &claimAnswers{Store: open(t)}
		srv, _, _ := newGatewayOn(t, store, ticketsYAML(up.URL), gateway.Options{})
		sendWant := func(body, want string) reply {
			t.Helper()
			r, err := send(srv.URL, "k", body)
			if err != nil || r.String() != want {
				t.Fatalf("%s: %s %v %v, want %s", body, r, err, r.problem, want)
			}
			return r
		}
		sendWant(`{"title":"Disk full"}`, "201 execute")
		sendWant(`{"title":"Disk full"}`, "201 replay")
		if n := store.gets.Load(); n != 0 {
			t.Errorf("a replay read the record %d times more, want 0", n)
		}
		r := sendWant(`{"title":"Disk empty"}`, "422 conflict")
		if got := fmt.Sprint(r.problem["differing_fields"]); got != "[/title]" {
			t.Errorf("conflict: differing_fields %s, want [/title]", got)
		}
		if n := store.gets.Load(); n != 1 {
			t.Errorf("a conflict read the record %d times more, want 1", n)
		}

		store.deleteOnGet.Store(true) // the record goes between the claim and the read
		r = sendWant(`{"title":"Disk empty"}`, "503 ")
		if r.problem["type"] != "urn:idemgateway:problem:store-unavailable" || r.retryAfter == "" {
			t.Errorf("a record that changed under the read: %v, Retry-After %q; want store-unavailable, with Retry-After", r.problem, r.retryAfter)
		}
		sendWant(`{"title":"Disk empty"}`, "201 execute")
		if n := executions.Load(); n != 2 {
			t.Errorf("%d upstream executions, want 2", n)
		}
		if n := store.withClaimPart.Load(); n != 0 {
			t.Errorf("%d claims answered a settled record with its claim part, want none", n)
		}
	})
}

// claimAnswers is a real store that counts the claims that answered a settled record with its
// claim part (record.Store.Claim leaves it out) and the Gets; a Get deletes the record first
// once deleteOnGet is set.
type claimAnswers struct {
	record.Store
	withClaimPart, gets atomic.Int32
	deleteOnGet         atomic.Bool
}

func (c *claimAnswers) Claim(ctx context.Context, key, owner string, payload []byte, lease, ttl time.Duration) (bool, string, record.Payload, error) {
	claimed, state, stored, err := c.Store.Claim(ctx, key, owner, payload, lease, ttl)
	if len(stored.Settle) > 0 && len(stored.Claim) > 0 {
		c.withClaimPart.Add(1)
	}
	return claimed, state, stored, err
}

func (c *claimAnswers) Get(ctx context.Context, key string) (string, record.Payload, error) {
	c.gets.Add(1)
	if c.deleteOnGet.Swap(false) {
		if _, err := c.Store.Delete(ctx, key); err != nil {
			return "", record.Payload{}, err
		}
	}
	return c.Store.Get(ctx, key)
}

// TestConflictWithEveryKindOfSettle: a request of another effect meets a record marked
// outcome_unknown, and then the same record resolved by an operator (both settle parts without the
// document), on every store, plain and wrapped in encryption and compression at rest (a document
// over the compression threshold): each gets 422 naming /title, read from the claim part; the
// same effect replays the resolve.
func TestConflictWithEveryKindOfSettle(t *testing.T) {
	t.Parallel()
	var kinds []storeKind // each store, plain and wrapped
	for _, s := range everyStore {
		kinds = append(kinds, s, storeKind{s.name + "-encrypted-compressed", func(t *testing.T) record.Store {
			enc, err := record.Encrypted(s.open(t), bytes.Repeat([]byte{7}, 32))
			if err != nil {
				t.Fatal(err)
			}
			return record.Compressed(enc, 1)
		}})
	}
	forStores(t, kinds, func(t *testing.T, open storeFactory) {
		up, _ := unknownUpstream(t)
		store := &claimAnswers{Store: open(t)}
		srv, _, gw := newGatewayOn(t, store, `
upstreams:
  u: {url: "`+up.URL+`", timeout: 5s}
routes:
  - {name: create_ticket, upstream: u, method: POST, path: /v1/tickets, class: non_idempotent, outcome: {committed: [201]}}
`, gateway.Options{})
		pad := strings.Repeat("x", 3000)
		body, other := `{"title":"Disk full","pad":"`+pad+`"}`, `{"title":"Disk empty","pad":"`+pad+`"}`
		if r, err := send(srv.URL, "k", body); err != nil || r.String() != "502 execute" {
			t.Fatalf("first: %s %v", r, err)
		}
		conflict := func(what string) {
			t.Helper()
			if r, err := send(srv.URL, "k", other); err != nil || r.String() != "422 conflict" || fmt.Sprint(r.problem["differing_fields"]) != "[/title]" {
				t.Errorf("%s: %s %v %v; want 422 naming /title", what, r, err, r.problem)
			}
		}
		conflict("marked unknown")
		if code, rec := adminDo(t, gw.AdminHandler(""), http.MethodPost, "/v1/records/default/create_ticket/k/resolve", "", `{"outcome":"committed","remote_id":"T-9"}`); code != http.StatusOK {
			t.Fatalf("resolve: %d %v", code, rec)
		}
		conflict("resolved")
		if r, err := send(srv.URL, "k", body); err != nil || r.String() != "201 replay" {
			t.Errorf("replay of the resolved record: %s %v", r, err)
		}
		if n := store.withClaimPart.Load(); n != 0 {
			t.Errorf("%d claims answered a settled record with its claim part, want none", n)
		}
	})
}

// TestDamagedClaimPartAlone: with encryption at rest, a committed record whose settle part opens
// but whose claim part does not (stored in the clear) still replays: the settle part,
// authenticated, holds all a replay serves, and the claim's answer leaves the claim part out. A
// request of another effect, which reads the claim part, and the admin API get 500
// corrupt-record, and nothing executes (docs/stores.md#the-claims-answer).
func TestDamagedClaimPartAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up, executions := countingUpstream(t)
	raw := openEmbedded(t)
	enc, err := record.Encrypted(raw, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	srv, _, gw := newGatewayOn(t, enc, ticketsYAML(up.URL), gateway.Options{})
	body := `{"title":"Disk full"}`
	if r, err := send(srv.URL, "a", body); err != nil || r.String() != "201 execute" {
		t.Fatalf("first: %s %v", r, err)
	}
	_, p, err := enc.Get(ctx, record.ScopeKey{Tenant: "default", Tool: "create_ticket", Key: "a"}.String())
	if err != nil {
		t.Fatal(err)
	}
	// Key k: the claim part in the clear (it does not open), the settle part of key a sealed for k.
	k := record.ScopeKey{Tenant: "default", Tool: "create_ticket", Key: "k"}.String()
	if _, _, _, err := raw.Claim(ctx, k, "o", []byte("in the clear"), time.Minute, time.Hour); err != nil {
		t.Fatal(err)
	}
	if ok, err := enc.Commit(ctx, k, "o", p.Settle, time.Hour); !ok || err != nil {
		t.Fatalf("commit: %v %v", ok, err)
	}
	if r, err := send(srv.URL, "k", body); err != nil || r.String() != "201 replay" {
		t.Errorf("same effect: %s %v %v, want 201 replay", r, err, r.problem)
	}
	if r, err := send(srv.URL, "k", `{"title":"Disk empty"}`); err != nil || r.status != http.StatusInternalServerError || r.problem["type"] != "urn:idemgateway:problem:corrupt-record" {
		t.Errorf("another effect: %s %v %v, want 500 corrupt-record", r, err, r.problem)
	}
	if code, _ := adminDo(t, gw.AdminHandler(""), http.MethodGet, "/v1/records/default/create_ticket/k", "", ""); code != http.StatusInternalServerError {
		t.Errorf("admin GET: %d, want 500", code)
	}
	if n := executions.Load(); n != 1 {
		t.Errorf("%d upstream executions, want 1", n)
	}
}
