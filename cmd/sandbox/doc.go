// Command sandbox plays the APIs of the tools that idemgateway's demo and end-to-end tests put
// behind the gateway: Jira (create and read an issue), Zendesk (create a ticket), Linear (the
// issueCreate GraphQL mutation), Stripe (create a refund) and a generic ticket API shaped like the
// example of the contract (POST /v1/tickets). It counts every side effect it performs, so a test can
// assert how many times an effect really happened, and it injects faults on request (see faults.go
// and the -h text): a slow upstream, an error before acting, a connection broken after acting.
//
// It is also an MCP server (the official go-sdk, mcp.go) at /mcp (sessions, SSE answers),
// /mcp-json (sessions, JSON answers) and /mcp-stateless (2026-07-28, no sessions), whose tools
// create tickets and count each effect per tool: one that completes when its client leaves (after
// ms milliseconds, and after a test releases the hold its "hold" argument names), one that streams
// progress notifications, one that answers a tool error (isError) without effect, and
// one that answers a JSON-RPC error after its effect.
//
// By default a delayed request whose client goes away is dropped without effect. With
// X-Sandbox-Detach: 1 it is finished instead, as most real APIs finish what they accepted: the
// side effect is performed and counted after the delay (or the hold, holds.go) even when the
// gateway timed out, disconnected or died meanwhile. That is the case an unknown outcome exists
// for, and the end-to-end timeout, kill -9 and chaos tests use it.
//
// The sandbox is deliberately naive: like many real tool APIs it ignores Idempotency-Key and
// performs the effect again for every request it accepts. Every deduplication a test observes is
// therefore the gateway's, except on a route that forwards its key on X-Sandbox-Idempotency-Key,
// which the sandbox honours as an upstream with idempotency keys does (dedup.go). POST /v1/tickets
// keeps the tickets by external_id, and GET /v1/tickets?external_id=X finds them: the lookup of a
// route's reconcile block.
//
// Usage:
//
//	sandbox [-listen 127.0.0.1:9000]
//
// When it is ready it prints one line to stdout, with the real port when the port was 0:
//
//	sandbox listening on http://127.0.0.1:9000
//
// It logs one line per request (log/slog, text, to stderr) and shuts down gracefully on SIGINT or
// SIGTERM.
package main
