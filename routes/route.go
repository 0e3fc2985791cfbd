package routes

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/record"
)

// route resolves and validates route i. Its name, and the checks that span routes (unique
// names, unique method and path), are the caller's.
func (r *resolver) route(i int, raw *rawRoute, upstreams map[string]*Upstream, defaults settings) *Route {
	at := routeField(i, raw.Name)
	p := at + ": "
	field := func(name string) string { return p + name }
	rt := &Route{Name: raw.Name, Kind: Kind(raw.Kind), Class: Class(raw.Class)}

	switch rt.Kind {
	case "":
		rt.Kind = KindHTTP
	case KindHTTP, KindMCP:
	default:
		r.addf(field("kind"), "%q: must be http or mcp", raw.Kind)
	}
	mcp := rt.Kind == KindMCP

	if raw.Upstream == "" {
		r.addf(field("upstream"), "required")
	} else if u, ok := upstreams[raw.Upstream]; ok {
		rt.Upstream = u
		if u.MCP != nil && !mcp {
			r.addf(field("upstream"), "%q is an MCP server (upstreams.%s.mcp): only a kind: mcp route may use it", raw.Upstream, raw.Upstream)
		}
	} else {
		r.addf(field("upstream"), "%q: no such upstream", raw.Upstream)
	}

	switch {
	case mcp && raw.Method != "":
		r.addf(field("method"), "a kind: mcp route serves POST, GET and DELETE; leave method out")
	case mcp:
	case raw.Method == "":
		r.addf(field("method"), "required")
	case !httpguts.ValidHeaderFieldName(raw.Method): // a method is a token, like a header name
		r.addf(field("method"), "%q: invalid HTTP method", raw.Method)
	default:
		rt.Method = strings.ToUpper(raw.Method)
	}

	if raw.Path == "" {
		r.addf(field("path"), "required")
	} else if err := checkPattern(raw.Path); err != nil {
		r.addf(field("path"), "%q: %w", raw.Path, err)
	} else {
		rt.Path = raw.Path
	}
	if len(raw.OpaquePathParams) > 0 {
		rt.OpaquePathParams = r.opaquePathParams(field("opaque_path_params"), raw.OpaquePathParams, rt.Path)
	}

	if mcp && rt.Class == "" {
		rt.Class = NonIdempotent // the class of the tools nothing else classifies
	}
	switch rt.Class {
	case ReadOnly:
		if !mcp { // a read_only kind: mcp route still guards its configured tools, with these settings
			c := *raw
			c.rawEffect = r.withoutStoreFields(p, "route", raw.rawEffect)
			raw = &c
		}
	case Idempotent, NonIdempotent:
	case "":
		r.addf(field("class"), "required: read_only, idempotent or non_idempotent")
	default:
		r.addf(field("class"), "%q: must be read_only, idempotent or non_idempotent", raw.Class)
	}

	level := onHTTPRoute
	if mcp {
		level = onMCPRoute
	}
	rt.Key.Header = DefaultKeyHeader
	if mcp {
		rt.Key.Meta = DefaultKeyMeta
	}
	set := r.effect(p, level, &raw.rawEffect, rt, defaults)
	if rc := raw.Reconcile; rc != nil && !mcp {
		rt.Reconcile = r.reconcile(field("reconcile"), rc, rt.Upstream)
	}
	if !set.required {
		rt.Key.Required = rt.Class == NonIdempotent
	}
	if rt.Concurrency == "" { // neither the route nor the defaults block sets it
		// An MCP client that retries on its own (the AI SDK's maxRetries) does it while the
		// first call runs: waiting gives it the answer where a refusal gives it nothing to use.
		rt.Concurrency = map[bool]Concurrency{false: Reject, true: Wait}[mcp]
	}
	if !set.policy {
		rt.OnUnknownOutcome = defaultUnknownPolicy(rt.Class, rt.Upstream, rt.Reconcile)
	} else if rt.OnUnknownOutcome == Release && rt.Reconcile != nil {
		r.addf(field("on_unknown_outcome"), "release frees unknown outcomes at once, so reconcile would never run; use block")
	}

	switch {
	case raw.Upgrade == "":
	case mcp:
		r.addf(field("upgrade"), "a kind: mcp route never upgrades")
	case raw.Upgrade != UpgradeWebSocket:
		r.addf(field("upgrade"), "%q: unknown protocol (want %s)", raw.Upgrade, UpgradeWebSocket)
	case rt.Class != ReadOnly:
		r.addf(field("upgrade"), "only a read_only route may upgrade: the upgraded connection is a tunnel the gateway neither reads nor makes idempotent")
	default:
		rt.Upgrade = raw.Upgrade
	}

	if mcp {
		rt.MCP = r.mcp(p, raw, rt, set)
	} else {
		r.mcpOnly(p, raw)
	}
	return rt
}

