package routes

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// validName matches route and upstream names.
var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// managedHeaders are the headers the proxy itself sets or strips; an upstream may not set them.
var managedHeaders = []string{
	"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Connection", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade",
}

// resolver resolves a rawFile into a Config and collects every problem on the way.
type resolver struct {
	file      string
	lookupEnv func(string) (string, bool)
	errs      Errors
}

// add records a problem at field.
func (r *resolver) add(field string, err error) {
	r.errs = append(r.errs, &FieldError{File: r.file, Field: field, Err: err})
}

// addf records a problem at field, formatted.
func (r *resolver) addf(field, format string, args ...any) {
	r.add(field, fmt.Errorf(format, args...))
}

// settings are the resolved fields of the defaults block.
type settings struct {
	ttl, lockLease, waitTimeout time.Duration
	unknownTTL                  time.Duration // 0: the longer of DefaultUnknownTTL and ttl
	concurrency                 Concurrency
	tenantHeader, actorHeader   string
	tenantRequired              bool
	maxBodyBytes                int64
}

// builtin are the settings that neither the defaults block nor a route sets; concurrency is left
// unset, for the route's kind to decide (route).
var builtin = settings{
	ttl:          DefaultTTL,
	lockLease:    DefaultLockLease,
	waitTimeout:  DefaultWaitTimeout,
	tenantHeader: DefaultTenantHeader,
	actorHeader:  DefaultActorHeader,
	maxBodyBytes: DefaultMaxBodyBytes,
}

// config resolves the whole file: upstreams, defaults, then routes, with the checks that span
// routes (unique names; one route per method and pattern).
func (r *resolver) config(raw *rawFile) *Config {
	cfg := &Config{Upstreams: make(map[string]*Upstream, len(raw.Upstreams))}
	for _, name := range slices.Sorted(maps.Keys(raw.Upstreams)) {
		cfg.Upstreams[name] = r.upstream(name, raw.Upstreams[name])
	}

	defaults := r.settings("defaults.", raw.Defaults, builtin)
	if raw.Clients != nil {
		cfg.Clients = r.clients(raw.Clients)
	}

	if len(raw.Routes) == 0 {
		r.addf("routes", "at least one route is required")
	}
	byName := make(map[string]int)
	byPattern := make(map[string]int)
	for i := range raw.Routes {
		rr := &raw.Routes[i]
		at := routeField(i, rr.Name)
		switch first, dup := byName[rr.Name]; {
		case rr.Name == "":
			r.addf(at+": name", "required")
		case !validName.MatchString(rr.Name):
			r.addf(at+": name", "must be letters, digits, '_', '.' or '-'")
		case len(rr.Name) > MaxNameBytes:
			r.addf(at+": name", "%d bytes, longer than %d (the tool name is part of every record's store key)", len(rr.Name), MaxNameBytes)
		case dup:
			r.addf(at+": name", "duplicate route name; first used by routes[%d]", first)
		default:
			byName[rr.Name] = i
		}
		route := r.route(i, rr, cfg.Upstreams, defaults)
		cfg.Routes = append(cfg.Routes, route)
		methods := route.Methods()
		if methods[0] == "" || route.Path == "" {
			continue // invalid, already reported
		}
		for _, m := range methods {
			pk := m + " " + patternKey(route.Path)
			if first, dup := byPattern[pk]; dup {
				r.addf(at+": path", "%s %s is already routed by %s", m, rr.Path, routeField(first, raw.Routes[first].Name))
				break
			}
			byPattern[pk] = i
		}
	}
	for _, rt := range cfg.Routes {
		if u := rt.Upstream; rt.Kind == KindMCP && u != nil && u.MCP == nil {
			u.MCP = &UpstreamMCP{ToolsTTL: DefaultToolsTTL, StreamIdleTimeout: DefaultStreamIdleTimeout}
		}
	}
	return cfg
}

