package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// allocResult is one handler's cost per request, from testing.Benchmark.
type allocResult struct {
	allocs, bytes, nsPerOp int64
}

// benchHandler measures h.ServeHTTP on a request to the route with a key of keys and a body of
// size bytes, answered into an httptest.ResponseRecorder; the upstream (and, for the gateway,
// Redis) are the real ones over loopback. testing.Benchmark counts every allocation of the
// process while it runs: the load it adds on both sides (building the request, the upstream's
// handler) cancels out in the difference gateway − bare proxy. decision is the
// Idempotency-Decision every answer must carry ("" for the bare proxy).
func benchHandler(h http.Handler, keys keySource, size int, decision string) (allocResult, error) {
	var (
		mu      sync.Mutex
		failure error
	)
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			key := keys.next()
			req := httptest.NewRequest(http.MethodPost, routePath, bytes.NewReader(makeBody(key, size)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if got := rec.Header().Get("Idempotency-Decision"); rec.Code != http.StatusCreated || got != decision {
				mu.Lock()
				if failure == nil {
					failure = fmt.Errorf("status %d, decision %q (want 201, %q): %s", rec.Code, got, decision, rec.Body)
				}
				mu.Unlock()
			}
		}
	})
	if failure != nil {
		return allocResult{}, failure
	}
	return allocResult{allocs: res.AllocsPerOp(), bytes: res.AllocedBytesPerOp(), nsPerOp: res.NsPerOp()}, nil
}
