package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestShutdownGraceRunsOut: SIGTERM while an upstream call is held longer than the shutdown grace
// (IDEMGATEWAY_SHUTDOWN_GRACE=1s). The process exits once the grace is over, after marking the
// cut-off call outcome_unknown (Abandon) and saying so in its log. The upstream then acts after
// its caller left; the next process on the store refuses the retry, so nothing executes twice.
// (A README promise that no test exercised; issue 11.)
func TestShutdownGraceRunsOut(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, e *env) {
		req := request{Key: "grace-1", Body: ticketBody}
		first := goSend(e.gw, held(req, "grace-1"))
		e.sb.waitHeld(t, "grace-1", 1)

		err := e.gw.terminate(t) // the call stays held: the grace must run out
		t.Logf("the gateway exited with %v", err)
		type graceLine struct {
			Level, Msg string
			Records    int
		}
		var abandoned []graceLine
		for _, line := range strings.Split(e.gw.out.String(), "\n") {
			var l graceLine
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "grace period over: calls still under way are left outcome_unknown" {
				abandoned = append(abandoned, l)
			}
		}
		if len(abandoned) != 1 || abandoned[0].Records != 1 || abandoned[0].Level != "WARN" {
			t.Errorf("grace log lines %+v, want one at WARN with records 1", abandoned)
		}
		<-first.done // the client's connection went with the process

		g := e.startGateway(t)
		rec := g.mustRecord(t, "create_ticket", "grace-1")
		if rec.State != "outcome_unknown" || !strings.Contains(rec.Detail, "shut down") {
			t.Errorf("record of the cut-off call: state %q, detail %q; want outcome_unknown, a shutdown", rec.State, rec.Detail)
		}

		// The upstream acts after the gateway left.
		e.sb.release(t, "grace-1")
		eventually(t, holdTimeout, "the released call to reach the sandbox", func() bool {
			return e.sb.stats(t).ByEndpoint[ticketsEndpoint] == 1
		})
		r := g.do(t, req)
		expectProblem(t, r, http.StatusConflict, "outcome-unknown", "outcome_unknown", false)
		expectUp(t, e.sb, 1)
		expectAttempts(t, e.sb, 1)
	}, envOptions{env: []string{"IDEMGATEWAY_SHUTDOWN_GRACE=1s"}})
}
