package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/faultproxy"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

// TestC14_LostStoreReplies (case C14): the reply to the claim script, or to the commit script, is
// lost between the built gateway and Redis (internal/faultproxy in between): its connection
// closes, or stalls past the store timeout. The store ran the script; go-redis or the gateway sends
// it again. The request executes once, or gets 503 before any upstream call (and its claim is
// released); a lost commit reply still ends in a receipt; the retries end in the replay of that
// one execution (Up×1); and no lease is logged as lost. TestChaos loses the replies of every
// transition among its other faults; this is the case alone, one transition at a time.
func TestC14_LostStoreReplies(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t, redistest.Options{})
	proxy := faultproxy.Start(t, redis.Addr())
	shas, err := ScriptSHAs()
	if err != nil {
		t.Fatal(err)
	}
	sb := StartSandbox(t)
	gw := StartGateway(t, WriteRoutes(t, "routes.yaml.tmpl", sb.URL),
		[]string{"IDEMGATEWAY_REDIS_URL=" + strings.Replace(redis.URL(), redis.Addr(), proxy.Addr(), 1)})
	for _, op := range []string{"claim", "commit"} {
		for _, fault := range []faultproxy.Fault{faultproxy.Close, faultproxy.Stall} {
			t.Run(op+" "+fault.String(), func(t *testing.T) {
				key := "c14-" + op + "-" + fault.String()
				before := sb.Stats(t).ByEndpoint[TicketsEndpoint]
				rule := faultproxy.NewRule(fault, func(args [][]byte) bool {
					got, recordKey := ScriptCall(shas, args)
					return got == op && strings.Contains(recordKey, key)
				})
				proxy.Add(rule)

				first := gw.do(t, Request{Key: key, Body: ticketBody})
				if !rule.Lost() {
					t.Fatalf("no reply of the %s script was lost (answer %d): the test proves nothing", op, first.Status)
				}
				executed := first.Status == http.StatusCreated
				t.Logf("the first answer: %d %s", first.Status, first.Decision())
				switch {
				case executed:
					expectDecision(t, first, http.StatusCreated, "execute")
				case op == "claim":
					expectProblem(t, first, http.StatusServiceUnavailable, "store-unavailable", "", true)
				default:
					t.Fatalf("the commit's reply lost: %d %s, want 201 execute", first.Status, first.Body)
				}

				// Retries until one is answered 201 (meanwhile 409: the claim, or the settle, is
				// still being sorted out in the background): the replay when the first executed,
				// else the one execution, which the next retry replays.
				var r Response
				eventually.True(t, "a retry answered 201", func() bool {
					r = gw.do(t, Request{Key: key, Body: ticketBody})
					if r.Status == http.StatusConflict && r.Decision() == "in_progress" {
						return false
					}
					return true
				})
				if !executed {
					expectDecision(t, r, http.StatusCreated, "execute")
					r = gw.do(t, Request{Key: key, Body: ticketBody})
				}
				expectDecision(t, r, http.StatusCreated, "replay")
				if got := sb.Stats(t).ByEndpoint[TicketsEndpoint] - before; got != 1 {
					t.Errorf("%d side effects, want 1", got)
				}
			})
		}
	}
	for line := range strings.Lines(gw.Out.String()) {
		var l struct{ Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && strings.Contains(l.Msg, "lease lost") {
			t.Errorf("the gateway logged a lost lease: %s", line)
		}
	}
}
