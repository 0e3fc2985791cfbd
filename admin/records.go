package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// recordKey is the store key a records request names: by the path
// /v1/records/{tenant}/{tool}/{key}[/…], whose segments are URL-escaped once (docs/contract.md §5),
// or by the query of /v1/record[/…]?tenant=T&tool=X&key=K (a key or tenant that is "." or ".."
// cannot be a path segment: clients remove such segments from URLs); ?credential= on either names
// a credential-scoped key. The query form needs tenant, tool and key: without them it answers 400
// and returns false.
func recordKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	q := r.URL.Query()
	k := record.ScopeKey{Credential: q.Get("credential")}
	if p := routes.PathParams(r); p["key"] != "" {
		k.Tenant, k.Tool, k.Key = p["tenant"], p["tool"], p["key"]
	} else {
		k.Tenant, k.Tool, k.Key = q.Get("tenant"), q.Get("tool"), q.Get("key")
		if k.Tenant == "" || k.Tool == "" || k.Key == "" {
			problem.New(fmt.Errorf("%w: /v1/record needs ?tenant=, ?tool= and ?key=", problem.ErrInvalidRequest), "", "").Write(w, 0)
			return "", false
		}
	}
	return k.String(), true
}

// readRecord reads and decodes the record r names, answering the problem and returning nil when
// there is none or it cannot be read.
func (a *admin) readRecord(w http.ResponseWriter, r *http.Request) *record.Record {
	key, ok := recordKey(w, r)
	if !ok {
		return nil
	}
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
		return nil
	}
	return rec
}

func (a *admin) getRecord(w http.ResponseWriter, r *http.Request) {
	if rec := a.readRecord(w, r); rec != nil {
		writeJSON(w, a.view(rec))
	}
}

// view is rec as the records API serves it.
func (a *admin) view(rec *record.Record) recordView {
	v := recordView{Receipt: rec.Receipt, StartedAt: rec.StartedAt}
	if rec.State != record.StateCommitted {
		v.ResolveStatus = usualSuccess(a.pipeline.Route(rec.Tool))
	}
	return v
}

// recordView is a record as the records API serves it: its receipt, when its call started and,
// for a record not committed, the status a resolve as committed stores by default.
type recordView struct {
	record.Receipt
	StartedAt     time.Time `json:"started_at"`
	ResolveStatus int       `json:"resolve_status,omitempty"`
}

// usualSuccess is the status a record of rt resolved as committed stores when the resolve names
// none: the route's first committed code (outcome.committed), else 200.
func usualSuccess(rt *routes.Route) int {
	if rt != nil {
		for _, code := range rt.Outcome.Committed {
			if code >= 200 && code <= 399 {
				return code
			}
		}
	}
	return http.StatusOK
}

// writeJSON answers v as JSON, never cached.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func (a *admin) deleteRecord(w http.ResponseWriter, r *http.Request) {
	key, ok := recordKey(w, r)
	if !ok {
		return
	}
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
				Detail: "a call under this key is under way (its lease is live): deleting the record would let a retry execute it again; wait for it, or delete it by force (?force=true; idemgateway records delete --force)"}).Write(w, 0)
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
	ResponseStatus int    `json:"response_status"` // default: the route's usual success (usualSuccess)
}

// errResolve is a resolve request that cannot be carried out as asked: 409.
var errResolve = errors.New("cannot resolve")

func (a *admin) resolveRecord(w http.ResponseWriter, r *http.Request) {
	key, ok := recordKey(w, r)
	if !ok {
		return
	}
	var res resolution
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	err := dec.Decode(&res)
	if err == nil && dec.More() {
		err = errors.New("more after the JSON object")
	}
	if err == nil {
		err = res.check()
	}
	if err != nil {
		problem.New(fmt.Errorf("%w: resolve: %v", problem.ErrInvalidBody, err), "", "").Write(w, 0)
		return
	}
	rec, err := a.resolve(r.Context(), key, res)
	switch {
	case errors.Is(err, errResolve):
		(&problem.Problem{Type: problem.TypePrefix + "cannot-resolve", Title: "Cannot resolve", Status: http.StatusConflict, Detail: err.Error()}).Write(w, 0)
	case err != nil:
		problem.New(err, "", "").Write(w, 1)
	case rec == nil:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.view(rec))
	}
}

// check refuses a resolution the gateway cannot store as asked: an outcome other than committed
// or not_committed, a status no committed call answers, a remote URL that is not an absolute
// http(s) URL, control characters in the remote id or URL.
func (res resolution) check() error {
	switch {
	case res.Outcome != "committed" && res.Outcome != "not_committed":
		return fmt.Errorf("outcome %q: want committed or not_committed", res.Outcome)
	case res.ResponseStatus != 0 && (res.ResponseStatus < 200 || res.ResponseStatus > 399):
		return fmt.Errorf("response_status %d: a committed call answers 2xx or 3xx", res.ResponseStatus)
	case strings.ContainsFunc(res.RemoteID+res.RemoteURL, unicode.IsControl):
		return errors.New("remote_id and remote_url hold no control characters")
	}
	if res.RemoteURL != "" {
		if u, err := url.Parse(res.RemoteURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("remote_url %q: want an absolute http or https URL", res.RemoteURL)
		}
	}
	return nil
}

