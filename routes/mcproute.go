package routes

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/idemgateway/idemgateway/canonical"
)

// mcp resolves what only the kind: mcp route rt has (raw is its file entry, p the prefix of its
// field names, set what its effect settings set), and its configured tools.
func (r *resolver) mcp(p string, raw *rawRoute, rt *Route, set effectSet) *MCP {
	m := &MCP{
		Refusal:      RefuseToolError,
		Cancel:       CancelFinish,
		UnknownTools: AllowUnknownTools,
		ReplayMeta:   raw.ReplayMeta == nil || *raw.ReplayMeta,
		Tools:        make(map[string]*Route, len(raw.Tools)),
		route:        rt,
		specs:        make(map[string]*toolSpec, len(raw.Tools)),
		cache:        make(map[toolClass]*Route, len(raw.Tools)),
	}
	oneOf(r, p+"refusal", raw.Refusal, &m.Refusal, RefuseToolError, RefuseJSONRPCError)
	oneOf(r, p+"cancel", raw.Cancel, &m.Cancel, CancelFinish, CancelForward)
	oneOf(r, p+"unknown_tools", raw.UnknownTools, &m.UnknownTools, AllowUnknownTools, RefuseUnknownTools)
	if m.UnknownTools == RefuseUnknownTools && len(raw.Tools) == 0 {
		r.addf(p+"unknown_tools", "refuse without tools refuses every tools/call; configure the tools, or allow")
	}

	m.base = &toolSpec{proto: rt, requiredSet: set.required, policySet: set.policy, toolError: OutcomeNotCommitted}
	for _, name := range slices.Sorted(maps.Keys(raw.Tools)) {
		tp := p + "tools." + name + "."
		if err := CheckToolName(name); err != nil {
			r.addf(p+"tools", "%q: %w", name, err)
			tp = fmt.Sprintf("%stools[%q].", p, name)
		}
		t := raw.Tools[name]
		spec := r.tool(tp, &t, m.base)
		m.specs[name] = spec
		c := spec.class
		if c == "" {
			c = rt.Class
		}
		m.Tools[name] = m.build(spec, name, c)
		m.cache[toolClass{name, c}] = m.Tools[name]
	}
	return m
}

// tool resolves the settings of one configured tool (p prefixes its field names) over those of
// the route, base.
func (r *resolver) tool(p string, raw *rawTool, base *toolSpec) *toolSpec {
	spec := &toolSpec{class: Class(raw.Class), toolError: OutcomeNotCommitted}
	switch spec.class {
	case "", Idempotent, NonIdempotent:
	case ReadOnly:
		raw.rawEffect = r.withoutStoreFields(p, "tool", raw.rawEffect)
		if raw.ToolError != nil {
			r.addf(p+"tool_error", "meaningless on a read_only tool, which never touches the store")
		}
		if raw.ErrorCodes != nil {
			r.addf(p+"error_codes", "meaningless on a read_only tool, which never touches the store")
		}
		raw.ToolError, raw.ErrorCodes = nil, nil
	default:
		r.addf(p+"class", "%q: must be read_only, idempotent or non_idempotent", raw.Class)
		spec.class = ""
	}

	proto := *base.proto
	set := r.effect(p, onTool, &raw.rawEffect, &proto, settingsOf(&proto))
	spec.proto = &proto
	spec.requiredSet = base.requiredSet || set.required
	spec.policySet = base.policySet || set.policy

	oneOf(r, p+"tool_error", raw.ToolError, &spec.toolError, OutcomeCommitted, OutcomeNotCommitted, OutcomeUnknown)
	if raw.ErrorCodes != nil {
		spec.errorCodes = r.codeLists(p+"error_codes", "error_codes", raw.ErrorCodes, nil)
	}
	return spec
}

// mcpOnly reports the fields of a kind: http route that only a kind: mcp route has.
func (r *resolver) mcpOnly(p string, raw *rawRoute) {
	only := func(name string, set bool) {
		if set {
			r.addf(p+name, "only a kind: mcp route has it")
		}
	}
	only("refusal", raw.Refusal != nil)
	only("cancel", raw.Cancel != nil)
	only("unknown_tools", raw.UnknownTools != nil)
	only("replay_meta", raw.ReplayMeta != nil)
	only("tools", raw.Tools != nil)
}

