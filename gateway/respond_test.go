package gateway

import (
	"bytes"
	"testing"

	"github.com/idemgateway/idemgateway/record"
)

// TestWithRetryID: a plain JSON-RPC route's replay puts the retry's id where the commit found the
// stored response's (record.Response.IDSpan) without reading the rest of the body, which may be
// too large to read on every replay; a record without the span (an earlier build's) is read to
// find it; what is not a JSON-RPC request and response is replayed as stored.
func TestWithRetryID(t *testing.T) {
	const stored = `{"jsonrpc":"2.0","id":7,"result":{"id":"T-1"}}`
	request := `{"jsonrpc":"2.0","id":"retry","method":"create","params":{}}`
	for _, tt := range []struct {
		name, body, req string
		span            [2]int
		want            string
	}{
		{"span", stored, request, [2]int{22, 23}, `{"jsonrpc":"2.0","id":"retry","result":{"id":"T-1"}}`},
		{"no span: read", stored, request, [2]int{}, `{"jsonrpc":"2.0","id":"retry","result":{"id":"T-1"}}`},
		// Not read past the span: a body the span was kept for is not read again to check it.
		{"span, body not read", `{"jsonrpc":"2.0","id":7,"result":` + "\xff", request, [2]int{22, 23}, `{"jsonrpc":"2.0","id":"retry","result":` + "\xff"},
		{"no span, not a response", `{"id":7}`, request, [2]int{}, `{"id":7}`},
		{"span on no id: read", stored, request, [2]int{1, 10}, `{"jsonrpc":"2.0","id":"retry","result":{"id":"T-1"}}`},
		{"escaped name: read", `{"jsonrpc":"2.0","\u0069d":7,"result":{}}`, request, [2]int{27, 28}, `{"jsonrpc":"2.0","\u0069d":"retry","result":{}}`},
		{"span on no id, not a response", `{"jsonrpc":"2.0","id":7}`, request, [2]int{1, 10}, `{"jsonrpc":"2.0","id":7}`},
		{"not a request", stored, `{"jsonrpc":"2.0","method":"create"}`, [2]int{22, 23}, stored},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pieces := withRetryID(&record.Response{Body: []byte(tt.body), IDSpan: tt.span}, []byte(tt.req))
			if got := string(bytes.Join(pieces[:], nil)); got != tt.want {
				t.Errorf("withRetryID = %s, want %s", got, tt.want)
			}
		})
	}
}
