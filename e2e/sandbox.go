package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// Sandbox is a running cmd/Sandbox.
type Sandbox struct {
	*process
	URL string // "http://127.0.0.1:PORT"
}

var sandboxListening = regexp.MustCompile(`sandbox listening on (http://\S+)`)

// StartSandbox starts a sandbox on a free loopback port.
func StartSandbox(t *testing.T) *Sandbox {
	t.Helper()
	sb := &Sandbox{}
	sb.process = startProcess(t, "sandbox", exec.Command(bin.sandbox, "-listen", "127.0.0.1:0"), func(line string) bool {
		m := sandboxListening.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		sb.URL = m[1]
		return true
	})
	return sb
}

// SandboxStats is the body of the sandbox's GET /_sandbox/stats: side effects, and requests
// (attempts, effects or not).
type SandboxStats struct {
	Total      int            `json:"total"`
	ByEndpoint map[string]int `json:"by_endpoint"`
	Requests   struct {
		Total      int            `json:"total"`
		ByEndpoint map[string]int `json:"by_endpoint"`
	} `json:"requests"`
	Cancelled struct {
		ByEndpoint map[string]int `json:"by_endpoint"`
	} `json:"cancelled"` // MCP tool calls the server saw cancelled (notifications/cancelled)
	InFlight *int `json:"in_flight"` // requests being served now; nil from a sandbox without it
}

// Stats reads the sandbox's counters.
func (sb *Sandbox) Stats(t *testing.T) SandboxStats {
	t.Helper()
	resp, err := Client.Get(sb.URL + "/_sandbox/stats")
	if err != nil {
		t.Fatalf("sandbox stats: %v", err)
	}
	defer resp.Body.Close()
	var st SandboxStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("sandbox stats: %v", err)
	}
	return st
}

// script queues faults for the sandbox's next requests (POST /_sandbox/script).
func (sb *Sandbox) script(t *testing.T, failNext string) {
	t.Helper()
	resp, err := Client.Post(sb.URL+"/_sandbox/script", "application/json", strings.NewReader(`{"fail_next":`+failNext+`}`))
	if err != nil {
		t.Fatalf("sandbox script: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sandbox script: %d %s", resp.StatusCode, b)
	}
}

// Headers of the sandbox's detach mode and holds (cmd/sandbox, faults.go and holds.go).
const (
	// HeaderDetach makes the sandbox finish a request whatever its caller does: the effect is
	// performed and counted after the delay or the hold even when the gateway timed out or died.
	HeaderDetach = "X-Sandbox-Detach"
	// headerHold makes the sandbox wait, before acting, until the test releases the hold.
	headerHold = "X-Sandbox-Hold"
)

// release lets the sandbox's requests held on name act, now and later (POST /_sandbox/release).
func (sb *Sandbox) release(t *testing.T, name string) {
	t.Helper()
	if err := sb.releaseHold(name); err != nil {
		t.Fatal(err)
	}
}

// releaseHold is release for a goroutine other than the test's.
func (sb *Sandbox) releaseHold(name string) error {
	resp, err := Client.Post(sb.URL+"/_sandbox/release", "application/json", strings.NewReader(fmt.Sprintf(`{"hold":%q}`, name)))
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
func (sb *Sandbox) waitHeld(t *testing.T, name string, n int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%d requests held on %q by the sandbox", n, name), func() bool {
		return sb.holding(t, name) == n
	})
}

// holding reads how many requests wait on the hold name now (GET /_sandbox/holds).
func (sb *Sandbox) holding(t *testing.T, name string) int {
	t.Helper()
	n, err := sb.held(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// held is holding for a goroutine other than the test's.
func (sb *Sandbox) held(name string) (int, error) {
	resp, err := Client.Get(sb.URL + "/_sandbox/holds")
	if err != nil {
		return 0, fmt.Errorf("sandbox holds: %w", err)
	}
	defer resp.Body.Close()
	var holds struct {
		Holds map[string]struct{ Waiting int } `json:"holds"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&holds); err != nil {
		return 0, fmt.Errorf("sandbox holds: %w", err)
	}
	return holds.Holds[name].Waiting, nil
}

// InFlight reads how many requests the sandbox is serving now (in a delay, a hold, or acting).
func (sb *Sandbox) InFlight(t *testing.T) int {
	t.Helper()
	st := sb.Stats(t)
	if st.InFlight == nil {
		t.Fatal("sandbox stats: no in_flight")
	}
	return *st.InFlight
}

// holdTimeout bounds every wait of the hold helpers; it only bounds a hang.
const holdTimeout = 20 * time.Second
