package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// usage is the head of the -h text; the flag defaults follow it.
const usage = `Usage: sandbox [-listen ADDR]

sandbox plays the APIs of Jira, Zendesk, Linear and Stripe for idemgateway's demo and
end-to-end tests. It ignores Idempotency-Key, counts every side effect it performs and
injects faults on request. It prints "sandbox listening on http://ADDR" when ready.

Endpoints (side-effect counter name in brackets):
  POST /rest/api/3/issue        Jira: create an issue, JSON               [jira.create_issue]
  GET  /rest/api/3/issue/{id}   Jira: read an issue by id or key; 404 if unknown (no side effect)
  POST /rest/api/3/issue/{id}/attachments  Jira: attach files, multipart/form-data parts "file",
                                with X-Atlassian-Token: no-check          [jira.add_attachment]
  POST /api/v2/tickets.json     Zendesk: create a ticket, JSON            [zendesk.create_ticket]
  POST /graphql                 Linear: mutation issueCreate, GraphQL     [linear.issue_create]
  POST /v1/refunds              Stripe: create a refund, form-encoded     [stripe.create_refund]
  POST /v1/tickets              generic: create a ticket from any JSON object [tickets.create_ticket]
  GET  /v1/tickets?external_id=X  generic: {"data":[tickets created with that external_id]}
                                (the lookup of a reconcile block; no side effect)
  POST /jsonrpc                 plain JSON-RPC 2.0: method tickets.create {title}; errors at 200
                                                                          [jsonrpc.create_ticket]

MCP server (Streamable HTTP, the official go-sdk; counted per tool, the counter name in brackets):
  /mcp                          sessions (initialize, Mcp-Session-Id, GET stream), SSE answers
  /mcp-json                     sessions, JSON answers
  /mcp-stateless                2026-07-28: no sessions, SSE answers
  tool create_ticket {title}                            create a ticket      [mcp.create_ticket]
  tool search_tickets {query}   readOnlyHint; the tickets the tools created (no side effect)
  tool slow_create {title,ms}   create after ms, also when the client cancels or leaves [mcp.slow_create]
  tool progress_create {title,steps,step_ms}  a progress notification per step, then create
                                                                             [mcp.progress_create]
  tool failing_create {title}   an isError result, no side effect
  tool broken_create {title}    create, then answer JSON-RPC error -32603   [mcp.broken_create]
  tool confirm_create {title}   ask the user (elicitation/create), create if they accept
                                                                             [mcp.confirm_create]
  A ticket created is the structuredContent of the answer: {"id":"T-…","title":…,"tool":…}.

  GET  /_sandbox/stats          {"total":N,"by_endpoint":{"jira.create_issue":N,...},
                                 "requests":{"total":N,"by_endpoint":{...}},
                                 "cancelled":{...MCP tool calls the client cancelled},"in_flight":N}
  POST /_sandbox/reset          zero the counters, forget created objects, clear the script
  GET  /_sandbox/script         the faults still queued
  POST /_sandbox/script         queue faults for the next requests, whatever their headers:
                                {"fail_next":[{"status":503},{},{"fail_after_commit":"drop",
                                "endpoint":"jira.create_issue"}]} (replaces the queue; {} = no fault)
  GET  /_sandbox/holds          {"holds":{"NAME":{"waiting":N,"released":false}}}
  POST /_sandbox/release        {"hold":"NAME"}: let the requests held on NAME act (now and later)

Fault headers, per request (a scripted fault replaces them all):
  X-Sandbox-Delay: 500ms             wait first; if the request ends meanwhile, do nothing
  X-Sandbox-Hold: NAME               then wait until POST /_sandbox/release {"hold":"NAME"}
  X-Sandbox-Detach: 1                finish whatever the client does: the delay and the hold are
                                     not cut short when the client goes away, and the side effect
                                     is performed and counted after them (logged status=abandoned)
  X-Sandbox-Status: 503              answer 503 (400-599) WITHOUT performing the side effect
  X-Sandbox-Fail-After-Commit: drop  perform the side effect, then close the connection unanswered
  X-Sandbox-Fail-After-Commit: 500   perform the side effect, then answer 500 (400-599)
  X-Sandbox-Set-Cookie: 1            add a Set-Cookie header to the success response
  X-Sandbox-Body-Bytes: 5242880      pad the success response with a JSON string field
                                     "sandbox_padding" of that many bytes (at most 64 MiB)
  X-Sandbox-Success-Status: 202      answer the success with this status (200-299; 204: no body)
  X-Sandbox-Gzip: 1                  gzip the success response when the request accepts gzip

De-duplication (not a fault; route it with the gateway's forward_key):
  X-Sandbox-Idempotency-Key: K       the first effect with K is answered again, without a second
                                     effect, to every later request to that endpoint with K
  X-Sandbox-Key-Collation: ci        compare keys as a MySQL _ci collation does: K and k are one key

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

// errUsage reports bad flags or arguments; the flag package has already said what is wrong.
var errUsage = errors.New("usage")

// shutdownTimeout bounds the graceful shutdown; requests still running after it are cut.
const shutdownTimeout = 10 * time.Second

// run serves the sandbox on the -listen address until ctx ends, then shuts down gracefully. It
// prints the readiness line to stdout and logs to stderr. It returns flag.ErrHelp for -h.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:9000", "`address` to listen on; port 0 picks a free port")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	sb := newSandbox(logger)
	srv := &http.Server{
		Handler:           sb,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "sandbox listening on http://%s\n", ln.Addr())

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sb.abortHolds() // a held request must not keep the shutdown waiting
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
