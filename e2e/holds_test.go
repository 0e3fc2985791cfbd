package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// Headers of the sandbox's detach mode and holds (cmd/sandbox, faults.go and holds.go).
const (
	// headerDetach makes the sandbox finish a request whatever its caller does: the effect is
	// performed and counted after the delay or the hold even when the gateway timed out or died.
	headerDetach = "X-Sandbox-Detach"
	// headerHold makes the sandbox wait, before acting, until the test releases the hold.
	headerHold = "X-Sandbox-Hold"
)

// heldDetached returns the headers of a call that the sandbox holds on name until release, then
// performs whatever became of its caller.
func heldDetached(name string) map[string]string {
	return map[string]string{headerHold: name, headerDetach: "1"}
}

// release lets the sandbox's requests held on name act, now and later (POST /_sandbox/release).
func (sb *sandbox) release(t *testing.T, name string) {
	t.Helper()
	if err := sb.releaseHold(name); err != nil {
		t.Fatal(err)
	}
}

// releaseHold is release for a goroutine other than the test's.
func (sb *sandbox) releaseHold(name string) error {
	resp, err := client.Post(sb.url+"/_sandbox/release", "application/json", strings.NewReader(fmt.Sprintf(`{"hold":%q}`, name)))
	if err != nil {
		return fmt.Errorf("sandbox release: %w", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("sandbox release: %d %s", resp.StatusCode, b)
	}
	return nil
}

// waitHeld polls GET /_sandbox/holds until n requests wait on name: the call has reached the
// upstream and waits there.
func (sb *sandbox) waitHeld(t *testing.T, name string, n int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%d requests held on %q by the sandbox", n, name), func() bool {
		return sb.holding(t, name) == n
	})
}

// holding reads how many requests wait on the hold name now (GET /_sandbox/holds).
func (sb *sandbox) holding(t *testing.T, name string) int {
	t.Helper()
	resp, err := client.Get(sb.url + "/_sandbox/holds")
	if err != nil {
		t.Fatalf("sandbox holds: %v", err)
	}
	defer resp.Body.Close()
	var holds struct {
		Holds map[string]struct{ Waiting int } `json:"holds"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&holds); err != nil {
		t.Fatalf("sandbox holds: %v", err)
	}
	return holds.Holds[name].Waiting
}

// waitUp polls the sandbox until it has performed want ticket side effects (an upstream that acts
// after its caller left does so on its own time), then checks that there are exactly that many.
func waitUp(t *testing.T, sb *sandbox, want int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("the sandbox to perform Up×%d", want), func() bool {
		return sb.stats(t).ByEndpoint[ticketsEndpoint] >= want
	})
	expectUp(t, sb, want)
}

// inFlight reads how many requests the sandbox is serving now (in a delay, a hold, or acting).
func (sb *sandbox) inFlight(t *testing.T) int {
	t.Helper()
	st := sb.stats(t)
	if st.InFlight == nil {
		t.Fatal("sandbox stats: no in_flight")
	}
	return *st.InFlight
}

// holdTimeout bounds every wait of the hold helpers; it only bounds a hang.
const holdTimeout = 20 * time.Second

// held returns req with the headers of a call that the sandbox holds on name until the test
// releases it, and then performs whatever became of its caller (heldDetached).
func held(req request, name string) request {
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
func sendHeldDuplicates(t *testing.T, sb *sandbox, name string, req request, gws []*gateway) (resps []response, heldAt int) {
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

// metric reads the value of one series from the gateway's /metrics, e.g.
// metric(t, `idemgateway_lease_renewals_total{result="ok",tool="create_ticket_lease"}`); 0 when
// the series is absent.
func (g *gateway) metric(t *testing.T, series string) float64 {
	t.Helper()
	v, err := g.metricValue(series)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// metricValue is metric for a goroutine other than the test's.
func (g *gateway) metricValue(series string) (float64, error) {
	resp, err := client.Get(g.admin + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("metric %s: %q: %w", series, v, err)
			}
			return f, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	return 0, nil
}

// waitMetric polls the gateway's /metrics until series is at least min.
func (g *gateway) waitMetric(t *testing.T, series string, min float64) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%s >= %v", series, min), func() bool {
		return g.metric(t, series) >= min
	})
}
