package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

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
	view := recordView{Receipt: rec.Receipt, StartedAt: rec.StartedAt}
	if rec.State != record.StateCommitted {
		view.ResolveStatus = usualSuccess(a.pipeline.Route(rec.Tool))
	}
	writeJSON(w, view)
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

// maxBodyView bounds the stored body GET .../response shows (64 KiB).
const maxBodyView = 64 << 10

// responseView is the answer of GET /v1/records/{tenant}/{tool}/{key}/response: the response a
// committed record replays, its body cut to maxBodyView bytes and shown only when it is UTF-8 text.
type responseView struct {
	Stored        bool   `json:"stored"` // false: the record holds no response (not committed, or resolved by hand)
	Status        int    `json:"status,omitempty"`
	ContentType   string `json:"content_type,omitempty"`
	BodyBytes     int    `json:"body_bytes"`
	Body          string `json:"body,omitempty"`
	BodyTruncated bool   `json:"body_truncated,omitempty"`
	BodyBinary    bool   `json:"body_binary,omitempty"` // not UTF-8: not shown
}

func (a *admin) getResponse(w http.ResponseWriter, r *http.Request) {
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
	writeJSON(w, viewResponse(rec.Response))
}

// viewResponse returns the view of resp (nil: none stored).
func viewResponse(resp *record.Response) responseView {
	if resp == nil {
		return responseView{}
	}
	v := responseView{Stored: true, Status: resp.Status, ContentType: resp.Header.Get("Content-Type"), BodyBytes: len(resp.Body)}
	body := resp.Body
	if len(body) > maxBodyView {
		cut := maxBodyView // moved back to a rune's start, so that text is not made invalid by the cut
		for i := 0; i < utf8.UTFMax && !utf8.RuneStart(body[cut]); i++ {
			cut--
		}
		body, v.BodyTruncated = body[:cut], true
	}
	if utf8.Valid(body) {
		v.Body = string(body)
	} else {
		v.BodyBinary = true
	}
	return v
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
	ResponseStatus int    `json:"response_status"` // default: the route's usual success (usualSuccess)
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
	case res.ResponseStatus != 0 && res.ResponseStatus < 200 || res.ResponseStatus > 399:
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
