package gateway

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// TestReadBodyDeclaredLengthHoldsNoMemory: a request that declares a large Content-Length but
// sends one byte makes readBody allocate at most preallocMax up front, not the declared length
// (many such idle requests would otherwise hold memory they never fill).
func TestReadBodyDeclaredLengthHoldsNoMemory(t *testing.T) {
	const limit = 8 << 20
	r := httptest.NewRequest(http.MethodPost, "/v1/tickets", strings.NewReader("x"))
	r.ContentLength = limit
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	body, err := readBody(httptest.NewRecorder(), r, limit)
	runtime.ReadMemStats(&after)
	if err != nil || string(body) != "x" {
		t.Fatalf("readBody = %q, %v", body, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 2*preallocMax {
		t.Errorf("a declared length of %d bytes with a 1-byte body allocated %d bytes", limit, n)
	}
}
