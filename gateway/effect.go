package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgateway/idemgateway/admin"
	"github.com/idemgateway/idemgateway/auth"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// serveEffect serves a request on an idempotent or non_idempotent HTTP route: it identifies the
// request (identify.go), passes a keyless one through, and runs the decision table on the rest.
func (g *Gateway) serveEffect(w http.ResponseWriter, r *http.Request, rt *routes.Route, auth *auth.Authenticator) {
	x := g.newExchange(w, r, rt, auth)
	defer x.Done()
	if !x.Accept() {
		return
	}
	id, err := identify(rt, auth, w, r, nil, x.principal, g.parses, false)
	x.identified(id)
	x.Serve(err)
}

// Serve answers x after Identify: it refuses err (Identify's), passes a request without a key
// that its route does not require through, refuses one without a usable key, and runs the
// decision table on the rest (run). An HTTP route calls it from serveEffect, a front end after
// Exchange.Identify.
func (x *Exchange) Serve(err error) {
	switch {
	case err != nil:
		x.reject(err)
	case x.identity.keyless(x.rt):
		x.keyless()
	case x.keyErr != nil:
		x.reject(x.keyErr)
	default:
		if err := x.inject(); err != nil { // reconcile.inject, after the fingerprint was taken
			x.reject(err)
			return
		}
		x.run()
	}
}

// run claims the key, or reads what it holds, and does what the decision table (decide.go) says,
// until a step answers: only a duplicate that waits for the record to settle claims again.
func (x *Exchange) run() {
	wait := x.g.waiters.duplicate(x.skey, time.Now().Add(x.rt.WaitTimeout))
	defer wait.stop()
	for {
		prev, f, err := x.claim()
		if err != nil {
			x.reject(err)
			return
		}
		act := decide(f, x.rt, wait.left(x.r.Context()))
		if act != actWait && act != actInProgress {
			wait.over()
		}
		switch act {
		case actExecute:
			x.noteChurn()
			x.execute()
		case actReplay:
			x.replay(prev)
		case actConflict:
			x.conflict(prev)
		case actWait:
			wait.await(x.r.Context())
			continue
		case actInProgress:
			x.sayExpires(prev.ExpiresAt)
			x.refuse(DecisionInProgress, fmt.Errorf("%w: started %s ago", problem.ErrInProgress, time.Since(prev.StartedAt).Round(time.Millisecond)), time.Second)
		case actReconcile:
			x.reconcile(prev)
		case actReexecute:
			x.reexecute(prev)
		case actOutcomeUnknown:
			x.sayExpires(prev.ExpiresAt)
			x.refuse(DecisionOutcomeUnknown, outcomeUnknownError(prev), 0)
		case actCorrupt:
			x.reject(fmt.Errorf("%w: unknown state %q", record.ErrCorrupt, prev.State))
		}
		return
	}
}

// noteChurn counts and logs an execution of the same effect under another key within a minute
// (churn.go).
func (x *Exchange) noteChurn() {
	if x.g.churn.observe(x.tenant, x.rt.Name, x.fp, x.key, time.Now()) {
		x.g.metrics.keyChurn.WithLabelValues(x.label).Inc()
		x.logger().Warn("the same effect executed under another key within a minute: the client may mint a new key per retry")
	}
}

// reexecute takes over prev, whose executor died or lost its lease before settling, and executes
// again (on_unknown_outcome: release).
func (x *Exchange) reexecute(prev *record.Record) {
	if x.reclaim(prev, prev.Executions+1) {
		x.execute()
		return
	}
	x.refuse(DecisionInProgress, fmt.Errorf("%w: another request took the key over", problem.ErrInProgress), time.Second)
}

// outcomeUnknownError says why prev's outcome is unknown and how it ends.
func outcomeUnknownError(prev *record.Record) error {
	why := prev.Detail
	if why == "" {
		why = "the execution's lease lapsed before it settled (its gateway died or lost the store)"
	}
	return fmt.Errorf("%w: %s; an operator must resolve it, or it expires at %s",
		problem.ErrOutcomeUnknown, why, prev.ExpiresAt.Format(time.RFC3339))
}

// keyless passes a request without a key through: nothing is stored, and each keyless request is
// its own operation; there is no shared bucket for "no key" (docs/cases.md C08).
func (x *Exchange) keyless() {
	if x.body == nil && !x.limitBody() {
		return
	}
	x.decide(DecisionExecute)
	httpRoute{}.Call(x)
}

// limitBody holds a body that streams through to the route's max_body_bytes: a declared length
// over it is refused at once (false), a longer stream breaks off with 413 (proxyError).
func (x *Exchange) limitBody() bool {
	if err := declaredTooLarge(x.r, x.rt.MaxBodyBytes); err != nil {
		x.reject(err)
		return false
	}
	x.r.Body = http.MaxBytesReader(x.w, x.r.Body, x.rt.MaxBodyBytes)
	return true
}

