package mcpwire

import "strconv"

// Error is a JSON-RPC 2.0 error object (https://www.jsonrpc.org/specification#error_object).
type Error struct {
	// Code is the error code: one of the constants below or the upstream's.
	Code int
	// Message is a short description, written for whoever reads the error (often a model).
	Message string
	// Data is the optional error.data member; nil omits it.
	Data any
}

func (e *Error) Error() string {
	return "jsonrpc error " + strconv.Itoa(e.Code) + ": " + e.Message
}

// The error codes of JSON-RPC 2.0 and of the gateway (docs/contract.md §7).
const (
	ParseError       = -32700 // the body is not JSON
	InvalidRequest   = -32600 // JSON, but not a JSON-RPC message
	MethodNotFound   = -32601
	InvalidParams    = -32602
	HeaderMismatch   = -32020 // Mcp-Method / Mcp-Name missing or not matching the body
	Conflict         = -32010 // idempotency key reused with a different effect fingerprint
	InProgress       = -32011 // the key's first call is still in flight
	OutcomeUnknown   = -32012 // the key's first call has an unknown outcome
	KeyMissing       = -32013
	KeyInvalid       = -32014
	StoreUnavailable = -32015
)

func invalid(msg string) *Error { return &Error{Code: InvalidRequest, Message: msg} }

// RequestError is an error in a request whose id could be read: its answer carries that id, as
// JSON-RPC 2.0 §5 asks (null only when the id cannot be read), so that the client can match it to
// its call. Parse returns one for a tools/call whose params name no tool.
type RequestError struct {
	ID  []byte // the request's raw id
	Err *Error
}

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }
