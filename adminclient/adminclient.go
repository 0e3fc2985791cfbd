// Package adminclient is a small typed client of the gateway's records API on the admin listener
// (docs/contract.md §5): get a receipt, resolve an unknown outcome, delete a record, and list the records
// in one state. It speaks HTTP only; it never opens a store. The `idemgateway records` command is
// built on it.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemgateway/idemgateway/record"
)

// DefaultTimeout bounds each call of a Client built without Options.HTTPClient.
const DefaultTimeout = 30 * time.Second

// maxResponseBytes bounds a response body read by the client (a page of receipts or a problem).
const maxResponseBytes = 16 << 20

// Options tune a Client. The zero value is ready to use.
type Options struct {
	// Token is the admin bearer token (IDEMGATEWAY_ADMIN_TOKEN), sent as
	// `Authorization: Bearer <token>`. Default: empty, no Authorization header.
	Token string
	// HTTPClient makes the calls. Default: a client with a DefaultTimeout timeout.
	HTTPClient *http.Client
}

// Client calls one gateway's records API. Build it with New; it is safe for concurrent use.
// It keeps the token to itself: no method or error shows it.
type Client struct {
	base       string // scheme://host[:port][/prefix], without a trailing slash
	token      string
	hc         *http.Client
	credential string // the credential scope of the records addressed (WithCredential)
}

// WithCredential returns a copy of c whose Get, Resolve and Delete address the records of routes
// with scope.credential: scope is the receipt's credential_scope ("sha256:…").
func (c *Client) WithCredential(scope string) *Client {
	cc := *c
	cc.credential = scope
	return &cc
}

// recordPath is the admin path of a record, segments URL-escaped once (docs/contract.md §5), with the
// query of the client's credential scope and of extra.
func (c *Client) recordPath(tenant, tool, key, suffix string, extra url.Values) string {
	q := url.Values{}
	for k, v := range extra {
		q[k] = v
	}
	if c.credential != "" {
		q.Set("credential", c.credential)
	}
	p := "/v1/records/" + url.PathEscape(tenant) + "/" + url.PathEscape(tool) + "/" + url.PathEscape(key) + suffix
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// New returns a Client of the admin listener at baseURL (e.g. "http://127.0.0.1:9090"; a path
// prefix is kept, for an admin API behind a reverse proxy). baseURL must be an absolute http or
// https URL without query or fragment.
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	var uerr *url.Error
	switch {
	case errors.As(err, &uerr):
		return nil, fmt.Errorf("adminclient: admin URL: %w", uerr.Err) // uerr's text repeats the URL, password and all
	case err != nil:
		return nil, fmt.Errorf("adminclient: admin URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("adminclient: admin URL %q: scheme must be http or https", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("adminclient: admin URL %q: no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("adminclient: admin URL %q: no query or fragment allowed", u.Redacted())
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), token: opts.Token, hc: hc}, nil
}

// String names the admin URL and whether a token is set, never the token.
func (c *Client) String() string {
	tok := "none"
	if c.token != "" {
		tok = "set"
	}
	return fmt.Sprintf("adminclient.Client{admin: %s, token: %s}", c.base, tok)
}

// GoString is String, so that %#v does not show the token either.
func (c *Client) GoString() string { return c.String() }

// Problem is an RFC 9457 problem the admin API answered with, or, for a response that is not a
// problem document, its status with the status text as Title and the start of its body as Detail.
type Problem struct {
	Status int    `json:"status"`
	Type   string `json:"type"`   // e.g. "urn:idemgateway:problem:no-record"; empty when not a problem document
	Title  string `json:"title"`  // e.g. "No record"
	Detail string `json:"detail"` // the gateway's explanation
}

// Error returns "<status> <title>: <detail>", e.g. "404 No record: no record for that tenant, tool and key".
func (p *Problem) Error() string {
	if p.Detail == "" {
		return fmt.Sprintf("%d %s", p.Status, p.Title)
	}
	return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail)
}

// IsNotFound reports whether err is a 404 answer of the admin API (no such record).
func IsNotFound(err error) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status == http.StatusNotFound
}

// Outcomes of a Resolution.
const (
	OutcomeCommitted    = "committed"
	OutcomeNotCommitted = "not_committed"
)

// Resolution is how an operator settles a record whose outcome is unknown: the body of
// POST /v1/records/{tenant}/{tool}/{key}/resolve.
type Resolution struct {
	// Outcome is OutcomeCommitted (the upstream acted: keep a receipt, retries replay it) or
	// OutcomeNotCommitted (it did not: free the key, a retry executes again).
	Outcome string `json:"outcome"`
	// RemoteID and RemoteURL name what the upstream created, for a committed outcome. Optional.
	RemoteID  string `json:"remote_id,omitempty"`
	RemoteURL string `json:"remote_url,omitempty"`
	// ResponseStatus is the status replays answer for a committed outcome, 200 to 399.
	// Default (0): the route's first outcome.committed code, else 200.
	ResponseStatus int `json:"response_status,omitempty"`
}

