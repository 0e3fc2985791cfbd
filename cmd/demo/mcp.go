package main

// The demo's MCP agent: a go-sdk client calls the sandbox's MCP tools through the gateway's
// kind: mcp route tickets_mcp (examples/routes.yaml; docs/contract.md §7).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/internal/wiretap"
)

// mcpKeyMeta is the member of params._meta that carries the key (the route's key.meta).
const mcpKeyMeta = "io.github.idemgateway/idempotencyKey"

// mcpScenario plays an MCP agent: a call, a retry, a retry from a new session, the key reused for
// another ticket, and a slow tool the agent gives up on and retries.
func (a *agent) mcpScenario() error {
	fmt.Printf("\nAn MCP agent (go-sdk client) calls the sandbox's MCP server through %s/mcp:\n\n", a.gateway)
	fmt.Printf("%-58s %-14s %-16s %s\n", "agent does", "answer", "decision", "tickets created")
	ctx := context.Background()
	first, err := a.mcpConnect(ctx)
	if err != nil {
		return err
	}
	title := map[string]any{"title": "Checkout is down in eu-west-1"}
	a.mcpStep("create_ticket with key mcp-1", first.call("create_ticket", title, "mcp-1", 0))
	a.mcpStep("agent retries (a new request, a new JSON-RPC id)", first.call("create_ticket", title, "mcp-1", 0))
	first.Close()
	second, err := a.mcpConnect(ctx)
	if err != nil {
		return err
	}
	defer second.Close()
	a.mcpStep("agent restarts, new session, retries", second.call("create_ticket", title, "mcp-1", 0))
	a.mcpStep("key mcp-1 reused for another title", second.call("create_ticket", map[string]any{"title": "Payments are down"}, "mcp-1", 0))
	slow := map[string]any{"title": "Fail over the database", "ms": 2000}
	a.mcpStep("slow_create mcp-2 (2s); agent gives up at 0.5s", second.call("slow_create", slow, "mcp-2", 500*time.Millisecond))
	a.mcpStep("agent retries at once: waits for the first call", second.call("slow_create", slow, "mcp-2", 0))
	time.Sleep(2 * time.Second)
	a.mcpStep("agent retries after 2s", second.call("slow_create", slow, "mcp-2", 0))
	fmt.Println("\nTwo tickets were asked for three times or more; the MCP server created each exactly once.")
	return nil
}

// mcpSession is a go-sdk client session through the gateway, with the tap on the HTTP answers to
// its tools/call requests, whose Idempotency-Decision go-sdk does not show.
type mcpSession struct {
	*mcp.ClientSession
	tap *wiretap.Tap
}

// mcpConnect starts a session (protocol 2025-11-25, the sessions era) on the gateway's /mcp.
func (a *agent) mcpConnect(ctx context.Context) (*mcpSession, error) {
	tap := wiretap.New(nil)
	c := mcp.NewClient(&mcp.Implementation{Name: "idemgateway-demo", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.gateway + "/mcp", HTTPClient: &http.Client{Transport: tap}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, fmt.Errorf("MCP session through the gateway: %w", err)
	}
	return &mcpSession{ClientSession: cs, tap: tap}, nil
}

// mcpResult is what the agent saw of one tool call.
type mcpResult struct {
	answer   string // the ticket's id, "tool error" (a refusal), or what went wrong
	decision string // Idempotency-Decision
}

// call calls tool with the key in _meta; a timeout > 0 is the agent's deadline.
func (s *mcpSession) call(tool string, args map[string]any, key string, timeout time.Duration) mcpResult {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: mcp.Meta{mcpKeyMeta: key}})
	var werr *jsonrpc.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return mcpResult{answer: "gave up"}
	case errors.As(err, &werr):
		return mcpResult{answer: fmt.Sprintf("error %d", werr.Code), decision: s.tap.Last().Decision}
	case err != nil:
		return mcpResult{answer: "error: " + err.Error()}
	case res.IsError:
		return mcpResult{answer: "tool error", decision: s.tap.Last().Decision} // the refusal, written for the model
	}
	m, _ := res.StructuredContent.(map[string]any)
	return mcpResult{answer: fmt.Sprint(m["id"]), decision: s.tap.Last().Decision}
}

func (a *agent) mcpStep(what string, r mcpResult) {
	fmt.Printf("%-58s %-14s %-16s %d\n", what, r.answer, r.decision, a.mcpEffects())
}

// mcpEffects is the sandbox's count of tickets its MCP tools created so far.
func (a *agent) mcpEffects() int {
	resp, err := http.Get(a.sandbox + "/_sandbox/stats")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var stats struct {
		ByEndpoint map[string]int `json:"by_endpoint"`
	}
	if json.NewDecoder(resp.Body).Decode(&stats) != nil {
		return -1
	}
	n := 0
	for ep, c := range stats.ByEndpoint {
		if strings.HasPrefix(ep, "mcp.") {
			n += c
		}
	}
	return n
}
