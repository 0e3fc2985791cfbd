package record

import "time"

// Receipt is what the gateway tells of one idempotency record (docs/contract.md §5), as served by the
// admin API. Times are UTC, RFC 3339.
type Receipt struct {
	IdempotencyKey string `json:"idempotency_key"`
	Tenant         string `json:"tenant"`
	Tool           string `json:"tool"`
	// CredentialScope is the hash of the caller's credential on routes with scope.credential;
	// the admin API addresses such a record with ?credential=<this>.
	CredentialScope   string     `json:"credential_scope,omitempty"`
	EffectFingerprint string     `json:"effect_fingerprint"`
	State             string     `json:"state"` // one of the State constants
	Actor             string     `json:"actor,omitempty"`
	RemoteSystem      string     `json:"remote_system"` // the upstream's name in the routes file
	RemoteID          string     `json:"remote_id,omitempty"`
	RemoteURL         string     `json:"remote_url,omitempty"`
	ResponseStatus    int        `json:"response_status,omitempty"`
	CommittedAt       *time.Time `json:"committed_at,omitempty"`
	ExpiresAt         time.Time  `json:"expires_at"`
	Executions        int        `json:"executions"` // how many times the upstream was called for this key
	// ResponseBodyKept is false when the committed response's body was larger than the gateway
	// keeps (gateway.Options.MaxReceiptBodyBytes) or arrived broken: replays then carry no body.
	ResponseBodyKept bool `json:"response_body_kept"`
	// Detail says why an outcome is unknown.
	Detail string `json:"detail,omitempty"`
	// MCPProtocolVersion is the MCP revision of the tools/call a receipt of a kind: mcp route
	// stores the result of (docs/mcp.md#what-the-agent-gets); "" on other routes.
	MCPProtocolVersion string `json:"mcp_protocol_version,omitempty"`
}
