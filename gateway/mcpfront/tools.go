package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgateway/idemgateway/routes"
)

// Tool classes of kind: mcp routes (docs/contract.md §7 Class of a tool): a tool's class is, first
// found, the one its tools entry sets; with trust_annotations, the one its annotations in the
// server's tools/list give (readOnlyHint: read_only, else idempotentHint: idempotent, else
// non_idempotent); else the route's. The gateway reads tool lists with its own MCP client
// (discover_tools: at start, and when the list's ttlMs or tools_ttl lapses, one listing at a time)
// and from tools/list answers passing through; notifications/tools/list_changed drops what it
// knows. A listing that fails leaves the route's class: failing is safe, since the route's class
// of a tool it does not configure guards the call.

// Where a tool's class came from (agent.mcp.tool.class.source).
const (
	classFromConfig      = "config"
	classFromAnnotations = "annotations"
	classFromDefault     = "default"
)

// toolBook is what the gateway knows of the tools of each kind: mcp route's server.
type toolBook struct {
	now       func() time.Time // the gateway's clock (gateway.Gateway.Now): lists' ttl run on it
	log       *slog.Logger
	refreshes *prometheus.CounterVec // idemgateway_mcp_tool_list_refreshes_total
	transport http.RoundTripper      // the gateway's upstream transport, for discovery

	mu    sync.Mutex
	lists map[*routes.Route]*toolList // by kind: mcp route
}

// toolList is one route's server's tool list.
type toolList struct {
	classes    map[string]routes.Class // by tool name: the class its annotations give
	expires    time.Time               // zero: never listed, or invalidated
	refreshing bool                    // a discovery is under way
}

// class returns the class of tool on rt (a kind: mcp route), where it came from, and whether the
// tool is known: configured, or listed by the server.
func (b *toolBook) class(rt *routes.Route, tool string) (c routes.Class, source string, known bool) {
	t, configured := rt.MCP.Tools[tool]
	if configured && t.Tool.ClassSource == routes.ToolClassConfig {
		return t.Class, classFromConfig, true
	}
	listed := false
	// A route that neither discovers nor learns its server's tools never has a list: its guarded
	// calls, every one of which asks, take no lock of the book.
	if rt.Upstream.MCP.DiscoverTools || b.learns(rt) {
		c, listed = b.lookup(rt, tool)
		if listed && rt.Upstream.MCP.TrustAnnotations {
			return c, classFromAnnotations, true
		}
	}
	return rt.Class, classFromDefault, configured || listed
}

// lookup returns the class tool's annotations give on rt's server, and whether its list has the
// tool. A list that has lapsed is refreshed in the background (discover_tools) and used meanwhile.
func (b *toolBook) lookup(rt *routes.Route, tool string) (routes.Class, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.list(rt)
	if rt.Upstream.MCP.DiscoverTools && !l.refreshing && b.now().After(l.expires) {
		l.refreshing = true
		go b.discover(rt)
	}
	c, ok := l.classes[tool]
	return c, ok
}

// list returns rt's list, made empty on first use. b.mu is held.
func (b *toolBook) list(rt *routes.Route) *toolList {
	if b.lists == nil {
		b.lists = map[*routes.Route]*toolList{}
	}
	l := b.lists[rt]
	if l == nil {
		l = &toolList{}
		b.lists[rt] = l
	}
	return l
}

// reload forgets the lists of routes no longer in force, and starts the discovery of the tools of
// each kind: mcp route of rs with discover_tools.
func (b *toolBook) reload(rs []*routes.Route) {
	b.mu.Lock()
	b.lists = nil
	b.mu.Unlock()
	for _, rt := range rs {
		if rt.Kind == routes.KindMCP && rt.Upstream.MCP.DiscoverTools {
			b.lookup(rt, "")
		}
	}
}

// invalidate drops what the book knows of rt's tools (notifications/tools/list_changed): until
// they are listed again, rt's class applies.
func (b *toolBook) invalidate(rt *routes.Route) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.list(rt)
	l.classes, l.expires = nil, time.Time{}
}

// learns reports whether the book keeps what tools/list answers on rt say: when annotations may
// classify its tools, or when it refuses tools it does not know.
func (b *toolBook) learns(rt *routes.Route) bool {
	return rt.Upstream.MCP.TrustAnnotations || rt.MCP.UnknownTools == routes.RefuseUnknownTools
}