// defaultUnknownPolicy is a route's on_unknown_outcome when the file sets none: Block for a
// NonIdempotent route, unless its upstream de-duplicates by a ForwardKey and no reconcile settles
// unknown outcomes; Release otherwise (docs/unknown-outcomes.md).
func defaultUnknownPolicy(c Class, up *Upstream, rc *Reconcile) UnknownPolicy {
	if c == NonIdempotent && (up == nil || up.ForwardKey == "" || rc != nil) {
		return Block
	}
	return Release
}

// effectLevel says where effect settings are written.
type effectLevel int

const (
	onHTTPRoute effectLevel = iota // a kind: http route
	onMCPRoute                     // a kind: mcp route
	onTool                         // tools.<name> of a kind: mcp route
)

// effectSet says which of the settings whose default depends on the class the file sets.
type effectSet struct {
	required bool // key.required
	policy   bool // on_unknown_outcome
}

// effect applies the effect settings that raw sets (settings, key, fingerprint, receipt, scope,
// on_unknown_outcome, outcome) over rt's, whose settings are base, naming fields after the prefix
// p. A block the file sets replaces rt's whole, except key, whose fields count one by one. The
// class's defaults are the caller's: effect says which of them the file sets. Reconcile is the
// caller's too; effect refuses it on kind: mcp routes and tools.
func (r *resolver) effect(p string, level effectLevel, raw *rawEffect, rt *Route, base settings) effectSet {
	field := func(name string) string { return p + name }
	var set effectSet

	s := r.settings(p, raw.rawSettings, base)
	rt.TTL, rt.LockLease, rt.WaitTimeout = s.ttl, s.lockLease, s.waitTimeout
	rt.UnknownTTL = s.unknownTTL
	if rt.UnknownTTL == 0 {
		rt.UnknownTTL = max(DefaultUnknownTTL, s.ttl)
	}
	rt.Concurrency = s.concurrency
	rt.TenantHeader, rt.ActorHeader, rt.TenantRequired = s.tenantHeader, s.actorHeader, s.tenantRequired
	rt.MaxBodyBytes = s.maxBodyBytes

	if k := raw.Key; k != nil {
		r.key(p, level, k, &rt.Key)
		set.required = k.Required != nil
	}

	if raw.Fingerprint != nil || rt.Fingerprint == nil {
		if fields, ok := r.fingerprint(field("fingerprint"), raw.Fingerprint); ok {
			if level != onHTTPRoute {
				switch fields.Format {
				case "":
					fields.Format = canonical.FormatJSONRPC
				case canonical.FormatJSONRPC:
				default:
					r.addf(field("fingerprint.body.format"), "%q: a kind: mcp route fingerprints JSON-RPC requests; want jsonrpc, or leave it out", fields.Format)
				}
			}
			if level != onHTTPRoute || fields.Format == canonical.FormatJSONRPC {
				r.jsonrpcPointers(field("fingerprint.body"), fields)
			}
			fp, err := canonical.Compile(fields)
			if err != nil {
				r.add(field("fingerprint"), err)
			}
			rt.Fingerprint = fp
		}
	}

	if rc := raw.Receipt; rc != nil {
		rt.Receipt = Receipt{
			RemoteID:  r.receiptPointer(field("receipt.remote_id"), rc.RemoteID),
			RemoteURL: r.receiptPointer(field("receipt.remote_url"), rc.RemoteURL),
		}
		if level != onHTTPRoute {
			r.finalPointer(field("receipt.remote_id"), rt.Receipt.RemoteID)
			r.finalPointer(field("receipt.remote_url"), rt.Receipt.RemoteURL)
		}
		for j, h := range rc.ReplayHeaders {
			at := fmt.Sprintf("%s[%d]", field("receipt.replay_headers"), j)
			name := http.CanonicalHeaderKey(h)
			switch {
			case checkHeaderName(h) != nil:
				r.add(at, checkHeaderName(h))
			case NeverReplayed(name):
				r.addf(at, "%q: never replayed (it would hand a caller another's session, credentials or rate limits)", h)
			default:
				rt.Receipt.ReplayHeaders = append(rt.Receipt.ReplayHeaders, name)
			}
		}
	}

	if sc := raw.Scope; sc != nil {
		rt.Scope = Scope{}
		if sc.Credential {
			rt.Scope.CredentialHeader = "Authorization"
			if h := sc.CredentialHeader; h != "" {
				rt.Scope.CredentialHeader = http.CanonicalHeaderKey(h)
				if err := checkHeaderName(h); err != nil {
					r.add(field("scope.credential_header"), err)
				}
			}
		} else if sc.CredentialHeader != "" {
			r.addf(field("scope.credential_header"), "set without credential: true")
		}
	}

	if raw.Reconcile != nil && level != onHTTPRoute {
		r.addf(field("reconcile"), "not served on kind: mcp routes: its lookup is a plain HTTP GET, and the upstream is an MCP server")
	}

	if pol := raw.OnUnknownOutcome; pol != nil {
		set.policy = true
		rt.OnUnknownOutcome = UnknownPolicy(*pol)
		if rt.OnUnknownOutcome != Block && rt.OnUnknownOutcome != Release {
			r.addf(field("on_unknown_outcome"), "%q: must be block or release", *pol)
		}
	}

	if o := raw.Outcome; o != nil {
		rt.Outcome = r.outcome(field("outcome"), o)
		if o.ErrorCodes != nil {
			switch {
			case level != onHTTPRoute:
				r.addf(field("outcome.error_codes"), "only on a kind: http route; a tool of a kind: mcp route has error_codes of its own")
			case rt.Fingerprint.Format() != canonical.FormatJSONRPC:
				r.addf(field("outcome.error_codes"), "only on a route whose fingerprint.body.format is jsonrpc: it classes JSON-RPC errors")
			default:
				codes := r.codeLists(field("outcome.error_codes"), "outcome.error_codes", o.ErrorCodes, nil)
				rt.Outcome.ErrorCodes = &codes
			}
		}
		if len(o.Body) > 0 {
			if level != onHTTPRoute {
				r.addf(field("outcome.body"), "only on a kind: http route; a tools/call is classed by its JSON-RPC answer")
			} else {
				rt.Outcome.Body = r.bodyRules(field("outcome.body"), o.Body)
			}
		}
	}
	return set
}

