package chaos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/e2e"
	"github.com/idemgateway/idemgateway/internal/faultproxy"
	"github.com/idemgateway/idemgateway/internal/redistest"
)

// config sizes a run: how many operations are handed out, by how many clients, and how many
// process faults come meanwhile.
type config struct {
	ops           int
	workers       int
	gateways      int
	kills         int // kill -9 of a gateway during upstream calls
	redisRestarts int // Redis stops (SIGTERM and SIGKILL alternately) with executions in flight
}

// routeLeases are the lock_lease of each route of testdata/chaos.yaml.tmpl: short, down to
// 300 ms, so that a stalled renewal, a lost reply or a Redis stop tests whether the lease holds.
var routeLeases = map[string]time.Duration{
	toolTicket: 300 * time.Millisecond, toolWait: time.Second, toolSlow: 500 * time.Millisecond,
	toolFK: 1200 * time.Millisecond, toolRec: 700 * time.Millisecond,
}

// Routes of testdata/chaos.yaml.tmpl, by tool.
const (
	toolTicket = "create_ticket"
	toolWait   = "create_ticket_wait"
	toolSlow   = "create_ticket_slow" // upstream timeout 500ms: opTimeout only
	toolFK     = "create_ticket_fk"   // forward_key, so on_unknown_outcome release
	toolRec    = "create_ticket_rec"  // reconcile
)

