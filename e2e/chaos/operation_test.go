package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgateway/idemgateway/e2e"
)

// behaviour is what an operation does wrong upstream.
type behaviour string

const (
	opPlain       behaviour = "plain"             // the upstream takes 0-250ms
	opBeyondLease behaviour = "delay>lease"       // the upstream takes 1.3-2.3s: every route's lease must be renewed
	opDrop        behaviour = "drop_after_commit" // the first attempt: the upstream acts, then drops the connection
	op500         behaviour = "500_after_commit"  // the first attempt: the upstream acts, then answers 500
	op503         behaviour = "503_before_acting" // the first one or two attempts: 503 without acting
	opGiveUp      behaviour = "client_gives_up"   // the upstream takes 400-900ms; each delivery's first attempt gives up after 80-250ms
	opTimeout     behaviour = "upstream_timeout"  // on create_ticket_slow (timeout 500ms), the upstream takes 600-1000ms, then acts
)

var behaviourMix = []struct {
	kind   behaviour
	weight int
}{{opPlain, 30}, {opBeyondLease, 15}, {opDrop, 10}, {op500, 5}, {op503, 15}, {opGiveUp, 15}, {opTimeout, 10}}

// operation is one business operation: a key, a body, and its deliveries' history.
type operation struct {
	idx        int
	key        string // also the body's "op" member
	body       string
	path, tool string
	kind       behaviour
	delay      time.Duration // X-Sandbox-Delay on every attempt
	giveUp     time.Duration // client timeout of each delivery's first attempt (opGiveUp)
	deliveries int
	budget     atomic.Int32 // attempts that still carry the fault header (drop, 500, 503)
	sent       atomic.Bool  // a request was sent: later ones are retries

	mu     sync.Mutex
	events []event

	// Set by verify.
	record     *e2e.Receipt // nil: no record
	final      string       // the final replay's result kind, "" without a record
	finalID    string
	finalNote  string
	finalRecon string // its Idempotency-Reconciled header
}

// event is one request of an operation, as its client saw it.
type event struct {
	at       time.Duration // since the run started, when the request was sent
	took     time.Duration
	worker   int
	gateway  string // slot/generation and address
	attempt  int    // within its delivery
	fault    string // the fault header it carried, if any
	result   string // a res* kind
	status   int
	decision string
	remoteID string // of a 2xx
	echo     string // the "op" member of a 2xx body
	pad      int    // the length of the 2xx body's sandbox_padding
	recon    string // the Idempotency-Reconciled header: found, not-found or ""
	receipt  string // the Idempotency-Receipt header: "pending" when the receipt was not stored yet
	detail   string
}

// newOperation derives operation idx from the seed alone, so that a seed names the operations.
func newOperation(seed uint64, idx int) *operation {
	rng := rand.New(rand.NewPCG(seed, uint64(idx)))
	op := &operation{idx: idx, key: fmt.Sprintf("chaos-%d-%d", seed, idx), deliveries: 2 + rng.IntN(3)}
	switch r := rng.IntN(10); {
	case r < 4:
		op.tool = toolTicket
	case r < 6:
		op.tool = toolWait
	case r < 8:
		op.tool = toolFK
	default:
		op.tool = toolRec
	}
	n := rng.IntN(100)
	for _, m := range behaviourMix {
		if n < m.weight {
			op.kind = m.kind
			break
		}
		n -= m.weight
	}
	// Twice in every twenty operations: the upstream acts and drops the connection on the
	// forward_key and on the reconcile route, so that each run sees the upstream's de-duplication
	// answer a re-execution and a lookup find an effect.
	switch idx % 20 {
	case 3:
		op.tool, op.kind = toolFK, opDrop
	case 13:
		op.tool, op.kind = toolRec, opDrop
	}
	if op.kind == opTimeout {
		op.tool = toolSlow
	}
	op.path = paths[op.tool]
	ms := func(lo, span int) time.Duration { return time.Duration(lo+rng.IntN(span)) * time.Millisecond }
	switch op.kind {
	case opPlain:
		op.delay = ms(0, 250)
	case opBeyondLease:
		op.delay = ms(1300, 1000)
	case opDrop, op500:
		op.delay = ms(0, 200)
		op.budget.Store(1)
	case op503:
		op.delay = ms(0, 200)
		op.budget.Store(int32(1 + rng.IntN(2)))
	case opGiveUp:
		op.delay = ms(400, 500)
		op.giveUp = ms(80, 170)
	case opTimeout:
		op.delay = ms(600, 400)
	}
	op.body = fmt.Sprintf(`{"op":%q,"title":"chaos ticket %d","priority":%d}`, op.key, idx, rng.IntN(5))
	return op
}

// marker is the X-Sandbox-Body-Bytes value of the operation's requests, logged by the sandbox.
func (op *operation) marker() int { return op.idx + 1 }

