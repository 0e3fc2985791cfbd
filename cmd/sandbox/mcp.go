package main

// The sandbox's MCP server (official go-sdk) over the Streamable HTTP transport, in both protocol
// eras and with both kinds of answers, so that the gateway's kind: mcp routes (docs/contract.md §7)
// are tested against a real server: /mcp (sessions, SSE answers), /mcp-json (sessions, JSON
// answers), /mcp-stateless (2026-07-28, no sessions, SSE answers). Its tools create tickets and
// count each effect under "mcp.<tool>", like the HTTP endpoints.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Counter names of the MCP tools: "mcp." and the tool's name.
const (
	mcpCreateTicket   = "mcp.create_ticket"
	mcpSearchTickets  = "mcp.search_tickets"
	mcpSlowCreate     = "mcp.slow_create"
	mcpProgressCreate = "mcp.progress_create"
	mcpFailingCreate  = "mcp.failing_create"
	mcpBrokenCreate   = "mcp.broken_create"
	mcpConfirmCreate  = "mcp.confirm_create"
)

// mcpTools are the counter names of every MCP tool.
var mcpTools = []string{mcpCreateTicket, mcpSearchTickets, mcpSlowCreate, mcpProgressCreate, mcpFailingCreate, mcpBrokenCreate, mcpConfirmCreate}

// Bounds of the arguments that make a tool wait, so that a call cannot hold the sandbox for long.
const (
	maxSlowMS    = 60_000
	maxSteps     = 100
	maxStepDelay = 5_000
)

// mountMCP serves the MCP server at its three paths. One server serves them all; the handlers
// differ in how they answer.
func (s *sandbox) mountMCP() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "idemgateway-sandbox", Version: "1"}, nil)
	s.addMCPTools(srv)
	get := func(*http.Request) *mcp.Server { return srv }
	for path, opts := range map[string]*mcp.StreamableHTTPOptions{
		"/mcp":           nil,
		"/mcp-json":      {JSONResponse: true},
		"/mcp-stateless": {Stateless: true},
	} {
		h := mcp.NewStreamableHTTPHandler(get, opts)
		endpoint := strings.TrimPrefix(path, "/")
		s.mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entryFrom(r.Context()).endpoint = endpoint
			h.ServeHTTP(w, r)
		}))
	}
}

// ticketArgs are the arguments of the tools that create a ticket. incident_id and client_note
// are there for a route's key.derive and fingerprint exclusions to point at; the ticket ignores them.
type ticketArgs struct {
	Title      string `json:"title" jsonschema:"the ticket's title"`
	Priority   string `json:"priority,omitempty" jsonschema:"low, normal or high"`
	IncidentID string `json:"incident_id,omitempty" jsonschema:"the incident the ticket is for"`
	ClientNote string `json:"client_note,omitempty" jsonschema:"a note of the client's, not part of the ticket"`
}

// slowArgs are slow_create's: a ticket, created after MS milliseconds and, with Hold, once a
// test releases the hold of that name (POST /_sandbox/release, holds.go).
type slowArgs struct {
	Title string `json:"title" jsonschema:"the ticket's title"`
	MS    int    `json:"ms,omitempty" jsonschema:"milliseconds to work before the ticket is created"`
	Hold  string `json:"hold,omitempty" jsonschema:"then wait until POST /_sandbox/release names this hold"`
}

// progressArgs are progress_create's: a ticket, created after Steps progress notifications
// StepMS milliseconds apart and, with Hold, once a test releases the hold of that name: a test
// that holds the answer sees the notifications arrive before it, however slow the machine.
type progressArgs struct {
	Title  string `json:"title" jsonschema:"the ticket's title"`
	Steps  int    `json:"steps,omitempty" jsonschema:"progress notifications to send before the ticket is created"`
	StepMS int    `json:"step_ms,omitempty" jsonschema:"milliseconds before each notification"`
	Hold   string `json:"hold,omitempty" jsonschema:"after the notifications, wait until POST /_sandbox/release names this hold"`
}

// searchArgs are search_tickets'.
type searchArgs struct {
	Query string `json:"query" jsonschema:"text the title contains; empty finds every ticket"`
}

// ticket is a ticket an MCP tool created: its structuredContent.
type ticket struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Priority string `json:"priority,omitempty"`
	Tool     string `json:"tool"` // the tool that created it
}

// found is search_tickets' structuredContent.
type found struct {
	Tickets []ticket `json:"tickets"`
}