// learn reads msg, the response of a tools/list that passed through rt, and adds its tools to
// the book. Pages add to what is known; a response that holds no tool list (an error) is counted
// as an error and changes nothing.
func (b *toolBook) learn(rt *routes.Route, msg []byte) {
	var m struct {
		Result *mcp.ListToolsResult `json:"result"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Result == nil {
		b.refreshes.WithLabelValues(rt.Name, "error").Inc()
		return
	}
	b.refreshes.WithLabelValues(rt.Name, "learned").Inc()
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.list(rt)
	if l.classes == nil {
		l.classes = map[string]routes.Class{}
	}
	for _, t := range m.Result.Tools {
		l.classes[t.Name] = annotationClass(t.Annotations)
	}
}

// annotationClass is the class a tool's annotations give (docs/contract.md §7).
func annotationClass(a *mcp.ToolAnnotations) routes.Class {
	switch {
	case a == nil:
		return routes.NonIdempotent
	case a.ReadOnlyHint:
		return routes.ReadOnly
	case a.IdempotentHint:
		return routes.Idempotent
	}
	return routes.NonIdempotent
}

// discover lists rt's server's tools with the gateway's own MCP client (go-sdk), within the
// upstream's timeout, and puts the list in the book until its ttlMs (at least minToolsTTL), else
// tools_ttl, lapses. A
// failure keeps what the book knew, and the next lookup after a pause of a tenth of tools_ttl
// tries again.
func (b *toolBook) discover(rt *routes.Route) {
	up := rt.Upstream
	ctx, cancel := context.WithTimeout(context.Background(), up.Timeout)
	defer cancel()
	classes, ttl, err := listTools(ctx, rt, b.transport)
	result := "ok"
	if err != nil {
		result = "error"
		b.log.Warn("tool discovery failed: tools not configured get the route's class", "route", rt.Name, "err", err)
	}
	b.refreshes.WithLabelValues(rt.Name, result).Inc()
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.list(rt)
	l.refreshing = false
	if err != nil {
		l.expires = b.now().Add(up.MCP.ToolsTTL / 10)
		return
	}
	switch {
	case ttl <= 0:
		ttl = up.MCP.ToolsTTL
	case ttl < minToolsTTL: // a list stale at once would be listed again at every call
		ttl = minToolsTTL
	}
	l.classes, l.expires = classes, b.now().Add(ttl)
	b.warnUnlisted(rt, classes)
}

// warnUnlisted logs the tools rt's file configures that the server's tools/list, classes, does
// not hold: a typo in the file, or a tool the server renamed or dropped, whose settings then guard
// nothing (a call of the server's real name gets the route's class). Once per listing.
func (b *toolBook) warnUnlisted(rt *routes.Route, classes map[string]routes.Class) {
	var unlisted []string
	for name := range rt.MCP.Tools {
		if _, ok := classes[name]; !ok {
			unlisted = append(unlisted, name)
		}
	}
	if len(unlisted) > 0 {
		slices.Sort(unlisted)
		b.log.Warn("tools configured for the route are not in the server's tools/list: a typo, or a tool the server renamed or dropped; their settings guard nothing",
			"route", rt.Name, "tools", unlisted, "listed", len(classes))
	}
}

// minToolsTTL bounds from below how long a server's ttlMs lets the gateway use its tool list.
const minToolsTTL = time.Second

// listTools lists the tools of rt's server through transport, every page, and returns their
// annotation classes and the first page's ttlMs (0: none).
func listTools(ctx context.Context, rt *routes.Route, transport http.RoundTripper) (map[string]routes.Class, time.Duration, error) {
	up := rt.Upstream
	client := mcp.NewClient(&mcp.Implementation{Name: "idemgateway", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             up.URL.JoinPath(strings.TrimPrefix(rt.Path, up.StripPrefix)).String(),
		HTTPClient:           &http.Client{Transport: upstreamHeaders{transport, up}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		return nil, 0, err
	}
	defer cs.Close()
	classes := map[string]routes.Class{}
	var ttl time.Duration
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, 0, err
		}
		if page == 0 {
			ttl = time.Duration(res.TTLMs) * time.Millisecond
		}
		for _, t := range res.Tools {
			classes[t.Name] = annotationClass(t.Annotations)
		}
		if res.NextCursor == "" {
			return classes, ttl, nil
		}
		if page >= maxToolPages {
			return nil, 0, errors.New("the server's tool list has more than 100 pages")
		}
		params.Cursor = res.NextCursor
	}
}

// maxToolPages bounds the pages of one tool listing.
const maxToolPages = 100

// upstreamHeaders sets an upstream's configured headers (its credentials) on the requests of the
// gateway's own MCP client, as rewrite does on the requests it proxies.
type upstreamHeaders struct {
	next http.RoundTripper
	up   *routes.Upstream
}

func (t upstreamHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for name, values := range t.up.Headers.Header() {
		r.Header[name] = values
	}
	return t.next.RoundTrip(r)
}