// answers reports whether a 2xx is the operation's own: it echoes the operation's "op" and carries
// its padding. A receipt made by reconciliation replays the ticket as the lookup lists it, which
// has the "op" but not the padding of the create's answer.
func (op *operation) answers(ev event) bool {
	return ev.echo == op.key && (ev.pad == op.marker() || op.tool == toolRec && ev.pad == 0)
}

// request builds the next attempt: the marker, the delay, and the operation's fault while its
// budget lasts; timeout is the client's own give-up time, 0 for none.
func (op *operation) request(worker int, firstOfDelivery, withFaults bool) (req e2e.Request, fault string, timeout time.Duration) {
	actor := fmt.Sprintf("chaos-worker-%d", worker)
	if worker < 0 {
		actor = "chaos-final-check"
	}
	// Detached: the sandbox finishes every request, also when the gateway timed out or died.
	h := map[string]string{"X-Sandbox-Body-Bytes": strconv.Itoa(op.marker()), "X-Actor-ID": actor, e2e.HeaderDetach: "1"}
	if op.delay > 0 {
		h["X-Sandbox-Delay"] = op.delay.String()
	}
	if withFaults && op.budget.Load() > 0 && op.budget.Add(-1) >= 0 {
		switch op.kind {
		case opDrop:
			h["X-Sandbox-Fail-After-Commit"], fault = "drop", "fail-after-commit: drop"
		case op500:
			h["X-Sandbox-Fail-After-Commit"], fault = "500", "fail-after-commit: 500"
		case op503:
			h["X-Sandbox-Status"], fault = "503", "status: 503"
		}
	}
	if withFaults && op.kind == opGiveUp && firstOfDelivery {
		timeout, fault = op.giveUp, "client gives up after "+op.giveUp.String()
	}
	return e2e.Request{Path: op.path, Key: op.key, Body: op.body, Header: h}, fault, timeout
}

func (op *operation) add(ev event) {
	op.mu.Lock()
	op.events = append(op.events, ev)
	op.mu.Unlock()
}

// Result kinds of one request.
const (
	resExecute    = "2xx execute"
	resReplay     = "2xx replay"
	resInProgress = "409 in_progress"
	resUnknown    = "409 outcome_unknown"
	resConflict   = "422 conflict"
	resStore503   = "503 store unavailable"
	resUp503      = "503 upstream, not committed"
	resUpUnknown  = "5xx execute, outcome unknown"
	resConnError  = "connection error"
	resGaveUp     = "client gave up"
	resUnexpected = "unexpected answer"
	resNoFinal    = "no final answer (delivery gave up)"
)

// classify reads one answer. final is true for the answers a delivery stops at.
func classify(resp e2e.Response, err error, gaveUp bool) (ev event, final bool) {
	switch {
	case err != nil && gaveUp:
		return event{result: resGaveUp, detail: err.Error()}, false
	case err != nil:
		return event{result: resConnError, detail: err.Error()}, false
	}
	ev = event{status: resp.Status, decision: resp.Decision(), recon: resp.Header.Get("Idempotency-Reconciled"),
		receipt: resp.Header.Get("Idempotency-Receipt")}
	d := ev.decision
	switch {
	case resp.Status >= 200 && resp.Status < 300 && (d == "execute" || d == "replay"):
		var b struct {
			ID  string `json:"id"`
			Op  string `json:"op"`
			Pad string `json:"sandbox_padding"`
		}
		if err := json.Unmarshal(resp.Body, &b); err != nil || b.ID == "" {
			ev.result, ev.detail = resUnexpected, fmt.Sprintf("2xx body without an id: %v: %.200s", err, resp.Body)
			return ev, false
		}
		ev.result, ev.remoteID, ev.echo, ev.pad = "2xx "+d, b.ID, b.Op, len(b.Pad)
		return ev, true
	case resp.Status == http.StatusConflict && d == "outcome_unknown":
		ev.result = resUnknown
		return ev, true
	case resp.Status == http.StatusConflict && d == "in_progress":
		ev.result = resInProgress
	case resp.Status == http.StatusUnprocessableEntity:
		ev.result, ev.detail = resConflict, fmt.Sprintf("%.300s", resp.Body)
		return ev, true
	case resp.Status == http.StatusServiceUnavailable && d == "":
		ev.result = resStore503
	case resp.Status == http.StatusServiceUnavailable && d == "execute":
		ev.result = resUp503
	case resp.Status >= 500 && d == "execute":
		// The gateway's 502/504 for a broken or timed-out exchange, or the upstream's own 500,
		// 502, 504 passed through: the outcome is unknown and the record blocks retries.
		ev.result = resUpUnknown
	default:
		ev.result, ev.detail = resUnexpected, fmt.Sprintf("%d %q %.300s", resp.Status, d, resp.Body)
	}
	return ev, false
}
