// Command sandbox plays the APIs of the tools that idemgateway's demo and end-to-end tests put
// behind the gateway: Jira (create and read an issue), Zendesk (create a ticket), Linear (the
// issueCreate GraphQL mutation), Stripe (create a refund) and a generic ticket API shaped like the
// example of the contract (POST /v1/tickets). It counts every side effect it performs, so a test can
// assert how many times an effect really happened, and it injects faults on request (see faults.go
// and the -h text): a slow upstream, an error before acting, a connection broken after acting.
//
// The sandbox is deliberately naive: like many real tool APIs it ignores Idempotency-Key and
// performs the effect again for every request it accepts. Every deduplication a test observes is
// therefore the gateway's.
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