// settingsOf returns rt's values of the fields of the defaults block.
func settingsOf(rt *Route) settings {
	return settings{
		ttl: rt.TTL, lockLease: rt.LockLease, waitTimeout: rt.WaitTimeout,
		concurrency:  rt.Concurrency,
		tenantHeader: rt.TenantHeader, actorHeader: rt.ActorHeader, tenantRequired: rt.TenantRequired,
		maxBodyBytes: rt.MaxBodyBytes,
	}
}

// oneOf sets *dst to *raw when raw is set and one of values; otherwise, when set, it reports the
// values at field at.
func oneOf[T ~string](r *resolver, at string, raw *string, dst *T, values ...T) {
	if raw == nil {
		return
	}
	if slices.Contains(values, T(*raw)) {
		*dst = T(*raw)
		return
	}
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = string(v)
	}
	r.addf(at, "%q: must be %s or %s", *raw, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// metaKey matches a key of an MCP _meta object (MCP 2025-11-25, "General fields: _meta"): an
// optional prefix of dot-separated labels and "/", then a name that starts and ends with a letter
// or digit.
var metaKey = regexp.MustCompile(`^(?:[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*/)?[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// checkMetaKey reports whether name is a _meta key a file may name: well formed, and not under a
// prefix MCP reserves (a second label modelcontextprotocol or mcp).
func checkMetaKey(name string) error {
	if !metaKey.MatchString(name) {
		return errors.New(`not an MCP _meta key: want an optional prefix of dot-separated labels and "/" (io.github.idemgateway/), then letters, digits, '-', '_' and '.', starting and ending with a letter or digit`)
	}
	if prefix, _, ok := strings.Cut(name, "/"); ok {
		if labels := strings.Split(prefix, "."); len(labels) > 1 && (labels[1] == "modelcontextprotocol" || labels[1] == "mcp") {
			return errors.New("the prefix is reserved for MCP itself")
		}
	}
	return nil
}

// jsonrpcPointers refuses a fingerprint pointer that cannot match on a route whose body format is
// jsonrpc (a kind: mcp route or tool, or a kind: http route with format: jsonrpc): the format
// reads a request as {"method":…,"params":…}, so a pointer like /arguments/title (not
// /params/arguments/title) or /id would silently leave the member out of every fingerprint, and a
// key reused with other arguments would replay instead of conflicting.
func (r *resolver) jsonrpcPointers(at string, f canonical.Fields) {
	check := func(field string, p canonical.Pointer) {
		if first := firstToken(p); first != "params" && first != "method" {
			r.addf(at+"."+field, "%q: a JSON-RPC request's pointers start with /params (e.g. /params/arguments/title) or /method", p)
		}
	}
	for _, p := range f.Include {
		check("include", p)
	}
	for _, p := range f.Exclude {
		check("exclude", p)
	}
	for _, p := range f.Sets {
		check("sets", p)
	}
	for _, d := range f.Defaults {
		check("defaults", d.Pointer)
	}
	for _, n := range f.Normalize {
		check("normalize", n.Pointer)
	}
}

// finalPointer refuses a receipt pointer of a kind: mcp route or tool that cannot match: it
// addresses the final JSON-RPC message, {"jsonrpc":…,"id":…,"result":…} (or "error").
func (r *resolver) finalPointer(at string, p canonical.Pointer) {
	if first := firstToken(p); !p.IsZero() && first != "result" && first != "error" {
		r.addf(at, "%q: it addresses the final JSON-RPC message; start it with /result (e.g. /result/structuredContent/id) or /error", p)
	}
}

// firstToken is p's first reference token, unescaped ("" for the root).
func firstToken(p canonical.Pointer) string {
	tok, _, _ := strings.Cut(strings.TrimPrefix(p.String(), "/"), "/")
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
}
