package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// recordKey is the store key named by the admin path /v1/records/{tenant}/{tool}/{key}[/resolve],
// whose segments are URL-escaped once (docs/contract.md §5), and by ?credential= on a route with
// scope.credential.
func recordKey(r *http.Request) string {
	p := routes.PathParams(r)
	return record.ScopeKey{Tenant: p["tenant"], Tool: p["tool"], Key: p["key"], Credential: r.URL.Query().Get("credential")}.String()
}

func (a *admin) getRecord(w http.ResponseWriter, r *http.Request) {
	key := recordKey(r)
	var state string
	var stored record.Payload
	err := a.storeOp(r.Context(), func(ctx context.Context) (err error) {
		state, stored, err = a.store.Get(ctx, key)
		return err
	})
	if err == nil && state == "" {
		err = fmt.Errorf("%w for that tenant, tool and key", problem.ErrNoRecord)
	}
	var rec *record.Record
	if err == nil {
		rec, err = record.Decode(state, stored)
	}
	if err != nil {
		problem.New(err, "", "").Write(w, 1)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(rec.Receipt)
}

func (a *admin) deleteRecord(w http.ResponseWriter, r *http.Request) {
	key := recordKey(r)
	if r.URL.Query().Get("force") != "true" {
		var state string
		err := a.storeOp(r.Context(), func(ctx context.Context) (err error) {
			state, _, err = a.store.Get(ctx, key)
			return err
		})
		switch {
		case err != nil && !errors.Is(err, record.ErrCorrupt): // an unreadable record may be deleted
			problem.New(err, "", "").Write(w, 1)
			return
		case state == record.StateInProgress:
			(&problem.Problem{Type: problem.TypePrefix + "record-in-progress", Title: "Record in progress", Status: http.StatusConflict,
				Detail: "a call under this key is under way (its lease is live): deleting the record would let a retry execute it again; wait for it, or add ?force=true"}).Write(w, 0)
			return
		}
	}
	var existed bool
	err := a.storeOp(r.Context(), func(ctx context.Context) (err error) {
		existed, err = a.store.Delete(ctx, key)
		return err
	})
	if err == nil && !existed {
		err = fmt.Errorf("%w for that tenant, tool and key", problem.ErrNoRecord)
	}
	if err != nil {
		problem.New(err, "", "").Write(w, 1)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resolution is the body of POST .../resolve.
type resolution struct {
	Outcome        string `json:"outcome"` // committed | not_committed
	RemoteID       string `json:"remote_id"`
	RemoteURL      string `json:"remote_url"`
	ResponseStatus int    `json:"response_status"` // default 200
}

// errResolve is a resolve request that cannot be carried out as asked: 409.
var errResolve = errors.New("cannot resolve")

func (a *admin) resolveRecord(w http.ResponseWriter, r *http.Request) {
	key := recordKey(r)
	var res resolution
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		problem.New(fmt.Errorf("%w: resolve: %v", problem.ErrInvalidBody, err), "", "").Write(w, 0)
		return
	}
	switch {
	case res.Outcome != "committed" && res.Outcome != "not_committed":
		problem.New(fmt.Errorf("%w: resolve: outcome %q: want committed or not_committed", problem.ErrInvalidBody, res.Outcome), "", "").Write(w, 0)
		return
	case res.ResponseStatus == 0:
		res.ResponseStatus = http.StatusOK
	case res.ResponseStatus < 200 || res.ResponseStatus > 399:
		problem.New(fmt.Errorf("%w: resolve: response_status %d: a committed call answers 2xx or 3xx", problem.ErrInvalidBody, res.ResponseStatus), "", "").Write(w, 0)
		return
	}
	receipt, err := a.resolve(r.Context(), key, res)
	switch {
	case errors.Is(err, errResolve):
		(&problem.Problem{Type: problem.TypePrefix + "cannot-resolve", Title: "Cannot resolve", Status: http.StatusConflict, Detail: err.Error()}).Write(w, 0)
	case err != nil:
		problem.New(err, "", "").Write(w, 1)
	case receipt == nil:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(receipt)
	}
}

// resolve settles the record at key as res says: it takes the record over from its last owner
// (the store refuses when the record is committed, or in progress under a live lease), then commits
// or releases it under the new owner token, so a concurrent execution can never be overwritten.
func (a *admin) resolve(ctx context.Context, key string, res resolution) (*record.Receipt, error) {
	var state string
	var stored record.Payload
	err := a.storeOp(ctx, func(ctx context.Context) (err error) {
		state, stored, err = a.store.Get(ctx, key)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case state == "":
		return nil, fmt.Errorf("%w for that tenant, tool and key", problem.ErrNoRecord)
	case state == record.StateCommitted:
		return nil, fmt.Errorf("%w: the record is committed already", errResolve)
	}
	rec, err := record.Decode(state, stored)
	if err != nil {
		return nil, err
	}
	ttl, lease := routes.DefaultTTL, routes.DefaultLockLease
	if rt := a.pipeline.Route(rec.Tool); rt != nil {
		ttl, lease = rt.TTL, rt.LockLease
	}
	from := rec.Owner
	rec.Owner = record.NewOwner()
	var ok bool
	if err := a.storeOp(ctx, func(ctx context.Context) (err error) {
		ok, err = a.store.Reclaim(ctx, key, from, rec.Owner, rec.Encode(), lease, ttl)
		return err
	}); err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: the record is in progress under a live lease, or changed meanwhile", errResolve)
	}
	defer a.pipeline.Settled(key)
	if res.Outcome == "not_committed" {
		return nil, a.storeOp(ctx, func(ctx context.Context) error {
			_, err := a.store.Release(ctx, key, rec.Owner)
			return err
		})
	}
	now := time.Now().UTC()
	rec.State, rec.CommittedAt, rec.ExpiresAt = record.StateCommitted, &now, now.Add(ttl)
	rec.RemoteID, rec.RemoteURL, rec.ResponseStatus = res.RemoteID, res.RemoteURL, res.ResponseStatus
	rec.Response, rec.ResponseBodyKept = nil, false
	rec.Detail = "resolved as committed by an operator"
	err = a.storeOp(ctx, func(ctx context.Context) error {
		_, err := a.store.Commit(ctx, key, rec.Owner, rec.EncodeSettle(), ttl)
		return err
	})
	return &rec.Receipt, err
}

// storeOp runs one admin store call, bounded by StoreTimeout and detached from the end of ctx;
// errors wrap problem.ErrStoreUnavailable, but for record.ErrCorrupt (a record that exists but
// cannot be read), which is returned as it is.
func (a *admin) storeOp(ctx context.Context, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.storeTimeout)
	defer cancel()
	err := call(ctx)
	switch {
	case err == nil, errors.Is(err, record.ErrCorrupt): // a record that cannot be read is not a store outage
		return err
	}
	return fmt.Errorf("%w: %v", problem.ErrStoreUnavailable, err)
}

// probeStore checks that the store can be reached, is fit (Ping) and takes writes: it claims and
// releases a probe key that no request key can equal (a scope key has three segments), since a
// store can answer reads while its writes fail (a full disk).
func (a *admin) probeStore(ctx context.Context) error {
	if err := a.store.Ping(ctx); err != nil {
		return err
	}
	key, owner := "readyz/"+record.NewOwner(), record.NewOwner()
	if _, _, _, err := a.store.Claim(ctx, key, owner, []byte("{}"), time.Second, 10*time.Second); err != nil {
		return fmt.Errorf("write probe: %w", err)
	}
	if _, err := a.store.Release(ctx, key, owner); err != nil {
		return fmt.Errorf("write probe: %w", err)
	}
	return nil
}

// recordPage is the answer of GET /v1/records.
type recordPage struct {
	Records    []record.Receipt `json:"records"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

func (a *admin) listRecords(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bad := func(format string, args ...any) {
		problem.New(fmt.Errorf("%w: "+format, append([]any{problem.ErrInvalidRequest}, args...)...), "", "").Write(w, 0)
	}
	if state := q.Get("state"); state != "" && state != record.StateUnknown {
		bad("state %q: only %s records are listed", state, record.StateUnknown)
		return
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			bad("limit %q: want 1 to 1000", l)
			return
		}
		limit = n
	}
	cursor, err := base64.RawURLEncoding.DecodeString(q.Get("cursor"))
	if err != nil {
		bad("cursor: not one this API gave")
		return
	}
	tenant, tool := q.Get("tenant"), q.Get("tool")
	prefix := record.ScopePrefix(tenant, tool)
	var keys []string
	var stored []record.Payload
	var next string
	err = a.storeOp(r.Context(), func(ctx context.Context) (err error) {
		keys, stored, next, err = a.store.ListUnknown(ctx, prefix, string(cursor), limit)
		return err
	})
	if err != nil {
		problem.New(err, "", "").Write(w, 1)
		return
	}
	page := recordPage{Records: []record.Receipt{}}
	for i, p := range stored {
		rec, err := record.Decode(record.StateUnknown, p)
		if err != nil {
			a.log.Error("listing records: an unreadable record", "key", keys[i], "err", err)
			continue
		}
		if tool == "" || rec.Tool == tool { // a tool without a tenant is filtered here
			page.Records = append(page.Records, rec.Receipt)
		}
	}
	if next != "" {
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(page)
}