// routeNames are the routes in the report's order; paths their paths.
var (
	routeNames = []string{toolTicket, toolWait, toolSlow, toolFK, toolRec}
	paths      = map[string]string{toolTicket: e2e.PathTickets, toolWait: e2e.PathWait, toolSlow: "/slow/v1/tickets",
		toolFK: "/fk/v1/tickets", toolRec: "/rec/v1/tickets"}
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

// behaviourMix is how often an operation behaves each way, in parts of the sum of the weights.
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

// add records one request of the operation.
func (op *operation) add(ev event) {
	op.mu.Lock()
	op.events = append(op.events, ev)
	op.mu.Unlock()
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

// node is one gateway process in a routing slot.
type node struct {
	*e2e.Gateway
	slot, gen int
	slow      atomic.Int32 // requests with an upstream delay of slowDelay or more in flight through it
}

func (g *node) String() string {
	return fmt.Sprintf("gw%d.%d(%s)", g.slot, g.gen, strings.TrimPrefix(g.Proxy, "http://"))
}

// run is the world of one TestChaos run.
type run struct {
	t        *testing.T
	cfg      config
	seed     uint64
	start    time.Time
	routes   string
	storeEnv []string
	sb       *e2e.Sandbox
	redis    *redistest.Server
	lost     *lostReplies // between the gateways and Redis

	mu    sync.RWMutex
	slots []*node // where the clients send, by slot
	all   []*node // every gateway process started, killed ones included

	opsMu sync.Mutex
	ops   []*operation // handed out, in order of idx

	tallyMu    sync.Mutex
	answers    map[string]int // every request's result kind
	retries    map[string]int // the same, for requests after an operation's first
	requests   atomic.Int64
	unfinished atomic.Int64 // deliveries that stopped without a final answer

	// Process faults, written by the test's goroutine only.
	faults                 []string           // as logged
	outages                [][2]time.Duration // when Redis was down, since the start
	kills                  int
	killedInFlight         []int              // per kill: the victim's idemgateway_upstream_in_flight just before it
	killed                 map[string]bool    // the killed gateways, by String
	killedRenewals         map[string]float64 // idemgateway_lease_renewals_total by result, of the killed processes just before their kill
	redisStops, redisKills int
}

// env is the store's settings of the gateway in slot: the odd slots' stores auto-pipeline
// (IDEMGATEWAY_REDIS_AUTO_PIPELINE), so that every fault meets both ways of sending the scripts
// (their batches' replies are lost, and sent again, as one).
func (c *run) env(slot int) []string {
	if slot%2 == 1 {
		return append(slices.Clip(c.storeEnv), "IDEMGATEWAY_REDIS_AUTO_PIPELINE=true")
	}
	return c.storeEnv
}

func (c *run) since() time.Duration { return time.Since(c.start) }

// handedOut returns how many operations were handed out so far.
func (c *run) handedOut() int {
	c.opsMu.Lock()
	defer c.opsMu.Unlock()
	return len(c.ops)
}

// attempted returns the operations that had at least one request sent.
func (c *run) attempted() []*operation {
	c.opsMu.Lock()
	defer c.opsMu.Unlock()
	var ops []*operation
	for _, op := range c.ops {
		if op.sent.Load() {
			ops = append(ops, op)
		}
	}
	return ops
}

// lostReplyFaults are the ways a reply is lost: the connection closed, or the reply held.
var lostReplyFaults = []faultproxy.Fault{faultproxy.Close, faultproxy.Stall}

// lostReplies loses the replies of store transitions between the gateways and Redis: one
// faultproxy.Proxy in front of the redis-server, which every gateway uses as its Redis, and one
// injector per transition and fault that, over and over, arms a rule for the next command of its
// transition, waits for the reply to be lost, and pauses.
type lostReplies struct {
	proxy *faultproxy.Proxy
	shas  map[string]string // EVALSHA's SHA1 → transition

	mu    sync.Mutex
	lost  map[string]int   // "claim close" → replies lost
	byKey map[int][]string // operation marker → the faults that hit its record, "claim close"
	gone  int              // rules whose command's reply never came (Redis went away first)
}

// sandboxLine is one request line of the sandbox's log (slog text).
type sandboxLine struct {
	raw      string
	endpoint string
	status   string // a number, or "dropped" / "canceled"
	effect   bool
	fault    string
	id       string
	marker   int  // body_bytes of the fault; 0 when absent
	replayed bool // answered from the first effect of its forwarded key (key_replayed=true)
}

// The members of a sandbox log line that parseSandboxLine reads.
var (
	sbEndpoint = regexp.MustCompile(`\bendpoint=(\S+)`)
	sbStatus   = regexp.MustCompile(`\bstatus=(\S+)`)
	sbEffect   = regexp.MustCompile(`\beffect=(true|false)\b`)
	sbFault    = regexp.MustCompile(`\bfault=("(?:[^"\\]|\\.)*"|\S+)`)
	sbID       = regexp.MustCompile(`\bid=(\S+)`)
	sbMarker   = regexp.MustCompile(`\bbody_bytes=(\d+)\b`)
)

// parseSandboxLine reads a request line of the sandbox's log; false for any other line.
func parseSandboxLine(line string) (sandboxLine, bool) {
	if !strings.Contains(line, "msg=request") {
		return sandboxLine{}, false
	}
	l := sandboxLine{raw: line}
	get := func(re *regexp.Regexp) string {
		if m := re.FindStringSubmatch(line); m != nil {
			return m[1]
		}
		return ""
	}
	l.endpoint, l.status, l.effect = get(sbEndpoint), get(sbStatus), get(sbEffect) == "true"
	l.fault = get(sbFault)
	l.replayed = strings.Contains(line, " key_replayed=true")
	if uq, err := strconv.Unquote(l.fault); err == nil {
		l.fault = uq
	}
	if m := sbMarker.FindStringSubmatch(l.fault); m != nil {
		l.marker, _ = strconv.Atoi(m[1])
	}
	// id= comes after fault=; search after it so that a fault can never be read as the id.
	if i := strings.Index(line, " fault="); i >= 0 {
		if m := sbID.FindStringSubmatch(line[i+len(" fault=")+len(get(sbFault)):]); m != nil {
			l.id = m[1]
		}
	}
	return l, true
}

// report is what a run found.
type report struct {
	ops     []*operation
	effects map[int][]string // marker → ids of the effects the sandbox performed for it

	histogram     [3]int // operations with 0, 1, >1 effects
	committed     int    // final states
	blockedEffect int
	blockedNone   int
	never         int

	notStoredKilled int            // a 2xx said its receipt was pending, and its gateway was killed before storing it
	unknownWhy      map[string]int // records left outcome_unknown, by why (whyUnknown)
	unexplained     []*operation   // the records left outcome_unknown that whyUnknown cannot explain

	lost         map[int][]string // marker → how its receipt was lost
	badFinal     map[int][]string // marker → why its final state breaks the contract
	unattributed []string         // effect lines that name no operation

	byTool     map[string]*toolTally // per route
	keyReplays int                   // answers the sandbox gave from a forwarded key's first effect
	reconFound int                   // answers with Idempotency-Reconciled: found
	reconAgain int                   // answers with Idempotency-Reconciled: not-found (executed again)

	sbTotal, sbAttempts int                // the sandbox's counters for the ticket endpoint
	sbFaults            map[string]int     // faults the sandbox applied, by kind
	gwLog               map[string]int     // gateway log messages of interest, all processes
	renewals            map[string]float64 // idemgateway_lease_renewals_total by result, every process
	timings             []string
}

// toolTally is what happened on one route.
type toolTally struct {
	ops                              int
	effects                          [3]int // operations with 0, 1, >1 effects
	committed, blocked, never, other int
}

// faultBeyondLease is the report's row of upstream calls that outlived the lease and acted.
const faultBeyondLease = "upstream call longer than the lease, then acted"
