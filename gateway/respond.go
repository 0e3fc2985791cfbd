package gateway

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
)

// Responder is what a protocol front end adds to the decision table: how it calls the upstream
// under a claimed key, and how it renders the answers that call none. The decision loop
// (effect.go, decide.go), the store's writes and the bookkeeping of each decision (the
// Idempotency-Decision header, metrics, the span) are shared. HTTP routes (httpRoute) answer with
// the stored response and RFC 9457 problems; a front end answers in its protocol (Front).
type Responder interface {
	// Call makes x's upstream call once, under its claimed key, and settles the record from the
	// call's outcome before the answer reaches the client (the reverse proxy's, Exchange.Proxy,
	// does both).
	Call(x *Exchange)
	// Replay answers with prev's stored response.
	Replay(x *Exchange, prev *record.Record)
	// Refuse answers with ref: a decision that called no upstream.
	Refuse(x *Exchange, ref *Refusal)
}

// Refusal is an answer that calls no upstream: a conflict, a request in progress, an unknown
// outcome, or a rejected request (a bad key or body, the store down).
type Refusal struct {
	Decision string // one of the Decision constants
	// Err wraps the sentinel that says which answer this is (package problem); its message is the
	// detail.
	Err error
	// RetryAfter is when a retry may succeed, on retryable refusals (0: not said).
	RetryAfter time.Duration
	// Conflict is set on a conflict: what differs from the record the key holds.
	Conflict *Conflict
}

// Conflict is what a conflict's answer tells of the record the key holds (docs/contract.md §4).
type Conflict struct {
	ExistingFingerprint, ReceivedFingerprint string
	ExistingRemoteID                         string
	// DifferingFields name the fields whose values differ (docs/fingerprint.md), at most
	// problem.MaxDifferingFields; nil when the record kept no document.
	DifferingFields []string
}

// replay answers with the stored response, without calling the upstream.
func (x *Exchange) replay(prev *record.Record) {
	x.decide(DecisionReplay)
	x.sayExpires(prev.ExpiresAt)
	x.setRemoteID(prev.RemoteID)
	x.front.Replay(x, prev)
}

// conflict answers that the key is known with a different effect fingerprint. What the answer
// tells of the record (its fingerprint, remote id and the fields that differ) is the first
// caller's data: with clients, only the caller who claimed the key gets it
// (docs/security.md#who-is-calling).
func (x *Exchange) conflict(prev *record.Record) {
	c := &Conflict{ReceivedFingerprint: x.fp}
	same := x.caller == "" || x.caller == prev.Caller
	if same {
		c.ExistingFingerprint, c.ExistingRemoteID = prev.EffectFingerprint, prev.RemoteID
		switch {
		case x.prior != nil: // made under other rules (rulesversion.go)
			c.DifferingFields = x.priorConflict(prev, problem.MaxDifferingFields)
		case prev.Document != nil && x.doc != nil:
			c.DifferingFields = x.rt.Fingerprint.DifferingFields(prev.Document, x.doc, problem.MaxDifferingFields)
		}
	}
	x.decide(DecisionConflict)
	x.sayExpires(prev.ExpiresAt)
	if x.prior != nil && len(c.DifferingFields) == 0 {
		x.front.Refuse(x, &Refusal{
			Decision: DecisionConflict,
			Err: fmt.Errorf("%w: key %q was first used under other fingerprint rules, and no field both rule sets read tells this request from that one; send it under a new key if it is another effect",
				problem.ErrRulesChanged, x.key),
		})
		return
	}
	x.front.Refuse(x, &Refusal{
		Decision: DecisionConflict,
		Err:      fmt.Errorf("%w: key %q was first used for a request with another fingerprint", problem.ErrConflict, x.key),
		Conflict: c,
	})
}

// refuse answers with a decision that calls no upstream (in_progress, outcome_unknown), telling a
// retryable one to come back after retryAfter.
func (x *Exchange) refuse(decision string, err error, retryAfter time.Duration) {
	x.decide(decision)
	x.front.Refuse(x, &Refusal{Decision: decision, Err: err, RetryAfter: retryAfter})
}