// claim asks the store for the key with a fresh owner token and an in_progress record, unless the
// store is known to be unfit to keep it (claimRefused). prev is the record it found, when this
// claim did not create one. A claim that fails may have landed (its reply lost): it is released
// in the background (settle.go), and the client gets 503.
func (x *Exchange) claim() (prev *record.Record, f found, err error) {
	if err := x.g.claimRefused(); err != nil { // a store that could lose the claim
		return nil, f, err
	}
	x.owner = record.NewOwner()
	now := x.g.now().UTC() // the clock reconcile.after is measured on
	x.rec = &record.Record{
		Receipt: record.Receipt{
			IdempotencyKey:    x.key,
			Tenant:            x.tenant,
			Tool:              x.rt.Name,
			CredentialScope:   x.credential,
			EffectFingerprint: x.fp,
			Actor:             x.actor,
			RemoteSystem:      x.rt.Upstream.Name,
			ExpiresAt:         now.Add(x.holdTTL()),
			Executions:        1,
		},
		Owner:     x.owner,
		StartedAt: now,
		Caller:    x.caller,
	}
	if len(x.doc) <= record.MaxDocumentBytes {
		x.rec.Document = x.doc
	}
	x.rec.Rules = x.rt.Fingerprint.Rules()
	var state string
	var stored record.Payload
	x.claimSent = time.Now() // the lease runs from here at the latest
	err = x.storeCall("claim", func(ctx context.Context) (err error) {
		f.claimed, state, stored, err = x.g.store.Claim(ctx, x.skey, x.owner, x.rec.Encode(), x.rt.LockLease, x.claimTTL())
		return err
	})
	switch {
	case errors.Is(err, record.ErrCorrupt): // the record exists but cannot be read: never execute
		return nil, f, err
	case err != nil:
		// The store's error may name its address: log it, tell the client only what failed. The
		// claim may have landed all the same, its reply lost: release it.
		x.logger().Error("claim failed", "err", err)
		x.releaseOrphan(err)
		return nil, f, fmt.Errorf("%w: the claim of the key failed", problem.ErrStoreUnavailable)
	case f.claimed:
		return nil, f, nil
	}
	// A replay needs only the settle part, all the claim answers of a settled record; another
	// effect's request reads the claim part's document and rules too, to compare under them and
	// to name the fields that differ.
	if prev, err = record.DecodeSettled(state, stored); err != nil {
		return nil, f, err
	}
	if prev.EffectFingerprint != x.fp && len(stored.Settle) > 0 {
		if err = x.readClaimPart(prev, stored.Settle); err != nil {
			return nil, f, err
		}
	}
	f.state, f.sameEffect = state, x.sameEffect(prev)
	return prev, f, nil
}

// readClaimPart reads the document and rules of prev, a settled record that the claim found, from
// its claim part, which the claim's answer leaves out (record.Store.Claim): a second round trip,
// which only a request of another effect costs. settle is the settle part the claim found; a
// record whose settle part is another by now changed in between (deleted, expired, taken over),
// and the request is refused with 503, to be sent again, rather than judged against the claim
// part of another execution.
func (x *Exchange) readClaimPart(prev *record.Record, settle []byte) error {
	var now record.Payload
	err := x.storeCall("get", func(ctx context.Context) (err error) {
		_, now, err = x.g.store.Get(ctx, x.skey)
		return err
	})
	switch {
	case errors.Is(err, record.ErrCorrupt):
		return err
	case err != nil:
		x.logger().Error("read of the claim part failed", "err", err)
		return fmt.Errorf("%w: the read of the key's record failed", problem.ErrStoreUnavailable)
	case !bytes.Equal(now.Settle, settle):
		return fmt.Errorf("%w: the key's record changed while it was read; send the request again", problem.ErrStoreUnavailable)
	}
	return prev.ReadClaim(now.Claim)
}

// holdTTL is how long the record of a call is kept unless it commits: the route's unknown_ttl
// where an unknown outcome blocks the key, else its ttl. A claim's record whose executor dies
// turns outcome_unknown without a marking, so its claim must keep it as long as a marking would
// (docs/unknown-outcomes.md#retention, case C23); a record marked unknown is kept that long too.
func (x *Exchange) holdTTL() time.Duration {
	if x.rt.OnUnknownOutcome == routes.Block {
		return x.rt.UnknownTTL
	}
	return x.rt.TTL
}

