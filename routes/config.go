// Package routes loads and validates the routes file of idemgateway (docs/contract.md §2): the upstreams
// the gateway may call, the defaults, and the allow-list of routes with their idempotency rules.
//
// Decoding is strict (unknown fields are errors) and validation runs once, at load, reporting every
// problem with the file name and field path, e.g.
//
//	routes.yaml: routes[2] "create_ticket": fingerprint.body.include[1]: "/title~2": invalid JSON Pointer escape
package routes

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemgateway/idemgateway/canonical"
)

// Built-in defaults, used where neither a route nor the file's defaults block sets a field.
const (
	DefaultTTL             = 24 * time.Hour
	DefaultLockLease       = 10 * time.Second
	MinLockLease           = 100 * time.Millisecond // shorter leases lapse under ordinary scheduling delays
	MaxTTL                 = 365 * 24 * time.Hour   // a year; far longer ones overflow the stores' clocks
	DefaultUnknownTTL      = 30 * 24 * time.Hour    // an unknown outcome outlives its receipt's ttl: nobody may retry it into a second effect
	DefaultReconcileAfter  = time.Minute
	DefaultWaitTimeout     = 10 * time.Second
	DefaultUpstreamTimeout = 30 * time.Second
	DefaultTenantHeader    = "X-Tenant-Id" // X-Tenant-ID in canonical form, as a route's headers are: a lookup allocates nothing
	DefaultActorHeader     = "X-Actor-Id"
	DefaultKeyHeader       = "Idempotency-Key"
	DefaultKeyMeta         = "io.github.idemgateway/idempotencyKey" // kind: mcp routes: params._meta's member
	DefaultMaxBodyBytes    = 1 << 20                                // 1 MiB
	DefaultTenant          = "default"
	// DefaultToolsTTL and DefaultStreamIdleTimeout are UpstreamMCP's defaults.
	DefaultToolsTTL          = 5 * time.Minute
	DefaultStreamIdleTimeout = 5 * time.Minute
)

// Bounds of what a request or the file names: each part of a record's store key has one, so that
// no request can make a key the store refuses (docs/security.md#input-bounds).
const (
	// MaxTenantBytes bounds a tenant and an actor (CheckTenant).
	MaxTenantBytes = 128
	// MaxNameBytes bounds a route's name (the tool), an upstream's and a client's.
	MaxNameBytes = 128
)

// Kind is the protocol a route speaks.
type Kind string

// The route kinds. The zero Kind is KindHTTP: test for KindMCP.
const (
	KindHTTP Kind = "http" // one HTTP method and path, one tool (docs/contract.md §2)
	KindMCP  Kind = "mcp"  // an MCP Streamable HTTP endpoint of many tools (docs/contract.md §7)
)

// Class says whether a route has side effects (docs/contract.md §2).
type Class string

// The route classes. Only ReadOnly routes bypass the store.
const (
	ReadOnly      Class = "read_only"
	Idempotent    Class = "idempotent"
	NonIdempotent Class = "non_idempotent"
)

// Concurrency says what a duplicate gets while the first request with its key is in flight.
type Concurrency string

// The concurrency policies.
const (
	Reject Concurrency = "reject" // 409 request-in-progress with Retry-After
	Wait   Concurrency = "wait"   // wait up to WaitTimeout, then replay
)

// UnknownPolicy says what happens to a key whose outcome is unknown.
type UnknownPolicy string

// The unknown-outcome policies.
const (
	Block   UnknownPolicy = "block"   // keep the record outcome_unknown; retries get 409 outcome-unknown
	Release UnknownPolicy = "release" // free the key; a retry executes again
)

// Config is a loaded, validated routes file. Every field is resolved: defaults applied, pointers
// compiled, environment variables expanded.
type Config struct {
	// Upstreams by name, including any that no route uses.
	Upstreams map[string]*Upstream
	// Routes in file order; names are unique.
	Routes []*Route
	// Clients authenticate the callers of every route; nil without a clients section: the
	// tenant and actor are then what the request's headers say (docs/security.md#who-is-calling).
	Clients *Clients
}

