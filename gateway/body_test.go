package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/internal/allocs"
)

// TestReadBodyDeclaredLengthHoldsNoMemory: a request that declares a large Content-Length but
// sends one byte makes readBody allocate at most preallocMax up front, not the declared length
// (many such idle requests would otherwise hold memory they never fill).
func TestReadBodyDeclaredLengthHoldsNoMemory(t *testing.T) {
	const limit = 8 << 20
	var (
		body []byte
		err  error
	)
	n := allocs.Bytes(10, func() {
		r := httptest.NewRequest(http.MethodPost, "/v1/tickets", strings.NewReader("x"))
		r.ContentLength = limit
		body, err = ReadBody(httptest.NewRecorder(), r, limit)
	})
	if err != nil || string(body) != "x" {
		t.Fatalf("readBody = %q, %v", body, err)
	}
	if n > 2*preallocMax {
		t.Errorf("a declared length of %d bytes with a 1-byte body allocated %d bytes", limit, n)
	}
}

// TestReadBodyDeclaredLengthBoundsGrowth: a 1 MiB body that declares its length allocates about
// its length twice over as the buffer doubles, not four times (doubling past it), and one without
// a declared length still reads whole.
func TestReadBodyDeclaredLengthBoundsGrowth(t *testing.T) {
	const size, limit = 1 << 20, 4 << 20
	payload := strings.Repeat("x", size)
	for _, declared := range []bool{true, false} {
		var (
			body []byte
			err  error
		)
		n := allocs.Bytes(5, func() {
			r := httptest.NewRequest(http.MethodPost, "/v1/tickets", strings.NewReader(payload))
			if !declared {
				r.ContentLength = -1
			}
			body, err = ReadBody(httptest.NewRecorder(), r, limit)
		})
		if err != nil || len(body) != size {
			t.Fatalf("declared %v: readBody = %d bytes, %v", declared, len(body), err)
		}
		t.Logf("declared %v: %d bytes allocated for a %d-byte body", declared, n, size)
		if declared && n > 2*size+preallocMax {
			t.Errorf("a declared %d-byte body allocated %d bytes, want at most about twice", size, n)
		}
	}
}

// TestReadAnswerSizedOnce: an upstream's answer that declares its length (up to preallocMax) is
// read into one buffer of that length and bytes.MinRead more, where io.ReadAll grew one from
// 512 bytes, copying it at each step: a 64 KiB answer allocated 3.5 times its length.
func TestReadAnswerSizedOnce(t *testing.T) {
	const size = 64 << 10
	payload := strings.Repeat("x", size)
	var (
		body []byte
		err  error
	)
	n := allocs.Bytes(5, func() {
		body, err = readSized(io.LimitReader(strings.NewReader(payload), 1<<20+1), size)
	})
	if err != nil || len(body) != size {
		t.Fatalf("readSized = %d bytes, %v", len(body), err)
	}
	// One buffer of size+bytes.MinRead, rounded up to whole pages by the allocator.
	if n > size*5/4 {
		t.Errorf("a declared %d-byte answer allocated %d bytes, want one buffer of about %d", size, n, size+bytes.MinRead)
	}
}