// bodyRules validates outcome.body: at most MaxBodyRules rules, each a JSON Pointer, one of equals
// (a YAML value, kept as canonical JSON) and present, and a class.
func (r *resolver) bodyRules(at string, raw []rawBodyRule) []BodyRule {
	if len(raw) > MaxBodyRules {
		r.addf(at, "%d rules: at most %d", len(raw), MaxBodyRules)
		return nil
	}
	rules := make([]BodyRule, 0, len(raw))
	for i, rr := range raw {
		p := fmt.Sprintf("%s[%d].", at, i)
		var rule BodyRule
		if rr.Pointer == "" {
			r.addf(p+"pointer", "required: the JSON Pointer of the member the rule reads")
		} else if ptr, err := canonical.ParsePointer(rr.Pointer); err != nil {
			r.add(p+"pointer", err)
		} else {
			rule.Pointer = ptr
		}
		switch equals := rr.Equals.Kind != 0; {
		case equals && rr.Present != nil, !equals && rr.Present == nil:
			r.addf(p+"equals", "set one of equals and present")
		case equals:
			rule.Equals = r.jsonValue(p+"equals", &rr.Equals)
		default:
			rule.Present = *rr.Present
		}
		if rr.Class == "" {
			r.addf(p+"class", "required: committed, not_committed or unknown")
		} else {
			oneOf(r, p+"class", &rr.Class, &rule.Class, OutcomeCommitted, OutcomeNotCommitted, OutcomeUnknown)
		}
		rules = append(rules, rule)
	}
	return rules
}