// Upstream is one remote system the gateway may call.
type Upstream struct {
	// Name is the upstream's key in the file; it becomes remote_system in receipts.
	Name string
	// URL is scheme://host[:port][/base], scheme http or https, without user info, query or
	// fragment; the request path is appended to its path.
	URL *url.URL
	// Timeout bounds the whole upstream exchange. Default DefaultUpstreamTimeout.
	Timeout time.Duration
	// StripPrefix is removed from the incoming path before it is appended. Default "".
	StripPrefix string
	// Headers are set on every upstream request, ${VAR} already read from the environment, names
	// in canonical form; nil when none. They often hold credentials: never log them. Secrets and
	// Upstream print them redacted whatever the fmt verb.
	Headers Secrets
	// ForwardKey names the header on which the gateway sends its scoped key (tenant, tool and
	// idempotency key; ForwardedKey) to an upstream that de-duplicates by it, such as Stripe's
	// and Zendesk's Idempotency-Key. Then re-executing an unknown outcome is safe, and
	// non_idempotent routes release unknown outcomes by default. Default "": not sent.
	ForwardKey string
	// MCP holds the settings of an MCP server upstream (upstreams.*.mcp; docs/contract.md §7). An
	// upstream of a kind: mcp route always has one (the defaults when the file sets none); nil
	// otherwise. Only kind: mcp routes may use an upstream whose file entry sets it.
	MCP *UpstreamMCP
}

// UpstreamMCP is how the gateway treats an MCP server upstream (docs/contract.md §7).
type UpstreamMCP struct {
	// DiscoverTools: the gateway lists the server's tools itself, with its own MCP client.
	// Default false.
	DiscoverTools bool
	// TrustAnnotations: tools/list annotations (readOnlyHint, idempotentHint) may classify the
	// tools the routes file leaves open. Default false: the server's word is not taken.
	TrustAnnotations bool
	// ToolsTTL is how long a tool list is used when the server gives no ttlMs. Default
	// DefaultToolsTTL.
	ToolsTTL time.Duration
	// StreamIdleTimeout bounds the wait for the next bytes of a GET stream, and between the events
	// of an SSE answer. Default DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
}

// Scope widens the scope of a key. The zero Scope is (tenant, tool, key).
type Scope struct {
	// CredentialHeader, when set (scope.credential: true; default header Authorization), binds
	// keys to a hash of the caller's credential in that header, so that two users of one tenant
	// cannot replay each other's receipts. A credential that changes (a refreshed token) then
	// starts a new scope: a retry with the new credential executes again.
	CredentialHeader string
}

// Reconcile is a read-only lookup that settles an unknown outcome: when a request meets a record
// in outcome_unknown, the gateway asks the upstream whether the effect exists, then replays a
// receipt made from the answer (found) or executes the call again (not found).
type Reconcile struct {
	// Inject, when set, writes a value into the JSON body of every executed request (typically
	// the scoped key into an external-id field), so that the lookup can find the effect.
	Inject *Inject
	// Path is the lookup's path and query, appended to the upstream's URL, a template with the
	// fields of ParseTemplate, e.g. "/v1/tickets?external_id={key}"; values are URL-escaped.
	// The method is GET.
	Path *KeyTemplate
	// Found points into the lookup's JSON answer at what exists when the effect happened (e.g.
	// "/results/0"); absent or null means it did not.
	Found canonical.Pointer
	// RemoteID and RemoteURL point into the lookup's answer for the receipt; unset: none.
	RemoteID, RemoteURL canonical.Pointer
	// Status is the status replays of a receipt made by reconciliation answer. Default 200.
	Status int
	// After is how long after the unknown call started the lookup may run: the upstream may still
	// be working on the call after the gateway stopped waiting (or died), and a lookup before it
	// lands would miss the effect, then execute it again. Until then, requests get 409
	// request-in-progress with Retry-After. At least the upstream's timeout; default
	// DefaultReconcileAfter or twice the upstream's timeout, whichever is longer.
	After time.Duration
}

// Inject writes Value, a template with the fields of ParseTemplate, as a JSON string at
// BodyPointer of the request body (RFC 6901; the parent must be an object).
type Inject struct {
	BodyPointer canonical.Pointer
	Value       *KeyTemplate
}

// Secrets are headers whose values must never reach a log, an error or a receipt. Their String,
// GoString, Format and MarshalJSON redact the values; Header returns them for the proxy.
type Secrets http.Header