// ListQuery selects records for List: GET /v1/records?state=&tenant=&tool=&limit=&cursor=.
type ListQuery struct {
	// State is the records' state. Default: record.StateUnknown ("outcome_unknown").
	State string
	// Tenant and Tool narrow the list to one tenant and one tool. Default: empty, all.
	Tenant, Tool string
	// Limit is the most records in one page. Default (0): the gateway's page size.
	Limit int
	// Cursor continues a listing where the page that returned it as NextCursor ended.
	// Default: empty, from the start.
	Cursor string
}

// Record is a record as the records API serves it: its receipt, when its call started and, unless
// it is committed, the status a resolve as committed stores by default.
type Record struct {
	record.Receipt
	StartedAt     time.Time `json:"started_at"`
	ResolveStatus int       `json:"resolve_status,omitempty"`
}

// Page is one page of List: {"records":[record...],"next_cursor":"..."}.
type Page struct {
	Records []Record `json:"records"`
	// NextCursor continues the listing (ListQuery.Cursor); empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Get returns the receipt of the record of (tenant, tool, key): GET /v1/records/{tenant}/{tool}/{key}.
// A missing record is a *Problem with status 404 (IsNotFound).
func (c *Client) Get(ctx context.Context, tenant, tool, key string) (*Record, error) {
	var rec Record
	if _, err := c.do(ctx, http.MethodGet, c.recordPath(tenant, tool, key, "", nil), nil, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Resolve settles the record of (tenant, tool, key) whose outcome is unknown (or whose executor's
// lease lapsed): POST .../resolve. It returns the committed receipt, or nil for
// OutcomeNotCommitted (the key is free). The gateway answers 409 (a *Problem) when the record is
// committed or in progress under a live lease, and 400 for a bad resolution.
func (c *Client) Resolve(ctx context.Context, tenant, tool, key string, res Resolution) (*Record, error) {
	body, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("adminclient: resolve: %w", err)
	}
	var rec Record
	status, err := c.do(ctx, http.MethodPost, c.recordPath(tenant, tool, key, "/resolve", nil), body, &rec)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &rec, nil
}

// Delete removes the record of (tenant, tool, key): DELETE /v1/records/{tenant}/{tool}/{key}. The
// gateway refuses (409, a *Problem) a record whose call is under way, unless force: deleting it
// lets a retry execute the call again. A missing record is a *Problem with status 404 (IsNotFound).
func (c *Client) Delete(ctx context.Context, tenant, tool, key string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	_, err := c.do(ctx, http.MethodDelete, c.recordPath(tenant, tool, key, "", q), nil, nil)
	return err
}

// List returns one page of the records in q.State, optionally of one tenant and tool. Follow
// Page.NextCursor in q.Cursor until it is empty to see them all.
func (c *Client) List(ctx context.Context, q ListQuery) (*Page, error) {
	v := url.Values{}
	v.Set("state", q.State)
	if q.State == "" {
		v.Set("state", record.StateUnknown)
	}
	for name, value := range map[string]string{"tenant": q.Tenant, "tool": q.Tool, "cursor": q.Cursor} {
		if value != "" {
			v.Set(name, value)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var page Page
	if _, err := c.do(ctx, http.MethodGet, "/v1/records?"+v.Encode(), nil, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// recordPath is /v1/records/{tenant}/{tool}/{key}, each segment escaped once (docs/contract.md §5).
// do sends one request to the admin API and decodes a 200 body into out (when not nil). It returns
// the status; an answer that is not 2xx is a *Problem.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, fmt.Errorf("adminclient: %w", err)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("adminclient: %w", err) // *url.Error: the URL without its password
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("adminclient: %s %s: reading the response: %w", method, req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, problemOf(resp, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("adminclient: %s %s: decoding the response: %w", method, req.URL.Path, err)
	}
	return resp.StatusCode, nil
}

// problemOf reads the problem document of a failed answer (RFC 9457), or makes one of its status
// and the start of its body.
func problemOf(resp *http.Response, data []byte) *Problem {
	p := &Problem{}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") && json.Unmarshal(data, p) == nil && p.Title != "" {
		p.Status = resp.StatusCode
		return p
	}
	p = &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
	if p.Title == "" {
		p.Title = "Error"
	}
	detail := strings.TrimSpace(string(data))
	if len(detail) > 200 {
		detail = detail[:200] + "…"
	}
	p.Detail = detail
	return p
}