// jsonValue returns the canonical JSON text of a YAML value: a string, number, boolean, null, or
// a sequence or mapping of them.
func (r *resolver) jsonValue(at string, n *yaml.Node) []byte {
	var v any
	if err := n.Decode(&v); err != nil {
		r.add(at, err)
		return nil
	}
	b, err := json.Marshal(v)
	if err == nil {
		b, err = canonical.Canonicalize(b)
	}
	if err != nil {
		r.addf(at, "not a JSON value: %v", err)
		return nil
	}
	return b
}

// key applies a key block to k. Where a kind: mcp route reads the key decides where each field
// may stand: the header and the _meta member on the route (one for every tool), from and derive
// per tool (their pointers address one tool's arguments).
func (r *resolver) key(p string, level effectLevel, raw *rawKey, k *Key) {
	field := func(name string) string { return p + name }
	if raw.Header != nil {
		if level == onTool {
			r.addf(field("key.header"), "set it on the route: one header carries the key of every tool")
		} else {
			k.Header = http.CanonicalHeaderKey(*raw.Header)
			if err := checkHeaderName(*raw.Header); err != nil {
				r.add(field("key.header"), err)
			}
		}
	}
	if raw.Meta != nil {
		switch level {
		case onHTTPRoute:
			r.addf(field("key.meta"), "only a kind: mcp route reads params._meta")
		case onTool:
			r.addf(field("key.meta"), "set it on the route: one _meta member carries the key of every tool")
		default:
			k.Meta = *raw.Meta
			if k.Meta == "" { // meta: "" reads no key from _meta
				break
			}
			if err := checkMetaKey(*raw.Meta); err != nil {
				r.addf(field("key.meta"), "%q: %w", *raw.Meta, err)
			}
		}
	}
	if raw.Argument != nil {
		k.Argument = *raw.Argument
		switch {
		case level == onHTTPRoute:
			r.addf(field("key.argument"), "only a kind: mcp route reads a tool's arguments")
		case k.Argument == "": // argument: "" on a tool reads no key from its arguments
		case record.CheckKey(k.Argument) != nil:
			r.addf(field("key.argument"), "%q: %v: an argument's name is 1 to %d bytes of printable ASCII", k.Argument, record.CheckKey(k.Argument), record.MaxKeyBytes)
		}
	}
	if raw.Required != nil {
		k.Required = *raw.Required
	}
	if raw.From != nil {
		if level == onMCPRoute {
			r.addf(field("key.from"), "set it per tool (tools.<name>.key.from): its pointer addresses one tool's arguments")
		} else {
			ks, err := ParseKeySource(*raw.From)
			if err != nil {
				r.add(field("key.from"), err)
			}
			k.From = ks
		}
	}
	if raw.Derive != nil {
		if level == onMCPRoute {
			r.addf(field("key.derive"), "set it per tool (tools.<name>.key.derive): its fields address one tool's arguments")
		} else {
			kt, err := ParseKeyTemplate(*raw.Derive)
			if err != nil {
				r.add(field("key.derive"), err)
			} else if level == onTool {
				kt.keepDigests()
			}
			k.Derive = kt
		}
	}
}

// opaquePathParams checks that each name is a parameter of the pattern path ("*" its trailing
// wildcard), once. path is "" when it is invalid, already reported: the names are then not
// checked against it.
func (r *resolver) opaquePathParams(at string, names []string, path string) []string {
	var params []string
	if path != "" {
		params = paramNames(path)
	}
	for j, name := range names {
		fj := fmt.Sprintf("%s[%d]", at, j)
		switch first := slices.Index(names[:j], name); {
		case first >= 0:
			r.addf(fj, "%q: duplicate of opaque_path_params[%d]", name, first)
		case path != "" && !slices.Contains(params, name):
			r.addf(fj, "%q: no such parameter in path %q", name, path)
		}
	}
	return names
}

