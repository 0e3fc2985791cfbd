package gateway_test

import (
	"strings"

	"github.com/idemgateway/idemgateway/internal/wiretap"
)

// decisions are the decisions the gateway answered a client's tools/call requests with, in order:
// each Idempotency-Decision, with " replayed" when Idempotent-Replayed was true and
// " with-session-id" when a replay carried an Mcp-Session-Id. A call the gateway passed through
// unguarded has no decision, and no entry.
func decisions(tap *wiretap.Tap) []string {
	var out []string
	for _, a := range tap.Answers() {
		if a.Decision == "" {
			continue
		}
		d := a.Decision
		if a.Replayed == "true" {
			d += " replayed"
		}
		if a.SessionID != "" && strings.Contains(d, "replay") {
			d += " with-session-id"
		}
		out = append(out, d)
	}
	return out
}

// lastDecision is the last of decisions(tap), "" when there is none.
func lastDecision(tap *wiretap.Tap) string {
	d := decisions(tap)
	if len(d) == 0 {
		return ""
	}
	return d[len(d)-1]
}