// resolve settles the record at key as res says: it takes the record over from its last owner
// (the store refuses when the record is committed, or in progress under a live lease), then commits
// or releases it under the new owner token, so a concurrent execution can never be overwritten.
func (a *admin) resolve(ctx context.Context, key string, res resolution) (*record.Record, error) {
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
	rt := a.pipeline.Route(rec.Tool)
	if rt != nil {
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
	if res.ResponseStatus == 0 {
		res.ResponseStatus = usualSuccess(rt)
	}
	rec.RemoteID, rec.RemoteURL, rec.ResponseStatus = res.RemoteID, res.RemoteURL, res.ResponseStatus
	rec.Response, rec.ResponseBodyKept = nil, false
	rec.Detail = "resolved as committed by an operator"
	err = a.storeOp(ctx, func(ctx context.Context) error {
		_, err := a.store.Commit(ctx, key, rec.Owner, rec.EncodeSettle(), ttl)
		return err
	})
	return rec, err
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

// recordPage is the answer of GET /v1/records: in key order, a page and the cursor of the next;
// oldest first, the oldest limit records and how many the queue holds.
type recordPage struct {
	Records    []recordView `json:"records"`
	NextCursor string       `json:"next_cursor,omitempty"`
	Total      *int         `json:"total,omitempty"`
	// TotalCapped says the store's index holds more than maxQueueScan records: Total counts
	// those of the filter among the ones read.
	TotalCapped bool `json:"total_capped,omitempty"`
}

// maxQueueScan bounds the records GET /v1/records?order=oldest reads to sort: a queue that long
// is not worked through by hand, and its oldest are found among them only when the store's key
// order happens to agree.
const maxQueueScan = 10_000

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
	order := q.Get("order")
	switch {
	case order != "" && order != "key" && order != "oldest":
		bad("order %q: want key or oldest", order)
		return
	case order == "oldest" && len(cursor) > 0:
		bad("cursor: order=oldest answers the oldest records in one page, without a cursor")
		return
	}
	tenant, tool := q.Get("tenant"), q.Get("tool")
	var page recordPage
	if order == "oldest" {
		page, err = a.oldestUnknown(r.Context(), tenant, tool, limit)
	} else {
		page, err = a.unknownPage(r.Context(), tenant, tool, string(cursor), limit)
	}
	if err != nil {
		problem.New(err, "", "").Write(w, 1)
		return
	}
	writeJSON(w, page)
}

// unknownPage returns the outcome_unknown records of tenant and tool ("": any) in key order from
// cursor, up to limit of them.
func (a *admin) unknownPage(ctx context.Context, tenant, tool, cursor string, limit int) (recordPage, error) {
	views, next, err := a.listUnknown(ctx, tenant, tool, cursor, limit)
	page := recordPage{Records: views}
	if next != "" {
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return page, err
}

// oldestUnknown returns the limit oldest outcome_unknown records of tenant and tool ("": any), by
// started_at, read from the store's index up to maxQueueScan of them.
func (a *admin) oldestUnknown(ctx context.Context, tenant, tool string, limit int) (recordPage, error) {
	const pageSize = 1000
	all := []recordView{}
	cursor := ""
	for read := pageSize; ; read += pageSize {
		views, next, err := a.listUnknown(ctx, tenant, tool, cursor, pageSize)
		if err != nil {
			return recordPage{}, err
		}
		all = append(all, views...)
		if next == "" || read >= maxQueueScan {
			page := recordPage{TotalCapped: next != ""}
			sort.SliceStable(all, func(i, j int) bool { return all[i].StartedAt.Before(all[j].StartedAt) })
			total := len(all)
			page.Records, page.Total = all[:min(limit, total)], &total
			return page, nil
		}
		cursor = next
	}
}

// listUnknown reads one page of the store's index of outcome_unknown records: the views of those
// of tenant and tool ("": any) among limit records from cursor, and the store's next cursor.
func (a *admin) listUnknown(ctx context.Context, tenant, tool, cursor string, limit int) ([]recordView, string, error) {
	var keys []string
	var stored []record.Payload
	var next string
	err := a.storeOp(ctx, func(ctx context.Context) (err error) {
		keys, stored, next, err = a.store.ListUnknown(ctx, record.ScopePrefix(tenant, tool), cursor, limit)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	views := []recordView{}
	for i, p := range stored {
		rec, err := record.Decode(record.StateUnknown, p)
		if err != nil {
			a.log.Error("listing records: an unreadable record", "key", keys[i], "err", err)
			continue
		}
		if tool == "" || rec.Tool == tool { // a tool without a tenant is filtered here
			views = append(views, recordView{Receipt: rec.Receipt, StartedAt: rec.StartedAt})
		}
	}
	return views, next, nil
}
