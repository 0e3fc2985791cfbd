package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// expectUp checks how many tickets the sandbox created: the upstream side effects ("Up×N").
func expectUp(t *testing.T, sb *Sandbox, want int) {
	t.Helper()
	if got := sb.Stats(t).ByEndpoint[TicketsEndpoint]; got != want {
		t.Errorf("upstream side effects: Up×%d, want Up×%d", got, want)
	}
}

// expectAttempts checks how many requests reached the sandbox's ticket endpoint.
func expectAttempts(t *testing.T, sb *Sandbox, want int) {
	t.Helper()
	if got := sb.Stats(t).Requests.ByEndpoint[TicketsEndpoint]; got != want {
		t.Errorf("upstream attempts: %d, want %d", got, want)
	}
}

// expectDecision checks the status and the Idempotency-Decision header; decision "" means the
// header must be absent.
func expectDecision(t *testing.T, r Response, status int, decision string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d; body %.400s", r.Status, status, r.Body)
	}
	got := r.Header.Values("Idempotency-Decision")
	switch {
	case decision == "" && len(got) > 0:
		t.Errorf("Idempotency-Decision %q, want none", got)
	case decision != "" && (len(got) != 1 || got[0] != decision):
		t.Errorf("Idempotency-Decision %q, want %q", got, decision)
	}
}

// expectProblem checks a problem answer: status, Idempotency-Decision header (absent when
// decision is ""), and the problem's type name, status, decision ("rejected" when the header is
// absent) and retryable members.
func expectProblem(t *testing.T, r Response, status int, name, decision string, retryable bool) {
	t.Helper()
	expectDecision(t, r, status, decision)
	p := r.Problem
	if p == nil {
		t.Fatalf("Content-Type %q, want application/problem+json; body %.400s", r.Header.Get("Content-Type"), r.Body)
	}
	if !strings.HasSuffix(p.Type, ":"+name) && !strings.HasSuffix(p.Type, "/"+name) {
		t.Errorf("problem type %q, want one ending in %q", p.Type, name)
	}
	if p.Status != status {
		t.Errorf("problem status %d, want %d", p.Status, status)
	}
	wantDecision := decision
	if wantDecision == "" {
		wantDecision = "rejected"
	}
	if p.Decision != wantDecision {
		t.Errorf("problem decision %q, want %q", p.Decision, wantDecision)
	}
	switch {
	case p.Retryable == nil:
		t.Errorf("problem has no retryable member")
	case *p.Retryable != retryable:
		t.Errorf("problem retryable %v, want %v", *p.Retryable, retryable)
	}
	if p.Title == "" || p.Detail == "" {
		t.Errorf("problem title %q, detail %q: want both", p.Title, p.Detail)
	}
}

// expectRetryAfter checks that the response carries a Retry-After of whole seconds.
func expectRetryAfter(t *testing.T, r Response) {
	t.Helper()
	if v := r.Header.Get("Retry-After"); !regexp.MustCompile(`^[0-9]+$`).MatchString(v) {
		t.Errorf("Retry-After %q, want a number of seconds", v)
	}
}

var fingerprintPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// expectFingerprint checks the Idempotency-Fingerprint header and returns it.
func expectFingerprint(t *testing.T, r Response) string {
	t.Helper()
	fp := r.Header.Get("Idempotency-Fingerprint")
	if !fingerprintPattern.MatchString(fp) {
		t.Errorf("Idempotency-Fingerprint %q, want sha256: and 64 hex digits", fp)
	}
	return fp
}

// expectReplayOf checks that r replays first: the stored status and body, the replay headers.
func expectReplayOf(t *testing.T, r, first Response) {
	t.Helper()
	expectDecision(t, r, first.Status, "replay")
	if got := r.Header.Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("Idempotent-Replayed %q, want true", got)
	}
	if !bytes.Equal(r.Body, first.Body) {
		t.Errorf("replayed body\n%.400s\nwant the first response's\n%.400s", r.Body, first.Body)
	}
	if got, want := r.Header.Get("Content-Type"), first.Header.Get("Content-Type"); got != want {
		t.Errorf("replayed Content-Type %q, want %q", got, want)
	}
	if got, want := r.Header.Get("Idempotency-Fingerprint"), first.Header.Get("Idempotency-Fingerprint"); got != want {
		t.Errorf("replayed Idempotency-Fingerprint %q, want %q", got, want)
	}
}

