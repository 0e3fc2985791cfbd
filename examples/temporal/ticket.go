// Package ticketflow is a Temporal workflow whose side effect goes through idemgateway: the
// engine retries an activity until it succeeds (its default retry policy has no limit), and a
// start-to-close timeout that ends before the upstream answers makes it run the activity again
// after the upstream may have acted. The activity sends a key that names the operation, not the
// attempt (the workflow id and the activity id: the same for every retry), so the gateway makes the
// effect happen once and answers every later attempt with its receipt. An answer that says the
// outcome is unknown must not be retried blindly: it reaches the workflow as a non-retryable error.
//
// See README.md for running it against a Temporal server; ticket_test.go runs it in the SDK's test
// environment, against a gateway on its embedded store.
package ticketflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// StartToClose is how long one attempt of CreateTicket may take before the engine gives up on it
// and schedules another: shorter than a slow upstream, as in production when it is set for the
// common case.
const StartToClose = 5 * time.Second

// TicketWorkflow creates one ticket titled title and returns its id. The activity has Temporal's
// default retry policy (retry forever, from 1 s doubling up to 100 s) and StartToClose per attempt.
func TicketWorkflow(ctx workflow.Context, title string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: StartToClose, RetryPolicy: defaultRetries})
	var a *Activities
	var id string
	err := workflow.ExecuteActivity(ctx, a.CreateTicket, title).Get(ctx, &id)
	return id, err
}

// defaultRetries is the policy a Temporal server gives an activity that sets none, written out:
// the SDK's test environment retries only by a policy it is given.
var defaultRetries = &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 100 * time.Second}

// Activities call the gateway at GatewayURL (the route's URL, e.g. http://gateway:8080/v1/tickets).
type Activities struct {
	GatewayURL string
	Client     *http.Client // nil: http.DefaultClient
}

// CreateTicket POSTs {"title": title} through the gateway with the idempotency key
// "<workflow id>/<activity id>" and returns the ticket's id. The gateway's problems (RFC 9457)
// decide what the engine does: retryable ones (in progress, store unavailable) are retried, any
// other, an unknown outcome first of all, is non-retryable.
func (a *Activities) CreateTicket(ctx context.Context, title string) (string, error) {
	info := activity.GetInfo(ctx)
	body, err := json.Marshal(map[string]string{"title": title})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.GatewayURL, bytes.NewReader(body))
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError("building the request", "request", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", info.WorkflowExecution.ID+"/"+info.ActivityID)
	client := a.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err // no answer: the engine retries with the same key, which is safe
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 == 2 {
		var ticket struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(answer, &ticket); err != nil || ticket.ID == "" {
			return "", temporal.NewNonRetryableApplicationError("the upstream's answer has no ticket id", "answer", err)
		}
		return ticket.ID, nil
	}
	var p struct {
		Type      string `json:"type"`
		Detail    string `json:"detail"`
		Retryable bool   `json:"retryable"`
	}
	if json.Unmarshal(answer, &p) != nil || !strings.HasPrefix(p.Type, gatewayProblem) {
		// The upstream's own refusal, passed through: the gateway stored nothing, so a retry
		// with the key acts anew. Only what may pass (408, 429, 5xx) is worth retrying.
		msg := fmt.Sprintf("upstream answered %d: %.200s", resp.StatusCode, answer)
		if resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return "", temporal.NewApplicationError(msg, "upstream")
		}
		return "", temporal.NewNonRetryableApplicationError(msg, "upstream", nil)
	}
	// The gateway's own problem (docs/contract.md §4): its retryable member decides. An unknown
	// outcome (the upstream was reached and no answer came back; later, 409 outcome-unknown) is
	// not retryable: someone must check the upstream first (docs/unknown-outcomes.md).
	msg := fmt.Sprintf("gateway answered %d %s: %s (decision %s)", resp.StatusCode, p.Type, p.Detail, resp.Header.Get("Idempotency-Decision"))
	if p.Retryable {
		return "", temporal.NewApplicationError(msg, p.Type)
	}
	return "", temporal.NewNonRetryableApplicationError(msg, p.Type, nil)
}

// gatewayProblem starts the type of every problem the gateway writes itself (problem.TypePrefix).
const gatewayProblem = "urn:idemgateway:problem:"
