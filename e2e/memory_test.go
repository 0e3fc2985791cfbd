package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMemoryLimitSizesTheParseBudget (docs/security.md#resource-limits): under a memory limit the
// budget of the body parses under way is a quarter of it, unless IDEMGATEWAY_MAX_INFLIGHT_BYTES
// is set. The gateway's metric idemgateway_body_parse_budget_bytes and the start log state the
// budget in force. The limit is GOMEMLIMIT's here: a container's arrives the same way, through
// automemlimit (cmd TestGCPolicy).
func TestMemoryLimitSizesTheParseBudget(t *testing.T) {
	t.Parallel()
	sb := StartSandbox(t)
	routes := WriteRoutes(t, "routes.yaml.tmpl", sb.URL)
	for _, c := range []struct {
		env    []string
		budget int64
	}{
		{[]string{"GOMEMLIMIT=400MiB"}, 100 << 20},
		{[]string{"GOMEMLIMIT=400MiB", "IDEMGATEWAY_MAX_INFLIGHT_BYTES=2097152"}, 2 << 20},
	} {
		g := StartGateway(t, routes, append(c.env, "IDEMGATEWAY_DATA_DIR="+t.TempDir()))
		if got := g.metric(t, "idemgateway_body_parse_budget_bytes"); got != float64(c.budget) {
			t.Errorf("%v: idemgateway_body_parse_budget_bytes %v, want %d", c.env, got, c.budget)
		}
		logged := int64(-1)
		for _, line := range strings.Split(g.Out.String(), "\n") {
			var l struct {
				Msg              string
				MaxInflightBytes int64 `json:"max_inflight_bytes"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" {
				logged = l.MaxInflightBytes
			}
		}
		if logged != c.budget {
			t.Errorf("%v: the start log states a parse budget of %d, want %d", c.env, logged, c.budget)
		}
		g.stop(t)
	}
}