// claimTTL is the expiry a claim (or reclaim) gives its record: holdTTL, plus the upstream
// timeout and one store call. Where that is the route's ttl (unknown outcomes release the key, or
// unknown_ttl is ttl), a commit sent within the upstream timeout of the claim, as nearly every one
// is, keeps it (commitKeepsTTL) and the receipt still lives ttl after it: a first execution runs
// one command less in Redis, the commit's PEXPIRE (docs/stores.md#redis).
func (x *Exchange) claimTTL() time.Duration {
	return x.holdTTL() + x.rt.Upstream.Timeout + x.g.opts.StoreTimeout
}

// commitKeepsTTL reports whether the commit sent now may keep the expiry the claim set
// (claimTTL): the claim kept the record for the route's ttl, and the commit is sent within the
// upstream timeout of the claim and lands, if it is answered, within one store call, so at least
// ttl before the record expires. A later commit, one sent again (its first may have landed late),
// or one after a claim that kept the record for unknown_ttl sets ttl from its landing.
func (x *Exchange) commitKeepsTTL() bool {
	return x.holdTTL() == x.rt.TTL && time.Since(x.claimSent) <= x.rt.Upstream.Timeout
}

// reclaim takes over prev, a record whose outcome is unknown, for a new execution or a
// reconciliation;
// executions is what the record counts once taken over.
func (x *Exchange) reclaim(prev *record.Record, executions int) bool {
	x.rec.Executions = executions
	x.claimSent = time.Now()
	err := x.storeCall("reclaim", func(ctx context.Context) error {
		return refused(x.g.store.Reclaim(ctx, x.skey, prev.Owner, x.owner, x.rec.Encode(), x.rt.LockLease, x.claimTTL()))
	})
	if err != nil && !errors.Is(err, errRefused) {
		x.logger().Warn("reclaim failed", "err", err)
	}
	return err == nil
}

// execute calls the upstream once through the front end, holding the lease (lease.go); the front
// end settles the record from the call's outcome (settle.go). The call is detached from the
// client: a client that goes away does not cancel it.
func (x *Exchange) execute() {
	x.decide(DecisionExecute)
	x.exec = &execution{call: admin.Call{Record: admin.Record{Tenant: x.rec.Tenant, Tool: x.rec.Tool,
		IdempotencyKey: x.rec.IdempotencyKey, CredentialScope: x.rec.CredentialScope}, StartedAt: x.rec.StartedAt}}
	x.g.inFlight.Store(x.exec, struct{}{})
	defer x.g.inFlight.Delete(x.exec)
	if x.g.cutting.Load() { // after CutOff's walk began: it may not see this one
		x.exec.cutOff()
	}
	x.holdLease()
	defer x.dropLease()
	x.front.Call(x)
}

// storeContext bounds one store call. It is detached from the client, so a record is settled even
// when the client has gone.
func (g *Gateway) storeContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), g.opts.StoreTimeout)
}

// errRefused marks a write the store refused to a stale owner (fencing), in storeCall.
var errRefused = errors.New("refused: the record is gone or owned by another execution")

// refused turns a store write's (ok, err) into one error: err, errRefused, or nil.
func refused(ok bool, err error) error {
	if err == nil && !ok {
		return errRefused
	}
	return err
}

// storeCall runs one store call on the request path: bounded by StoreTimeout, detached from the
// client, timed into the access log and idemgateway_store_duration_seconds{op,result}.
func (x *Exchange) storeCall(op string, call func(ctx context.Context) error) error {
	ctx, cancel := x.g.storeContext(x.r.Context())
	defer cancel()
	var span trace.Span
	if x.g.tracer != nil {
		ctx, span = x.g.tracer.Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient))
		defer span.End()
	}
	start := time.Now()
	err := call(ctx)
	d := time.Since(start)
	x.storeDur += d
	result := x.g.observeStore(op, d, err)
	if span != nil {
		if result == "error" {
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attribute.String("idemgateway.store.result", result))
	}
	return err
}

// claimRefused returns the 503 of a keyed request while the store is known to be unfit to keep
// records (docs/stores.md, "Fail closed"): Redis could evict them, refuses the store's scripts, or
// cannot be checked. The claim is not made, so no upstream is called. A store that only refuses
// writes (out of memory) is still asked: a claim that finds a committed record writes nothing and
// replays it, and one that must write fails with 503 too.
func (g *Gateway) claimRefused() error {
	err := g.storeSafety()
	if err == nil || errors.Is(err, record.ErrWritesRefused) {
		return nil
	}
	// The store's error may name its address: the log says it once per change, the client gets
	// what it needs to retry.
	return fmt.Errorf("%w: the store is unfit to keep records now (it could evict them, refuses the gateway's scripts, or cannot be checked); no claim was made", problem.ErrStoreUnavailable)
}
