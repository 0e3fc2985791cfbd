package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/idemgateway/idemgateway/internal/eventually"
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

// TestPostgresCrashUnderLoad: keyed calls run against the PostgreSQL store while the database is
// stopped as `pg_ctl stop -m immediate` does (SIGQUIT: no checkpoint), then started again. Each
// key's body names it (external_id), so the sandbox tells how often each was executed. Afterwards
// every key is retried until the store decides it: no key was executed twice, and every key whose
// call was answered with a committed receipt (a 201 without Idempotency-Receipt: pending) replays
// that very answer: no receipt whose success reached a client was lost.
func TestPostgresCrashUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, postgresStore)
	const keys = 48
	body := func(i int) string { return fmt.Sprintf(`{"title":"load %d","external_id":"pg-%d"}`, i, i) }
	first := make([]Response, keys)
	var wg sync.WaitGroup
	answered := make(chan struct{}, keys)
	crashed := make(chan struct{})
	go func() { // crash the database once a quarter of the calls were answered, mid-load
		for range keys / 4 {
			<-answered
		}
		e.postgres.Crash()
		close(crashed)
	}()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < keys; i += 4 {
				r, err := e.gw.Send(Request{Key: fmt.Sprintf("pg-%d", i), Body: body(i)})
				if err == nil {
					first[i] = r
				}
				answered <- struct{}{}
			}
		}()
	}
	wg.Wait()
	<-crashed
	e.postgres.Restart()
	e.gw.waitReady(t)

	committed, refused := 0, 0
	for i := range keys {
		var r Response
		eventually.True(t, fmt.Sprintf("key pg-%d to be decided by the store", i), func() bool {
			var err error
			r, err = e.gw.Send(Request{Key: fmt.Sprintf("pg-%d", i), Body: body(i)})
			return err == nil && r.Status != http.StatusServiceUnavailable && r.Decision() != "in_progress"
		})
		if n := ticketsWith(t, e.sb, fmt.Sprintf("pg-%d", i)); n > 1 {
			t.Errorf("key pg-%d executed %d times", i, n)
		}
		f := first[i]
		if f.Status == http.StatusCreated && f.Header.Get("Idempotency-Receipt") == "" {
			committed++
			if r.Decision() != "replay" || string(r.Body) != string(f.Body) {
				t.Errorf("key pg-%d: answered 201 %s, then %d %q %s: the receipt was lost", i, f.Body, r.Status, r.Decision(), r.Body)
			}
		}
		if f.Status == http.StatusServiceUnavailable {
			refused++
		}
	}
	t.Logf("%d keys: %d committed before the crash or after, %d refused 503 while the database was down", keys, committed, refused)
	if committed == 0 {
		t.Error("no call committed: the test crashed the database before any call ran")
	}
}