// Route is one allow-listed tool, or (Kind KindMCP) an MCP endpoint whose tools each get a route of
// their own (MCP.Tool; docs/contract.md §7). On a ReadOnly kind: http route the fields that only
// matter to the store (Key, Fingerprint, Receipt, OnUnknownOutcome, Outcome, TTL, LockLease,
// Concurrency, WaitTimeout) may not be set on the route in the file; they hold the defaults and
// the gateway ignores them. A kind: mcp route holds the settings its tools inherit.
type Route struct {
	// Name is the tool name; unique in the file. On a per-tool route of a kind: mcp route it is
	// "<route>/<tool>", the scope name in records, metrics, spans and the admin API.
	Name string
	// Kind: KindHTTP (default) or KindMCP.
	Kind Kind
	// MCP holds what only a kind: mcp route has; nil on kind: http routes. A per-tool route holds
	// the MCP of its route.
	MCP *MCP
	// Tool is set on the per-tool routes of a kind: mcp route (what MCP.Tool returns); nil on
	// every route of the file.
	Tool *Tool
	// Upstream is the remote system the route calls.
	Upstream *Upstream
	// Method is the HTTP method, upper case (the file may write it in any case). "" on a kind: mcp
	// route, which serves MCPMethods; "POST" on its per-tool routes.
	Method string
	// Path is a chi pattern; {name} captures a path parameter.
	Path string
	// OpaquePathParams name the path parameters ("*" for a trailing wildcard) whose decoded value
	// the gateway does not check: it may hold "/", "\", "?", "#", NUL or control bytes or
	// invalid UTF-8, or read as a dot-segment once its ";" parameters are removed ("..;x"). A
	// parameter not named here that does is refused (docs/security.md#input-bounds). Either way
	// the path is forwarded re-encoded, one segment per segment. Default nil: none.
	OpaquePathParams []string
	// Class says whether the route has side effects. On a kind: mcp route, the class of the tools
	// that neither the file nor trusted annotations classify; default NonIdempotent there.
	Class Class
	// Key says where the idempotency key comes from.
	Key Key
	// Fingerprint names the parts of the request that belong to its effect, compiled. Never nil:
	// without a fingerprint block it is the zero canonical.Fields (the whole body, no query
	// parameter, no header), which is also what ReadOnly routes get (and the gateway ignores); on
	// kind: mcp routes and their tools the format is always jsonrpc (the only one they accept).
	Fingerprint *canonical.Canonicalizer
	// Receipt says what the receipt records of the upstream's response.
	Receipt Receipt
	// Reconcile settles unknown outcomes by a lookup; nil: none (outcome_unknown records wait for
	// an operator or their expiry).
	Reconcile *Reconcile
	// OnUnknownOutcome: default Block for NonIdempotent routes (Release when the upstream has a
	// ForwardKey and the route no Reconcile), Release otherwise.
	OnUnknownOutcome UnknownPolicy
	// Outcome overrides the default status classes of docs/contract.md §4.
	Outcome Outcome
	// TTL is how long a committed receipt (and its key) is kept. Default DefaultTTL.
	TTL time.Duration
	// UnknownTTL is how long a record whose outcome is unknown is kept where unknown outcomes
	// block the key (OnUnknownOutcome Block): from its marking, and from its claim, since a claim
	// whose executor dies turns outcome_unknown without a marking. At least TTL. Default the
	// longer of DefaultUnknownTTL and TTL.
	UnknownTTL time.Duration
	// LockLease is the lease of the execution lock, renewed while the upstream call runs.
	// Default DefaultLockLease.
	LockLease time.Duration
	// Concurrency: default Reject on a kind: http route, Wait on a kind: mcp route and its tools.
	Concurrency Concurrency
	// WaitTimeout bounds the wait of Concurrency Wait. Default DefaultWaitTimeout.
	WaitTimeout time.Duration
	// TenantHeader names the header that carries the tenant; absent means DefaultTenant.
	// Canonical form (http.CanonicalHeaderKey). Default DefaultTenantHeader.
	TenantHeader string
	// TenantRequired refuses a request without the tenant header (400 missing-tenant) instead of
	// taking the tenant DefaultTenant. Default false.
	TenantRequired bool
	// Scope widens the scope of a key beyond (tenant, tool, key).
	Scope Scope
	// ActorHeader names the header that carries who asks; recorded, never part of the scope.
	// Canonical form. Default DefaultActorHeader.
	ActorHeader string
	// MaxBodyBytes bounds the request body; larger bodies get 413. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Upgrade names the protocol a client may switch the connection to on this route (RFC 9110
	// §7.8): "websocket" is the only one, and only a ReadOnly route may name it, since the
	// upgraded connection is a tunnel outside the idempotency contract. Default "": a request
	// with Connection: upgrade is refused, and an upstream's 101 is never relayed
	// (docs/security.md#upgrades-and-tunnels).
	Upgrade string
}

// UpgradeWebSocket is the one protocol a route may allow upgrades to (RFC 6455).
const UpgradeWebSocket = "websocket"