// expectCreated checks a first execution that created a ticket, and returns the ticket's id.
func expectCreated(t *testing.T, r Response) string {
	t.Helper()
	expectDecision(t, r, http.StatusCreated, "execute")
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("Idempotent-Replayed %q on an execution", r.Header.Get("Idempotent-Replayed"))
	}
	expectFingerprint(t, r)
	if r.Status != http.StatusCreated {
		t.FailNow()
	}
	id, _ := r.json(t)["id"].(string)
	if !strings.HasPrefix(id, "T-") {
		t.Errorf("ticket id %q, want T-…", id)
	}
	return id
}

// pending is a request sent from another goroutine.
type pending struct {
	done chan struct{}
	resp Response
	err  error
}

// goSend sends req from a new goroutine; wait returns its response.
func goSend(g *Gateway, req Request) *pending {
	p := &pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.resp, p.err = g.Send(req)
	}()
	return p
}

func (p *pending) wait(t *testing.T) Response {
	t.Helper()
	<-p.done
	if p.err != nil {
		t.Fatalf("request: %v", p.err)
	}
	return p.resp
}

// heldDetached returns the headers of a call that the sandbox holds on name until release, then
// performs whatever became of its caller.
func heldDetached(name string) map[string]string {
	return map[string]string{headerHold: name, HeaderDetach: "1"}
}

// waitUp polls the sandbox until it has performed want ticket side effects (an upstream that acts
// after its caller left does so on its own time), then checks that there are exactly that many.
func waitUp(t *testing.T, sb *Sandbox, want int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("the sandbox to perform Up×%d", want), func() bool {
		return sb.Stats(t).ByEndpoint[TicketsEndpoint] >= want
	})
	expectUp(t, sb, want)
}

// held returns req with the headers of a call that the sandbox holds on name until the test
// releases it, and then performs whatever became of its caller (heldDetached).
func held(req Request, name string) Request {
	hdr := heldDetached(name)
	for k, v := range req.Header {
		hdr[k] = v
	}
	req.Header = hdr
	return req
}

// sendHeldDuplicates sends req, held under name, to each gateway of gws at the same moment. It
// waits until one of them has reached the upstream and every other has been answered while that
// one is held, then releases it. It returns the answers in the order of gws and the index of the
// one that was held. A second request that reaches the upstream is a test error (it executed
// twice); it is released too, so that the test can go on.
func sendHeldDuplicates(t *testing.T, sb *Sandbox, name string, req Request, gws []*Gateway) (resps []Response, heldAt int) {
	t.Helper()
	req = held(req, name)
	type result struct {
		i    int
		resp Response
		err  error
	}
	results := make(chan result, len(gws))
	start := make(chan struct{})
	for i, g := range gws {
		go func() {
			<-start
			r, err := g.Send(req)
			results <- result{i, r, err}
		}()
	}
	close(start)
	resps = make([]Response, len(gws))
	answered := make([]bool, len(gws))
	deadline := time.After(holdTimeout)
	arrivals, answers := 0, 0
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for arrivals == 0 || answers+arrivals < len(gws) {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("request %d: %v", r.i, r.err)
			}
			resps[r.i], answered[r.i] = r.resp, true
			answers++
		case <-poll.C:
			if arrivals = sb.holding(t, name); arrivals > 1 {
				t.Errorf("%d requests with key %q reached the upstream while the first was held: executed more than once", arrivals, req.Key)
			}
		case <-deadline:
			t.Fatalf("after %s: %d of %d requests answered, %d held at the upstream", holdTimeout, answers, len(gws), arrivals)
		}
	}
	sb.release(t, name)
	heldAt = -1
	for answers < len(gws) {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("request %d: %v", r.i, r.err)
			}
			resps[r.i], answered[r.i] = r.resp, true
			answers++
			if heldAt == -1 {
				heldAt = r.i
			}
		case <-deadline:
			t.Fatalf("after %s: the released request was not answered", holdTimeout)
		}
	}
	if heldAt == -1 {
		t.Fatalf("every request was answered before the held one was released: %d answers", answers)
	}
	return resps, heldAt
}