// routeField names route i in field paths: `routes[2] "create_ticket"`, or `routes[2]` when the
// name is missing.
func routeField(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("routes[%d]", i)
	}
	return fmt.Sprintf("routes[%d] %q", i, name)
}

// upstream resolves and validates the upstream of the given name.
func (r *resolver) upstream(name string, raw rawUpstream) *Upstream {
	at := "upstreams." + name
	u := &Upstream{Name: name, Timeout: DefaultUpstreamTimeout, StripPrefix: raw.StripPrefix}
	if !validName.MatchString(name) {
		r.addf(at, "name %q: must be letters, digits, '_', '.' or '-'", name)
	} else if len(name) > MaxNameBytes {
		r.addf(at, "name: %d bytes, longer than %d", len(name), MaxNameBytes)
	}
	if raw.URL == "" {
		r.addf(at+".url", "required")
	} else if parsed, err := checkUpstreamURL(raw.URL); err != nil {
		r.addf(at+".url", "%q: %w", displayURL(raw.URL), err)
	} else {
		u.URL = parsed
	}
	if raw.Timeout != nil {
		u.Timeout = *raw.Timeout
		r.checkDuration(at+".timeout", u.Timeout)
	}
	if p := raw.StripPrefix; p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t")) {
		r.addf(at+".strip_prefix", `%q: must start with "/" and hold no white space, "?" or "#"`, p)
	}
	u.Headers = r.headers(at+".headers", raw.Headers)
	if m := raw.MCP; m != nil {
		u.MCP = &UpstreamMCP{
			DiscoverTools:     m.DiscoverTools,
			TrustAnnotations:  m.TrustAnnotations,
			ToolsTTL:          DefaultToolsTTL,
			StreamIdleTimeout: DefaultStreamIdleTimeout,
		}
		if m.ToolsTTL != nil {
			u.MCP.ToolsTTL = *m.ToolsTTL
			r.checkDuration(at+".mcp.tools_ttl", u.MCP.ToolsTTL)
		}
		if m.StreamIdleTimeout != nil {
			u.MCP.StreamIdleTimeout = *m.StreamIdleTimeout
			r.checkDuration(at+".mcp.stream_idle_timeout", u.MCP.StreamIdleTimeout)
		}
	}
	if h := raw.ForwardKey; h != "" {
		u.ForwardKey = http.CanonicalHeaderKey(h)
		if err := checkHeaderName(h); err != nil {
			r.add(at+".forward_key", err)
		}
	}
	return u
}

// checkUpstreamURL parses raw as scheme://host[:port][/base] with scheme http or https.
func checkUpstreamURL(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") { // "127.0.0.1:9000" parses as a scheme, or fails, confusingly
		return nil, errors.New("not an absolute URL: want http:// or https://, a host and an optional port and base path (such as http://127.0.0.1:9000)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which displayURL prints redacted
		}
		return nil, err
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("scheme must be http or https")
	case u.User != nil:
		return nil, errors.New("must not hold credentials; set them in headers")
	case u.Host == "":
		return nil, errors.New("must have a host")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, errors.New("must not have a query")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, errors.New("must not have a fragment")
	}
	return u, nil
}

// displayURL returns raw for messages, with whatever precedes an "@" in its authority (user
// info, which may be a credential) replaced by "[redacted]". It works on text, so that a URL that
// does not parse is redacted too.
func displayURL(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	authority := raw[start:]
	if end := strings.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		return raw[:start] + redacted + raw[start+at:]
	}
	return raw
}