// Key says where a route's idempotency key comes from.
type Key struct {
	// Header names the header, in canonical form (http.CanonicalHeaderKey). Default
	// DefaultKeyHeader.
	Header string
	// Meta names the member of a tools/call's params._meta that carries the key (kind: mcp only),
	// e.g. "io.github.idemgateway/idempotencyKey". Default "": none.
	Meta string
	// Argument names the member of a tools/call's params.arguments that carries the key (kind:
	// mcp routes and their tools), for clients that can send nothing but a tool's arguments: the
	// gateway declares it in the tools' input schemas and removes it before the call goes on
	// (docs/mcp.md#keys-from-every-client). Default "": none.
	Argument string
	// Required: default true for NonIdempotent routes, false otherwise. A route with From or
	// Derive asks for a key only when neither yields one.
	Required bool
	// From says where the key is read when the header is absent (key.from: "body:/pointer",
	// "query:NAME" or "header:NAME"), for clients that cannot set headers. Zero: unset.
	From KeySource
	// Derive builds the key from the business operation when the request carries none
	// (key.derive), e.g. "{tenant}:{body:/incident_id}:create_ticket". Nil: unset.
	Derive *KeyTemplate
}

// Receipt holds JSON Pointers (RFC 6901) into the upstream's response body; empty means unset.
type Receipt struct {
	// RemoteID points at the id the remote system gave the effect (receipt field remote_id).
	RemoteID canonical.Pointer
	// RemoteURL points at the effect's URL (receipt field remote_url).
	RemoteURL canonical.Pointer
	// ReplayHeaders are response headers a replay repeats besides DefaultReplayHeaders (canonical
	// names). Headers that NeverReplayed names cannot be listed.
	ReplayHeaders []string
}

// DefaultReplayHeaders are the upstream response headers a replay repeats: an allow-list, so that
// a replay never hands one caller another's session, credentials or rate-limit state.
// Content-Encoding is on it because a stored body is kept as it came: the gateway's transport
// undoes the gzip it negotiated (and drops the header), so a Content-Encoding left is one the
// upstream sent unasked, which the replay must name for its body to be read (case C20).
var DefaultReplayHeaders = []string{
	"Cache-Control", "Content-Encoding", "Content-Language", "Content-Location", "Content-Type", "Etag",
	"Expires", "Last-Modified", "Link", "Location", "Vary",
}

// NeverReplayed reports whether a replay must never repeat the response header name (canonical
// form): Set-Cookie, authentication, Proxy-*, hop-by-hop, Date, Content-Length (recomputed),
// Retry-After and rate-limit headers, and the gateway's own Idempotency-* headers (docs/contract.md §4).
func NeverReplayed(name string) bool {
	switch name {
	case "Set-Cookie", "Set-Cookie2", "Authorization", "Www-Authenticate", "Authentication-Info",
		"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Date", "Content-Length", "Retry-After", "Ratelimit", "Ratelimit-Policy",
		"Idempotent-Replayed":
		return true
	}
	for _, prefix := range []string{"Proxy-", "Ratelimit-", "X-Ratelimit-", "X-Rate-Limit-", "Idempotency-"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// Outcome lists status codes (100 to 599) whose class a route overrides. A code may stand in one
// list only; nil lists override nothing. (A tool's error_codes lists JSON-RPC error codes in the
// same form: Tool.ErrorCodes.)
type Outcome struct {
	// Committed codes are stored as the receipt and replayed.
	Committed []int
	// NotCommitted codes release the key; a retry executes again.
	NotCommitted []int
	// Unknown codes follow the route's OnUnknownOutcome.
	Unknown []int
	// ErrorCodes moves JSON-RPC error codes between the rows of a JSON-RPC error on a route whose
	// fingerprint format is jsonrpc (outcome.error_codes), as a tool's error_codes do on kind: mcp
	// routes (docs/unknown-outcomes.md#answers-that-say-what-happened); nil: none.
	ErrorCodes *Outcome
	// Body rules class an answer by its body before the status rows, the first that matches
	// deciding (outcome.body); kind: http routes only.
	Body []BodyRule
}

// BodyRule is one of outcome.body: an answer whose JSON body's value at Pointer equals Equals
// (compared as canonical JSON), or, with Equals nil, is present (Present: a value other than
// null) or not (absent or null), is of class Class.
type BodyRule struct {
	Pointer canonical.Pointer
	Equals  []byte // canonical JSON text; nil: the rule tests presence
	Present bool
	Class   OutcomeName
}

// String is the rule as `idemgateway fingerprint --explain` and a record's detail name it, e.g.
// `/status equals "failed"` or `/error present`.
func (b BodyRule) String() string {
	switch {
	case b.Equals != nil:
		return b.Pointer.String() + " equals " + string(b.Equals)
	case b.Present:
		return b.Pointer.String() + " present"
	default:
		return b.Pointer.String() + " absent or null"
	}
}

// MaxBodyRules bounds a route's outcome.body: each is tried on every answer.
const MaxBodyRules = 32