// reject answers a request that cannot be decided on (bad key, bad body, store down): no
// Idempotency-Decision header, decision "rejected" in the answer and the span.
func (x *Exchange) reject(err error) {
	x.decision = DecisionRejected
	if x.traced {
		x.span.SetAttributes(attrDecision.String(DecisionRejected))
	}
	x.g.countDecision(x.label, DecisionRejected)
	x.w.Header().Del("Idempotency-Decision")
	var retryAfter time.Duration
	switch {
	case errors.Is(err, problem.ErrStoreUnavailable), errors.Is(err, problem.ErrOverloaded):
		retryAfter = time.Second
	case errors.Is(err, record.ErrCorrupt):
		x.logger().Error("the key's record is unreadable: its retries are refused until it expires or an operator deletes it", "err", err)
	}
	x.front.Refuse(x, &Refusal{Decision: DecisionRejected, Err: err, RetryAfter: retryAfter})
}

// httpRoute is the front end of HTTP routes: the upstream call goes through the reverse proxy
// (proxy.go), a replay is the stored response, a refusal an RFC 9457 problem.
type httpRoute struct{}

// replay writes prev's stored status, headers and body, with Idempotent-Replayed: true. A receipt
// that kept no body (over MaxReceiptBodyBytes, or resolved by an operator) replays none, and says
// so in Idempotency-Replay-Body: omitted.
func (httpRoute) Replay(x *Exchange, prev *record.Record) {
	h := x.w.Header()
	status := prev.ResponseStatus
	var body [3][]byte // the body, in pieces written as they are (withRetryID)
	if resp := prev.Response; resp != nil {
		for name, values := range resp.Header {
			h[name] = values
		}
		status, body[0] = resp.Status, resp.Body
	}
	if x.rt.Fingerprint.Format() == canonical.FormatJSONRPC && prev.ResponseBodyKept && prev.Response != nil {
		body = withRetryID(prev.Response, x.body)
	}
	h.Set("Idempotent-Replayed", "true")
	if !prev.ResponseBodyKept {
		h.Del("Content-Type")
		h.Set("Idempotency-Replay-Body", "omitted")
	}
	h.Set("Content-Length", strconv.Itoa(len(body[0])+len(body[1])+len(body[2])))
	x.w.WriteHeader(status)
	for _, piece := range body {
		if len(piece) > 0 {
			if _, err := x.w.Write(piece); err != nil {
				return
			}
		}
	}
}

// withRetryID is resp's body, a stored JSON-RPC response, under the id of req, the retry's
// JSON-RPC request (mcpwire.SpliceID's pieces): a client matches responses to its requests by id,
// and a retry is a new request with a new id (docs/contract.md §7, plain JSON-RPC routes). The id
// is spliced where the commit found it (record.Response.IDSpan), or, in a record without the span
// (an earlier build's) or whose span holds no id member SpliceID can check (an escaped name), where
// a read of the body finds it. A body or request that is not one JSON-RPC message is replayed as
// stored.
func withRetryID(resp *record.Response, req []byte) [3][]byte {
	msg, err := mcpwire.Parse(req)
	if err != nil || msg.Kind != mcpwire.Request {
		return [3][]byte{resp.Body}
	}
	if resp.IDSpan != [2]int{} {
		if pieces, err := mcpwire.SpliceID(resp.Body, resp.IDSpan[0], resp.IDSpan[1], msg.ID); err == nil {
			return pieces
		}
	}
	if pieces, err := mcpwire.ReplaceID(resp.Body, msg.ID); err == nil {
		return pieces
	}
	return [3][]byte{resp.Body}
}

// refuse writes ref as an application/problem+json answer, with Retry-After in whole seconds,
// rounded up, on a retryable one.
func (httpRoute) Refuse(x *Exchange, ref *Refusal) {
	var unauthenticated *auth.Error
	if errors.As(ref.Err, &unauthenticated) {
		for _, c := range unauthenticated.Challenges {
			x.w.Header().Add("Www-Authenticate", c)
		}
	}
	p := problem.New(ref.Err, ref.Decision, x.key)
	if c := ref.Conflict; c != nil {
		p.Reason = "idempotency_key_reused_with_different_effect"
		p.ExistingFingerprint, p.ReceivedFingerprint = c.ExistingFingerprint, c.ReceivedFingerprint
		p.ExistingRemoteID, p.DifferingFields = c.ExistingRemoteID, c.DifferingFields
	}
	p.Write(x.w, int((ref.RetryAfter+time.Second-1)/time.Second))
}