// withoutStoreFields reports every field set on a read_only route (what names it: "route" or
// "tool"; p prefixes the field names) that only matters to the store, and returns raw without
// them. A read_only route is proxied without touching the store, so these fields would do
// nothing; setting one is most likely a misclassified route.
func (r *resolver) withoutStoreFields(p, what string, raw rawEffect) rawEffect {
	c := raw
	drop := func(name string, set bool) {
		if set {
			r.addf(p+name, "meaningless on a read_only %s, which never touches the store", what)
		}
	}
	drop("key", c.Key != nil)
	drop("fingerprint", c.Fingerprint != nil)
	drop("receipt", c.Receipt != nil)
	drop("on_unknown_outcome", c.OnUnknownOutcome != nil)
	drop("outcome", c.Outcome != nil)
	drop("reconcile", c.Reconcile != nil)
	drop("scope", c.Scope != nil)
	drop("ttl", c.TTL != nil)
	drop("unknown_ttl", c.UnknownTTL != nil)
	drop("lock_lease", c.LockLease != nil)
	drop("concurrency", c.Concurrency != nil)
	drop("wait_timeout", c.WaitTimeout != nil)
	c.Key, c.Fingerprint, c.Receipt, c.OnUnknownOutcome, c.Outcome, c.Reconcile, c.Scope = nil, nil, nil, nil, nil, nil, nil
	c.TTL, c.UnknownTTL, c.LockLease, c.Concurrency, c.WaitTimeout = nil, nil, nil, nil, nil
	return c
}

// fingerprint validates a fingerprint block and returns it as canonical.Fields; ok is false when
// it holds a problem, already reported. A nil block is the zero Fields: the whole body, no query
// parameter, no header. The body rules (include, exclude, sets, defaults, normalize, format) are
// checked here with their field paths, so that canonical.Compile finds nothing left to refuse.
func (r *resolver) fingerprint(at string, raw *rawFingerprint) (f canonical.Fields, ok bool) {
	n := len(r.errs)
	if raw == nil {
		return f, true
	}
	if b := raw.Body; b != nil {
		f.Include = r.pointers(at+".body.", "include", b.Include)
		f.Exclude = r.pointers(at+".body.", "exclude", b.Exclude)
		f.Sets = r.pointers(at+".body.", "sets", b.Sets)
		f.Defaults = r.defaults(at+".body.defaults", b.Defaults)
		f.Normalize = r.normalizations(at+".body.normalize", b.Normalize)
		if err := canonical.CheckFormat(b.Format); err != nil {
			r.add(at+".body.format", err)
		}
		f.Format = b.Format
	}
	seen := make(map[string]int)
	for j, q := range raw.Query {
		fj := fmt.Sprintf("%s.query[%d]", at, j)
		if q == "" {
			r.addf(fj, "query parameter name must not be empty")
		} else if first, dup := seen[q]; dup {
			r.addf(fj, "%q: duplicate of query[%d]", q, first)
		} else {
			seen[q] = j
		}
	}
	f.Query = raw.Query
	clear(seen)
	for j, h := range raw.Headers {
		fj := fmt.Sprintf("%s.headers[%d]", at, j)
		if err := checkHeaderName(h); err != nil {
			r.add(fj, err)
		} else if first, dup := seen[http.CanonicalHeaderKey(h)]; dup {
			r.addf(fj, "%q: duplicate of headers[%d] (names are case-insensitive)", h, first)
		} else {
			seen[http.CanonicalHeaderKey(h)] = j
		}
	}
	f.Headers = raw.Headers
	return f, len(r.errs) == n
}

// pointers parses a list of JSON Pointers (RFC 6901), reporting each bad or repeated one at its
// index.
// at is the path up to list, the list's name.
func (r *resolver) pointers(at, list string, raw []string) []canonical.Pointer {
	if raw == nil {
		return nil
	}
	ps := make([]canonical.Pointer, len(raw))
	for j, s := range raw {
		fj := fmt.Sprintf("%s%s[%d]", at, list, j)
		p, err := canonical.ParsePointer(s)
		if err != nil {
			r.add(fj, err)
		} else if first := slices.Index(ps[:j], p); first >= 0 {
			r.addf(fj, "%q: duplicate of %s[%d]", s, list, first)
		}
		ps[j] = p
	}
	return ps
}

