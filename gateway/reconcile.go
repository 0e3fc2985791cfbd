package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// forwardedKey is the key the gateway sends upstream on the upstream's forward_key header and
// offers as {key} to reconcile templates: the scope key (tenant, tool and idempotency key,
// URL-escaped) made case-safe (caseSafe), or its digest when longer than 255 bytes. Unlike the
// client's key it cannot collide across tenants or tools at the upstream, nor between two keys
// that differ only in letter case at an upstream that folds case.
func (x *Exchange) forwardedKey() string {
	return routes.KeyOrDigest(caseSafe(x.skey))
}

// caseSafe returns k, a scope key, with each upper-case ASCII letter percent-encoded ("A" is
// "%41"), so that two scope keys that differ only in letter case stay different under ASCII case
// folding: an upstream whose de-duplication index folds case (a MySQL _ci collation) must not take
// "Refund-7" for "refund-7", nor tenant "Acme" for "acme" (docs/cases.md C25). k's segments are
// URL-escaped already: "%" starts an escape whose hex digits are upper case, and is copied with
// it; letters are never escaped by url.PathEscape, so "%41" to "%5A" come from here alone. A
// forwarded key folded to lower case therefore still tells its key apart, and a key without
// upper-case letters is forwarded as it is.
func caseSafe(k string) string {
	upper := 0
	for i := 0; i < len(k); i++ {
		if 'A' <= k[i] && k[i] <= 'Z' {
			upper++
		}
	}
	if upper == 0 {
		return k
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(k)+2*upper) // at most: escapes' hex letters are not re-encoded
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c == '%' && i+2 < len(k):
			b = append(b, k[i:i+3]...)
			i += 2
		case 'A' <= c && c <= 'Z':
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// templateValue looks up a field of a reconcile template for this request.
func (x *Exchange) templateValue(source, name string, p canonical.Pointer) (string, bool) {
	if source == routes.SourceKey {
		return x.forwardedKey(), true
	}
	return requestField(x.r, x.tenant, x.body, source, name, p)
}

// inject writes the route's reconcile.inject value into the body sent upstream (after the
// fingerprint was taken: the value is the gateway's, not the client's). Errors wrap
// problem.ErrInvalidBody.
func (x *Exchange) inject() error {
	if x.rt.Reconcile == nil || x.rt.Reconcile.Inject == nil {
		return nil
	}
	in := x.rt.Reconcile.Inject
	value, err := in.Value.Expand(x.templateValue)
	if err != nil {
		return fmt.Errorf("%w: reconcile.inject: %v", problem.ErrInvalidBody, err)
	}
	body, err := canonical.SetString(x.body, in.BodyPointer, value)
	if err != nil {
		return fmt.Errorf("reconcile.inject needs a JSON body: %w", err)
	}
	x.body = body
	return nil
}

// reconcile settles prev, a record whose outcome is unknown, by the route's lookup once
// reconcile.after has passed since its call started (its last execution's start, for a record
// that was reconciled and executed again): it takes the record over (so one request
// reconciles it), asks the upstream whether the effect exists, then
// commits a receipt made from the answer and replays it (found), executes the call again (not
// found), or leaves the record outcome_unknown (the lookup failed).
func (x *Exchange) reconcile(prev *record.Record) {
	// The upstream may still be working on the call whose outcome is unknown (the gateway stopped
	// waiting, or died; the upstream did not). A lookup now could miss an effect that lands a
	// moment later, and the re-execution would make it twice: wait reconcile.after from the latest
	// moment the record's last call may have started (callStartBound after its started_at).
	after := x.callStartBound(prev.Executions) + x.rt.Reconcile.After
	if wait := prev.StartedAt.Add(after).Sub(x.g.now()); wait > 0 {
		x.refuse(DecisionInProgress, fmt.Errorf("%w: the outcome of the call is unknown; the upstream is asked %s after the call started (reconcile.after, and %s for the call to start), in %s",
			problem.ErrInProgress, after, after-x.rt.Reconcile.After, wait.Round(time.Millisecond)), wait)
		return
	}
	// The takeover keeps the claim's start (now), not the unknown call's: when the lookup finds
	// nothing, the call executes again, and a retry must then wait reconcile.after from the
	// re-execution's start, both after a kill during it (the takeover's record is what it leaves)
	// and after it ends unknown too. A lookup that fails executes nothing: it writes back the
	// unknown call's start, and may be retried at once. (A kill during the lookup leaves the
	// takeover's start: the next retry waits reconcile.after again, the safe side.)
	if !x.reclaim(prev, prev.Executions) {
		x.refuse(DecisionInProgress, fmt.Errorf("%w: another request is settling the key", problem.ErrInProgress), time.Second)
		return
	}
	x.holdLease()
	defer x.dropLease()
	rc := x.rt.Reconcile
	found, answer, err := x.lookupEffect(rc)
	switch {
	case err != nil:
		x.rec.StartedAt = prev.StartedAt // nothing was executed: still the unknown call's start
		x.rec.Detail = "reconciliation failed: " + err.Error()
		x.logger().Warn("reconciliation failed", "err", err)
		x.settle(opMarkUnknown)
		x.refuse(DecisionOutcomeUnknown, fmt.Errorf("%w: %s", problem.ErrOutcomeUnknown, x.rec.Detail), 0)
	case found != "":
		x.rec.Detail = "reconciled: the upstream has the effect"
		stored := &record.Response{Status: rc.Status, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(found)}
		x.commitReceipt(stored, true, answer, rc.RemoteID, rc.RemoteURL)
		x.w.Header().Set("Idempotency-Reconciled", "found")
		x.replay(x.rec)
	default:
		x.rec.Executions = prev.Executions + 1
		x.w.Header().Set("Idempotency-Reconciled", "not-found")
		x.execute()
	}
}

// callStartBound is how long after a record's started_at its upstream call may have started: the
// claim that stamped it is one store call (StoreTimeout) before the call; a call executed again by
// a reconciliation also waited for the reclaim (another store call) and the lookup (the upstream's
// timeout). A reconciliation that counted reconcile.after from started_at alone could look up while
// the call was still under way, when a claim's reply came late (case C14), and execute it twice.
func (x *Exchange) callStartBound(executions int) time.Duration {
	d := x.g.opts.StoreTimeout
	if executions > 1 {
		d += x.g.opts.StoreTimeout + x.rt.Upstream.Timeout
	}
	return d
}

// lookupEffect runs the reconcile lookup: GET the upstream's URL with rc.Path. found is the JSON
// of the value at rc.Found ("" when absent, null, or the lookup answers 404); answer is the body.
// A transport failure is logged here; err names only its kind (faultOf), for the receipt's detail
// and the client's problem.
func (x *Exchange) lookupEffect(rc *routes.Reconcile) (found string, answer []byte, err error) {
	target, err := rc.Path.Expand(func(source, name string, p canonical.Pointer) (string, bool) {
		v, ok := x.templateValue(source, name, p)
		return strings.ReplaceAll(url.QueryEscape(v), "+", "%20"), ok // valid in a path and a query
	})
	if err != nil {
		return "", nil, err
	}
	up := x.rt.Upstream
	u := *up.URL
	path, query, _ := strings.Cut(target, "?")
	u.Path, u.RawPath = strings.TrimSuffix(u.Path, "/")+path, ""
	u.RawQuery = query
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), up.Timeout)
	defer cancel()
	var connected atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", nil, err
	}
	req.Header = up.Headers.Header()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := x.g.opts.Transport.RoundTrip(req)
	if err != nil {
		x.logger().Warn("reconcile lookup failed", "err", err)
		return "", nil, fmt.Errorf("lookup: %w", faultOf(err, connected.Load(), up.Timeout))
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(io.LimitReader(resp.Body, x.g.opts.MaxReceiptBodyBytes+1))
	switch {
	case err != nil:
		x.logger().Warn("reconcile lookup failed", "err", err)
		return "", nil, fmt.Errorf("lookup: reading the answer: %w", faultOf(err, true, up.Timeout))
	case resp.StatusCode == http.StatusNotFound:
		return "", answer, nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return "", nil, fmt.Errorf("lookup answered %d", resp.StatusCode)
	case int64(len(answer)) > x.g.opts.MaxReceiptBodyBytes:
		return "", nil, fmt.Errorf("lookup answer larger than %d bytes", x.g.opts.MaxReceiptBodyBytes)
	}
	v, ok := canonical.LookupJSON(answer, rc.Found)
	if !ok || string(v) == "null" {
		return "", answer, nil
	}
	return string(v), answer, nil
}
