package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// headerHold names a hold of the holdGate: a request that carries it waits at the gate, before it
// reaches the sandbox, until the test releases that name.
const headerHold = "X-Test-Hold"

// holdTimeout bounds every wait of the hold helpers; it only bounds a hang.
const holdTimeout = 20 * time.Second

// holdGate is a reverse proxy in front of the sandbox, run in the test process, that holds the
// upstream calls carrying headerHold until the test releases them: so a test decides when the
// upstream answers instead of hoping that a delay outlasts its other requests (audit T2). A
// released call is sent to the sandbox even when the gateway that made it has gone away meanwhile
// (timed out, killed, shut down): the upstream then acts after its caller left, which is the case
// outcome_unknown exists for. Requests without the header pass straight through.
type holdGate struct {
	url      string // "http://127.0.0.1:PORT": put it in the routes file instead of the sandbox's
	mu       sync.Mutex
	arrived  map[string]chan struct{} // one element per request of that hold that reached the gate
	released map[string]chan struct{} // closed by release

	// dedupHeader, when set (withDedup), makes the gate an upstream that de-duplicates by that
	// header's value, as Stripe does by Idempotency-Key: the first request with a value is sent to
	// the sandbox, and every later one gets its response again without reaching it.
	dedupHeader string
	dedupMu     sync.Mutex
	dedup       map[string]*dedupEntry
}

// dedupEntry is the first response to one de-duplication key, once its request has finished.
type dedupEntry struct {
	done   chan struct{}
	status int
	header http.Header
	body   []byte
	hits   int // later requests answered from it
}

// newHoldGate starts a holdGate in front of the sandbox at target. When t ends it releases every
// hold, so that the held calls finish, and stops. dedupHeader, if given, turns on the
// de-duplication by that header (holdGate.dedupHeader).
func newHoldGate(t *testing.T, target string, dedupHeader ...string) *holdGate {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	h := &holdGate{arrived: map[string]chan struct{}{}, released: map[string]chan struct{}{}, dedup: map[string]*dedupEntry{}}
	if len(dedupHeader) > 0 {
		h.dedupHeader = dedupHeader[0]
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host },
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.Header.Get(headerHold); name != "" {
			arrived, released := h.channels(name)
			arrived <- struct{}{}
			<-released
		}
		// Detached: the upstream acts even if the gateway gave up on the call.
		r = r.WithContext(context.WithoutCancel(r.Context()))
		key := ""
		if h.dedupHeader != "" {
			key = r.Header.Get(h.dedupHeader)
		}
		if key == "" {
			rp.ServeHTTP(w, r)
			return
		}
		h.dedupMu.Lock()
		d, seen := h.dedup[key]
		if !seen {
			d = &dedupEntry{done: make(chan struct{})}
			h.dedup[key] = d
		}
		h.dedupMu.Unlock()
		if !seen {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			d.status, d.header, d.body = rec.Code, rec.Header(), rec.Body.Bytes()
			close(d.done)
		} else {
			<-d.done
			h.dedupMu.Lock()
			d.hits++
			h.dedupMu.Unlock()
		}
		for k, v := range d.header {
			w.Header()[k] = v
		}
		w.WriteHeader(d.status)
		_, _ = w.Write(d.body)
	}))
	h.url = srv.URL
	t.Cleanup(func() {
		h.mu.Lock()
		for name, ch := range h.released {
			select {
			case <-ch:
			default:
				close(h.released[name])
			}
		}
		h.mu.Unlock()
		srv.Close()
	})
	return h
}

func (h *holdGate) channels(name string) (arrived, released chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.arrived[name] == nil {
		h.arrived[name] = make(chan struct{}, 64)
		h.released[name] = make(chan struct{})
	}
	return h.arrived[name], h.released[name]
}

// arrivals receives once for each request of hold name that reaches the gate.
func (h *holdGate) arrivals(name string) <-chan struct{} {
	arrived, _ := h.channels(name)
	return arrived
}

// waitHeld waits until a request of hold name has reached the gate: the gateway made the upstream
// call, and the call stays under way until release.
func (h *holdGate) waitHeld(t *testing.T, name string) {
	t.Helper()
	select {
	case <-h.arrivals(name):
	case <-time.After(holdTimeout):
		t.Fatalf("no upstream call of hold %q within %s", name, holdTimeout)
	}
}

// dedupKeys returns, for each de-duplication key seen, how many later requests were answered
// with its first response.
func (h *holdGate) dedupKeys() map[string]int {
	h.dedupMu.Lock()
	defer h.dedupMu.Unlock()
	m := make(map[string]int, len(h.dedup))
	for k, d := range h.dedup {
		m[k] = d.hits
	}
	return m
}

// release lets the requests of hold name, held and future, through to the sandbox.
func (h *holdGate) release(name string) {
	_, released := h.channels(name)
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-released:
	default:
		close(released)
	}
}

// held returns req with the hold header for name.
func held(req request, name string) request {
	hdr := map[string]string{headerHold: name}
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
func sendHeldDuplicates(t *testing.T, h *holdGate, name string, req request, gws []*gateway) (resps []response, heldAt int) {
	t.Helper()
	req = held(req, name)
	type result struct {
		i    int
		resp response
		err  error
	}
	results := make(chan result, len(gws))
	start := make(chan struct{})
	for i, g := range gws {
		go func() {
			<-start
			r, err := g.send(req)
			results <- result{i, r, err}
		}()
	}
	close(start)
	resps = make([]response, len(gws))
	answered := make([]bool, len(gws))
	deadline := time.After(holdTimeout)
	arrivals, answers := 0, 0
	for arrivals == 0 || answers+arrivals < len(gws) {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("request %d: %v", r.i, r.err)
			}
			resps[r.i], answered[r.i] = r.resp, true
			answers++
		case <-h.arrivals(name):
			arrivals++
			if arrivals == 2 {
				t.Errorf("a second request with key %q reached the upstream while the first was held: executed twice", req.Key)
			}
		case <-deadline:
			t.Fatalf("after %s: %d of %d requests answered, %d held at the upstream", holdTimeout, answers, len(gws), arrivals)
		}
	}
	h.release(name)
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

// metric reads the value of one series from the gateway's /metrics, e.g.
// metric(t, `idemgateway_lease_renewals_total{result="ok",tool="create_ticket_lease"}`); 0 when
// the series is absent.
func (g *gateway) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := client.Get(g.admin + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q: %v", series, v, err)
			}
			return f
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return 0
}

// waitMetric polls the gateway's /metrics until series is at least min.
func (g *gateway) waitMetric(t *testing.T, series string, min float64) {
	t.Helper()
	eventually(t, holdTimeout, fmt.Sprintf("%s >= %v", series, min), func() bool {
		return g.metric(t, series) >= min
	})
}