// receiptPointer parses a receipt's JSON Pointer (RFC 6901); "" is the zero Pointer: unset.
func (r *resolver) receiptPointer(at, s string) canonical.Pointer {
	if s == "" {
		return canonical.Pointer{}
	}
	p, err := canonical.ParsePointer(s)
	if err != nil {
		r.add(at, err)
	}
	return p
}

// outcome validates the status lists of an outcome block: codes from 200 to 599, each in one list
// once. A 1xx is never a final answer: the gateway treats it as a protocol error (unknown outcome),
// whatever the lists say.
func (r *resolver) outcome(at string, raw *rawOutcome) Outcome {
	return r.codeLists(at, "outcome", raw, func(code int) string {
		switch {
		case code >= 100 && code < 200:
			return "a 1xx is never a final answer; the gateway counts it an unknown outcome, whatever the lists say"
		case code < 200 || code > 599:
			return "must be a status code from 200 to 599"
		}
		return ""
	})
}

// codeLists validates the committed, not_committed and unknown lists of block (outcome or
// error_codes) at at: each code in one list once, and none that problem (nil: none) refuses.
func (r *resolver) codeLists(at, block string, raw *rawOutcome, problem func(code int) string) Outcome {
	if block != "outcome" && (raw.ErrorCodes != nil || raw.Body != nil) {
		r.addf(at, "holds lists of codes only (committed, not_committed, unknown)")
	}
	seen := make(map[int]string)
	check := func(name string, codes []int) []int {
		for j, code := range codes {
			fj := fmt.Sprintf("%s.%s[%d]", at, name, j)
			if problem != nil {
				if msg := problem(code); msg != "" {
					r.addf(fj, "%d: %s", code, msg)
					continue
				}
			}
			switch prev, dup := seen[code]; {
			case dup && prev == name:
				r.addf(fj, "%d: listed twice", code)
			case dup:
				r.addf(fj, "%d: also in %s.%s; a code may stand in one list only", code, block, prev)
			default:
				seen[code] = name
			}
		}
		return codes
	}
	return Outcome{
		Committed:    check("committed", raw.Committed),
		NotCommitted: check("not_committed", raw.NotCommitted),
		Unknown:      check("unknown", raw.Unknown),
	}
}

// reconcile validates a reconcile block.
func (r *resolver) reconcile(at string, raw *rawReconcile, up *Upstream) *Reconcile {
	rc := &Reconcile{Status: raw.Status, After: DefaultReconcileAfter}
	timeout := DefaultUpstreamTimeout
	if up != nil {
		timeout = up.Timeout
	}
	rc.After = max(rc.After, 2*timeout)
	if in := raw.Inject; in != nil {
		rc.Inject = &Inject{}
		if p, err := canonical.ParsePointer(in.BodyPointer); err != nil {
			r.add(at+".inject.body_pointer", err)
		} else {
			rc.Inject.BodyPointer = p
		}
		if t, err := ParseTemplate(in.Value); err != nil {
			r.add(at+".inject.value", err)
		} else {
			rc.Inject.Value = t
		}
	}
	switch {
	case raw.Path == "":
		r.addf(at+".path", "required")
	case !strings.HasPrefix(raw.Path, "/"):
		r.addf(at+".path", "%q: must start with \"/\"", raw.Path)
	default:
		t, err := ParseTemplate(raw.Path)
		if err != nil {
			r.add(at+".path", err)
		}
		rc.Path = t
	}
	if raw.Found == "" {
		r.addf(at+".found", "required: a JSON Pointer to what exists when the effect happened")
	} else {
		rc.Found = r.receiptPointer(at+".found", raw.Found)
	}
	rc.RemoteID = r.receiptPointer(at+".remote_id", raw.RemoteID)
	rc.RemoteURL = r.receiptPointer(at+".remote_url", raw.RemoteURL)
	if raw.After != nil {
		rc.After = *raw.After
		if rc.After < timeout {
			r.addf(at+".after", "%s: must be at least the upstream's timeout (%s): the lookup must not run while the call may be under way", rc.After, timeout)
		}
	}
	switch {
	case rc.Status == 0:
		rc.Status = http.StatusOK
	case rc.Status < 200 || rc.Status > 299:
		r.addf(at+".status", "%d: a found effect replays a 2xx status", rc.Status)
	}
	return rc
}
