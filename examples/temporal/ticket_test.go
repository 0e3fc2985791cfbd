package ticketflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// TestOneTicketAcrossRetries: the upstream holds the first call past the attempt's deadline, so
// the attempt fails and the engine runs the activity again, by Temporal's default retry policy,
// while the upstream still works on the first: the second attempt is told the call is in
// progress. The third lets the first call end, and starts once its receipt is stored (the test
// environment skips the retries' backoff, so without the wait they could all come before the
// commit); the retries carry the same key, and it answers with the receipt. One ticket, which the
// workflow returns.
//
// The attempt ends by its HTTP client's timeout (1 s), not by StartToClose: the SDK's test
// environment ends the workflow on a StartToClose timeout instead of retrying it as a Temporal
// server does (executeActivityWithRetryForTest returns on context.DeadlineExceeded). Either way the
// engine retries an attempt that ended without an answer, which is what the gateway must survive.
func TestOneTicketAcrossRetries(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	gw, store := newGateway(t, up.URL, "30s")
	env := newEnv(t, gw, &http.Client{Timeout: time.Second})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.Attempt < 3 {
			return
		}
		up.release() // the engine retried twice: the first call may end now
		key := record.ScopeKey{Tenant: routes.DefaultTenant, Tool: "create_ticket", Key: info.WorkflowExecution.ID + "/" + info.ActivityID}.String()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) { // bounds a hang only
			if state, _, err := store.Get(context.Background(), key); err == nil && state == record.StateCommitted {
				return
			}
		}
	})
	env.ExecuteWorkflow(TicketWorkflow, "Printer on fire")
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("the workflow: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var id string
	if err := env.GetWorkflowResult(&id); err != nil || id != "T-1" {
		t.Errorf("the workflow returned %q (%v), want T-1", id, err)
	}
	if n := up.creates.Load(); n != 1 {
		t.Errorf("the upstream created %d tickets, want 1", n)
	}
}

// TestUnknownOutcomeStopsTheWorkflow: the upstream takes the call and never answers within the
// route's timeout: the gateway answers that the outcome is unknown, and the activity hands that to
// the workflow as a non-retryable error instead of letting the engine retry forever (every retry
// would be refused until someone checks the upstream).
func TestUnknownOutcomeStopsTheWorkflow(t *testing.T) {
	t.Parallel()
	up := newUpstream(t) // never released: the call outlives the route's 200ms timeout
	gw, _ := newGateway(t, up.URL, "200ms")
	env := newEnv(t, gw, nil)
	var attempts atomic.Int32
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { attempts.Add(1) })
	env.ExecuteWorkflow(TicketWorkflow, "Printer on fire")
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &appErr) || !appErr.NonRetryable() || !strings.HasSuffix(appErr.Type(), "upstream-timeout") {
		t.Fatalf("the workflow's error %v, want the gateway's non-retryable upstream-timeout", err)
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("%d attempts, want 1: an unknown outcome is not retried", n)
	}
	if n := up.requests.Load(); n != 1 {
		t.Errorf("the upstream got %d requests, want 1", n)
	}
}

// upstream creates tickets T-1, T-2, …, each call held until release (or the test's end).
type upstream struct {
	*httptest.Server
	requests, creates atomic.Int32
	hold              chan struct{}
	once              sync.Once
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{hold: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		<-u.hold // the upstream works: the test decides for how long
		n := u.creates.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"T-%d"}`, n)
	}))
	t.Cleanup(func() { u.release(); u.Close() })
	return u
}

func (u *upstream) release() { u.once.Do(func() { close(u.hold) }) }

// newGateway serves a gateway on its embedded store (returned too) with one route, POST
// /v1/tickets, in front of upstream with the given timeout (the route file of examples/routes.yaml,
// reduced).
func newGateway(t *testing.T, upstream, timeout string) (*httptest.Server, record.Store) {
	t.Helper()
	cfg, err := routes.Parse("routes.yaml", []byte(fmt.Sprintf(`
upstreams:
  tickets: {url: %q, timeout: %s}
routes:
  - name: create_ticket
    upstream: tickets
    method: POST
    path: /v1/tickets
    class: non_idempotent
    receipt: {remote_id: /id}
`, upstream, timeout)), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	gw, err := gateway.New(cfg, store, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv, store
}

// newEnv is the SDK's test environment with the workflow, and the activities calling gw with
// client (nil: http.DefaultClient).
func newEnv(t *testing.T, gw *httptest.Server, client *http.Client) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	// The environment's own limit on a run in wall time (3 s by default) would end the first test
	// before its first attempt times out (StartToClose): it only bounds a hang here.
	env.SetTestTimeout(2 * time.Minute)
	env.RegisterWorkflow(TicketWorkflow)
	env.RegisterActivity(&Activities{GatewayURL: gw.URL + "/v1/tickets", Client: client})
	return env
}