// headers resolves an upstream's headers: valid names, not managed by the proxy, unique whatever
// their case, ${VAR} expanded, valid values. Messages name headers and variables, never values.
func (r *resolver) headers(at string, raw map[string]string) Secrets {
	if len(raw) == 0 {
		return nil
	}
	h := make(Secrets, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		field := at + "." + name
		canon := http.CanonicalHeaderKey(name)
		if err := checkHeaderName(name); err != nil {
			r.add(field, err)
			continue
		}
		if slices.Contains(managedHeaders, canon) {
			r.addf(field, "set by the proxy; an upstream may not set it")
			continue
		}
		if _, dup := h[canon]; dup {
			r.addf(field, "duplicate header (names are case-insensitive)")
			continue
		}
		value, errs := expandEnv(raw[name], r.lookupEnv)
		for _, err := range errs {
			r.add(field, err)
		}
		if len(errs) == 0 && !httpguts.ValidHeaderFieldValue(value) {
			r.addf(field, "value holds characters not allowed in a header (after ${VAR} expansion)")
		}
		h[canon] = []string{value}
	}
	return h
}

// checkHeaderName reports whether name is a valid header field name (an RFC 9110 token).
func checkHeaderName(name string) error {
	if name == "" {
		return errors.New("header name must not be empty")
	}
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("%q: invalid header name", name)
	}
	return nil
}

// checkDuration reports a duration that is not positive.
func (r *resolver) checkDuration(field string, d time.Duration) {
	if d <= 0 {
		r.addf(field, "%s: must be positive", d)
	}
}

// settings validates the fields of raw that are set, naming them after the prefix at ("defaults."
// or `routes[2] "create_ticket": `), and returns them over base.
func (r *resolver) settings(at string, raw rawSettings, base settings) settings {
	s := base
	duration := func(name string, p *time.Duration, dst *time.Duration) {
		if p != nil {
			*dst = *p
			r.checkDuration(at+name, *p)
		}
	}
	duration("ttl", raw.TTL, &s.ttl)
	if raw.TTL != nil && *raw.TTL > MaxTTL {
		r.addf(at+"ttl", "%s: must be at most %s (a year)", *raw.TTL, MaxTTL)
	}
	duration("unknown_ttl", raw.UnknownTTL, &s.unknownTTL)
	if raw.UnknownTTL != nil && *raw.UnknownTTL > MaxTTL {
		r.addf(at+"unknown_ttl", "%s: must be at most %s (a year)", *raw.UnknownTTL, MaxTTL)
	}
	if s.unknownTTL > 0 && s.unknownTTL < s.ttl && (raw.UnknownTTL != nil || raw.TTL != nil) {
		name := "unknown_ttl"
		if raw.UnknownTTL == nil {
			name = "ttl"
		}
		r.addf(at+name, "unknown_ttl %s is shorter than ttl %s: an unknown outcome must be kept at least as long as a receipt", s.unknownTTL, s.ttl)
	}
	duration("lock_lease", raw.LockLease, &s.lockLease)
	if raw.LockLease != nil && *raw.LockLease > 0 && *raw.LockLease < MinLockLease {
		r.addf(at+"lock_lease", "%s: must be at least %s (the lease is renewed every third of it)", *raw.LockLease, MinLockLease)
	}
	if raw.Concurrency != nil {
		s.concurrency = Concurrency(*raw.Concurrency)
		if s.concurrency != Reject && s.concurrency != Wait {
			r.addf(at+"concurrency", "%q: must be reject or wait", *raw.Concurrency)
		}
	}
	duration("wait_timeout", raw.WaitTimeout, &s.waitTimeout)
	header := func(name string, p *string, dst *string) {
		if p != nil {
			*dst = http.CanonicalHeaderKey(*p)
			if err := checkHeaderName(*p); err != nil {
				r.add(at+name, err)
			}
		}
	}
	header("tenant_header", raw.TenantHeader, &s.tenantHeader)
	if raw.TenantRequired != nil {
		s.tenantRequired = *raw.TenantRequired
	}
	header("actor_header", raw.ActorHeader, &s.actorHeader)
	if raw.MaxBodyBytes != nil {
		s.maxBodyBytes = *raw.MaxBodyBytes
		if s.maxBodyBytes <= 0 {
			r.addf(at+"max_body_bytes", "%d: must be positive", s.maxBodyBytes)
		}
	}
	return s
}
