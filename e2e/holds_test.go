package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
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
	resp, err := client.Post(sb.url+"/_sandbox/release", "application/json", strings.NewReader(fmt.Sprintf(`{"hold":%q}`, name)))
	if err != nil {
		t.Fatalf("sandbox release: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sandbox release: %d %s", resp.StatusCode, b)
	}
}

// waitHeld polls GET /_sandbox/holds until n requests wait on name: the call has reached the
// upstream and waits there.
func (sb *sandbox) waitHeld(t *testing.T, name string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d requests held on %q by the sandbox", n, name), func() bool {
		resp, err := client.Get(sb.url + "/_sandbox/holds")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var holds struct {
			Holds map[string]struct{ Waiting int } `json:"holds"`
		}
		return json.NewDecoder(resp.Body).Decode(&holds) == nil && holds.Holds[name].Waiting == n
	})
}

// waitUp polls the sandbox until it has performed want ticket side effects (an upstream that acts
// after its caller left does so on its own time), then checks that there are exactly that many.
func waitUp(t *testing.T, sb *sandbox, want int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("the sandbox to perform Up×%d", want), func() bool {
		return sb.stats(t).ByEndpoint[ticketsEndpoint] >= want
	})
	expectUp(t, sb, want)
}

// inFlight reads how many requests the sandbox is serving now (in a delay, a hold, or acting).
func (sb *sandbox) inFlight(t *testing.T) int {
	t.Helper()
	resp, err := client.Get(sb.url + "/_sandbox/stats")
	if err != nil {
		t.Fatalf("sandbox stats: %v", err)
	}
	defer resp.Body.Close()
	var st struct {
		InFlight *int `json:"in_flight"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.InFlight == nil {
		t.Fatalf("sandbox stats: no in_flight: %v", err)
	}
	return *st.InFlight
}
