package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/faultproxy"
)

// ticketsWith returns how many tickets the sandbox created with external_id ext (its lookup).
func ticketsWith(t *testing.T, sb *Sandbox, ext string) int {
	t.Helper()
	resp, err := Client.Get(sb.URL + "/v1/tickets?external_id=" + url.QueryEscape(ext))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var found struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&found); err != nil {
		t.Fatal(err)
	}
	return len(found.Data)
}

// pgLoad sends keyed calls for keys pg-0 to pg-(keys-1), four at a time, each key's body naming it
// (external_id) so that the sandbox tells how often each was executed; fault runs (in a goroutine
// of its own) once a quarter of the calls were answered, and the calls go on meanwhile. It returns
// each key's first answer (a zero Response when the call failed).
func pgLoad(g *Gateway, keys int, fault func()) []Response {
	first := make([]Response, keys)
	answered := make(chan struct{}, keys)
	faulted := make(chan struct{})
	go func() {
		for range keys / 4 {
			<-answered
		}
		fault()
		close(faulted)
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < keys; i += 4 {
				if r, err := g.Send(pgCall(i)); err == nil {
					first[i] = r
				}
				answered <- struct{}{}
			}
		}()
	}
	wg.Wait()
	<-faulted
	return first
}

// pgCall is the call of key pg-i.
func pgCall(i int) Request {
	return Request{Key: fmt.Sprintf("pg-%d", i), Body: fmt.Sprintf(`{"title":"load %d","external_id":"pg-%d"}`, i, i)}
}

// expectNothingLost retries every key of pgLoad until the store decides it, and checks that no
// key was executed twice and that every key whose first call was answered with a committed
// receipt (a 201 without Idempotency-Receipt: pending) replays that very answer.
func expectNothingLost(t *testing.T, e *env, first []Response) {
	t.Helper()
	committed := 0
	for i := range first {
		var r Response
		eventually.True(t, fmt.Sprintf("key pg-%d to be decided by the store", i), func() bool {
			var err error
			r, err = e.gw.Send(pgCall(i))
			return err == nil && r.Status != http.StatusServiceUnavailable && r.Decision() != "in_progress"
		})
		if n := ticketsWith(t, e.sb, fmt.Sprintf("pg-%d", i)); n > 1 {
			t.Errorf("key pg-%d executed %d times", i, n)
		}
		if f := first[i]; f.Status == http.StatusCreated && f.Header.Get("Idempotency-Receipt") == "" {
			committed++
			if r.Decision() != "replay" || string(r.Body) != string(f.Body) {
				t.Errorf("key pg-%d: answered 201 %s, then %d %q %s: the receipt was lost", i, f.Body, r.Status, r.Decision(), r.Body)
			}
		}
	}
	t.Logf("%d keys, %d answered with a committed receipt the first time", len(first), committed)
	if committed == 0 {
		t.Error("no call committed before the fault: the test checked nothing")
	}
}

// TestPostgresCrashUnderLoad: keyed calls run against the PostgreSQL store while the database is
// stopped as `pg_ctl stop -m immediate` does (SIGQUIT: no checkpoint), then started again: no key
// was executed twice, and no receipt whose success reached a client was lost.
func TestPostgresCrashUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, postgresStore)
	first := pgLoad(e.gw, 48, e.postgres.Crash)
	e.postgres.Restart()
	e.gw.waitReady(t)
	expectNothingLost(t, e, first)
}

// TestPostgresConnectionsCut: the gateway reaches PostgreSQL through a proxy that cuts every
// connection, in both directions, three times under load (a statement's reply, a commit's
// acknowledgment, lost with them): no key was executed twice, no committed receipt lost.
func TestPostgresConnectionsCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, postgresStore)
	proxy := faultproxy.StartRaw(t, e.postgres.Addr())
	e.storeEnv = []string{"IDEMGATEWAY_POSTGRES_URL=postgres://postgres@" + proxy.Addr() + "/postgres?sslmode=disable"}
	e.gw = e.startGateway(t)
	first := pgLoad(e.gw, 48, func() {
		for range 3 {
			proxy.Cut()
			time.Sleep(20 * time.Millisecond) // a window of wall time between cuts, in which calls go on
		}
	})
	expectNothingLost(t, e, first)
}
