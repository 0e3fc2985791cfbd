package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/gateway"
)

// floor is a reference point, not a gateway: the bare proxy plus the Redis round trips that the
// contract needs and nothing else, to show how close to the budget any gateway can get on this
// machine. A request's body is read whole; one SET … NX GET claims the key (storing the request
// body) or reads what it holds; a first execution is proxied and its response body stored with a
// second SET before the client gets it; a known key is answered from Redis (a replay). No
// fingerprint, record encoding, fencing, lease, logging, metrics or tracing.
type floor struct {
	proxy *httputil.ReverseProxy
	rdb   *redis.Client
}

// floorKey is the context key of the Redis key of a request being executed.
type floorKey struct{}

// floorTTL is how long the floor keeps a key.
const floorTTL = time.Hour

func newFloor(target *url.URL, rdb *redis.Client) *floor {
	f := &floor{rdb: rdb}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:      gateway.NewTransport(),
		ModifyResponse: f.commit,
	}
	return f
}

func (f *floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := "floor:" + r.Header.Get("Idempotency-Key")
	stored, err := f.rdb.SetArgs(r.Context(), key, body, redis.SetArgs{Mode: "NX", Get: true, TTL: floorTTL}).Bytes()
	switch {
	case errors.Is(err, redis.Nil): // claimed: execute
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		w.Header().Set("Idempotency-Decision", "execute")
		f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), floorKey{}, key)))
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default: // known: replay what it holds
		h := w.Header()
		h.Set("Idempotency-Decision", "replay")
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(stored)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(stored)
	}
}

// commit stores the response body before the client gets it.
func (f *floor) commit(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	key, _ := resp.Request.Context().Value(floorKey{}).(string)
	if err := f.rdb.Set(resp.Request.Context(), key, body, floorTTL).Err(); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}