// addMCPTools adds the tools. Each call counts as a request of its counter and is in flight
// (GET /_sandbox/stats) while it runs.
func (s *sandbox) addMCPTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{Name: "create_ticket", Description: "Create a ticket."}, mcpCreateTicket,
		func(ctx context.Context, req *mcp.CallToolRequest, in ticketArgs) (*mcp.CallToolResult, ticket, error) {
			return nil, s.createTicket(mcpCreateTicket, "create_ticket", in.Title, in.Priority), nil
		})
	addTool(s, srv, &mcp.Tool{Name: "search_tickets", Description: "Find tickets by title.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, mcpSearchTickets,
		func(ctx context.Context, req *mcp.CallToolRequest, in searchArgs) (*mcp.CallToolResult, found, error) {
			return nil, s.searchTickets(in.Query), nil
		})
	addTool(s, srv, &mcp.Tool{Name: "slow_create", Description: "Create a ticket after ms milliseconds, and after the hold named is released, whatever the client does."}, mcpSlowCreate,
		func(ctx context.Context, req *mcp.CallToolRequest, in slowArgs) (*mcp.CallToolResult, ticket, error) {
			if in.MS < 0 || in.MS > maxSlowMS {
				return nil, ticket{}, fmt.Errorf("ms must be 0..%d; nothing was created", maxSlowMS)
			}
			// The waits ignore ctx: like an API that finishes what it accepted, the tool completes
			// when the client cancels or goes away (the case docs/contract.md §7 "Client gone" is for).
			// Only a reset or the shutdown ends a hold without effect.
			<-s.after(time.Duration(in.MS) * time.Millisecond)
			if in.Hold != "" && !s.waitHold(in.Hold, nil) {
				return nil, ticket{}, fmt.Errorf("hold %q aborted; nothing was created", in.Hold)
			}
			return nil, s.createTicket(mcpSlowCreate, "slow_create", in.Title, ""), nil
		})
	addTool(s, srv, &mcp.Tool{Name: "progress_create", Description: "Create a ticket after steps progress notifications, and after the hold named is released."}, mcpProgressCreate,
		func(ctx context.Context, req *mcp.CallToolRequest, in progressArgs) (*mcp.CallToolResult, ticket, error) {
			if in.Steps < 0 || in.Steps > maxSteps || in.StepMS < 0 || in.StepMS > maxStepDelay {
				return nil, ticket{}, fmt.Errorf("steps must be 0..%d and step_ms 0..%d; nothing was created", maxSteps, maxStepDelay)
			}
			token := req.Params.GetProgressToken()
			for i := 1; i <= in.Steps; i++ {
				<-s.after(time.Duration(in.StepMS) * time.Millisecond)
				if token == nil {
					continue // the client asked for no progress
				}
				// A notification that cannot be sent (the client went away) does not stop the work.
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i), Total: float64(in.Steps),
					Message: fmt.Sprintf("step %d of %d", i, in.Steps),
				})
			}
			if in.Hold != "" && !s.waitHold(in.Hold, nil) {
				return nil, ticket{}, fmt.Errorf("hold %q aborted; nothing was created", in.Hold)
			}
			return nil, s.createTicket(mcpProgressCreate, "progress_create", in.Title, ""), nil
		})
	addTool(s, srv, &mcp.Tool{Name: "failing_create", Description: "Refuse to create a ticket (an isError result, no effect)."}, mcpFailingCreate,
		func(ctx context.Context, req *mcp.CallToolRequest, in ticketArgs) (*mcp.CallToolResult, any, error) {
			// A plain error is a tool error: go-sdk answers a result with isError: true.
			return nil, nil, errors.New("the ticket system refused the ticket: project is archived; nothing was created")
		})
	addTool(s, srv, &mcp.Tool{Name: "confirm_create", Description: "Ask the user to confirm (elicitation/create), then create a ticket if they accept."}, mcpConfirmCreate,
		func(ctx context.Context, req *mcp.CallToolRequest, in ticketArgs) (*mcp.CallToolResult, ticket, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Create the ticket \"" + in.Title + "\"?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
			if err != nil || res.Action != "accept" {
				return nil, ticket{}, fmt.Errorf("not confirmed (%v); nothing was created", err)
			}
			return nil, s.createTicket(mcpConfirmCreate, "confirm_create", in.Title, in.Priority), nil
		})
	addTool(s, srv, &mcp.Tool{Name: "broken_create", Description: "Create a ticket, then fail with a JSON-RPC internal error."}, mcpBrokenCreate,
		func(ctx context.Context, req *mcp.CallToolRequest, in ticketArgs) (*mcp.CallToolResult, any, error) {
			t := s.createTicket(mcpBrokenCreate, "broken_create", in.Title, in.Priority)
			// A *jsonrpc.Error is sent as the JSON-RPC error itself, not as a tool error.
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error after ticket " + t.ID + " was created"}
		})
}

// addTool adds a typed tool whose calls count as requests of counter, are in flight while they run,
// count as cancelled when their context ended before they finished (go-sdk ends it when
// notifications/cancelled for the call arrives), and are logged.
func addTool[In, Out any](s *sandbox, srv *mcp.Server, t *mcp.Tool, counter string, h mcp.ToolHandlerFor[In, Out]) {
	mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		start := time.Now()
		s.mu.Lock()
		s.requests.add(counter)
		s.inFlight++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
		res, out, err := h(ctx, req, in)
		if ctx.Err() != nil {
			s.mu.Lock()
			s.cancelled.add(counter)
			s.mu.Unlock()
		}
		outcome := "result"
		if err != nil {
			outcome = "error"
			if _, ok := err.(*jsonrpc.Error); !ok {
				outcome = "tool_error"
			}
		}
		s.log.Info("tool call", "endpoint", counter, "outcome", outcome, "cancelled", ctx.Err() != nil, "duration", time.Since(start))
		return res, out, err
	})
}

// createTicket performs the effect of a create tool: a new ticket, counted under counter.
func (s *sandbox) createTicket(counter, tool, title, priority string) ticket {
	t := ticket{Title: title, Priority: priority, Tool: tool}
	s.commit(counter, func() {
		s.tickets.last++
		t.ID = fmt.Sprintf("T-%d", s.tickets.last)
		s.mcpTickets = append(s.mcpTickets, t)
	})
	return t
}

// searchTickets finds the tickets the MCP tools created whose title contains query, oldest first.
func (s *sandbox) searchTickets(query string) found {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := found{Tickets: []ticket{}}
	for _, t := range s.mcpTickets {
		if strings.Contains(t.Title, query) {
			f.Tickets = append(f.Tickets, t)
		}
	}
	return f
}
