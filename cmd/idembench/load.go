package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// keySource hands out idempotency keys; it is safe for concurrent use.
type keySource interface{ next() string }

// uniqueKeys hands out keys never used before, all of one length: "<kind>-<run id>-<counter>".
type uniqueKeys struct {
	prefix string
	n      atomic.Uint64
}

func newKeys(kind string) *uniqueKeys {
	var id [4]byte
	_, _ = rand.Read(id[:])
	return &uniqueKeys{prefix: kind + "-" + hex.EncodeToString(id[:]) + "-"}
}

func (k *uniqueKeys) next() string { return fmt.Sprintf("%s%010d", k.prefix, k.n.Add(1)) }

// cycleKeys hands out a fixed set of keys in turn: the keys of receipts already stored, to replay.
type cycleKeys struct {
	keys []string
	n    atomic.Uint64
}

func (k *cycleKeys) next() string { return k.keys[(k.n.Add(1)-1)%uint64(len(k.keys))] }

// target is where the load goes and what a correct answer is.
type target struct {
	name string
	url  string // the route's URL on the gateway or the bare proxy
	// decision is the Idempotency-Decision every answer must carry ("execute", "replay"), or ""
	// for the bare proxy, which sets none.
	decision string
	keys     keySource
	size     int // request body size in bytes
	// mcp: the requests are MCP tools/calls (mcp.go), with the key in params._meta, answered 200
	// with the call's result under the request's JSON-RPC id; else POSTs of makeBody with the key
	// in Idempotency-Key, answered 201.
	mcp bool
	// keyArg: a tools/call carries its key as an argument (key.argument), not in params._meta.
	keyArg bool
}

// loader sends the benchmark's requests from one HTTP client whose pool holds a connection per
// worker.
type loader struct {
	client *http.Client
}

func newLoader(workers int) *loader {
	return &loader{client: &http.Client{
		Transport: &http.Transport{
			MaxIdleConns:        4 * max(workers, 64),
			MaxIdleConnsPerHost: 2 * max(workers, 64),
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
		Timeout: 30 * time.Second,
	}}
}

// do sends one POST to t with a fresh key and checks the answer: its status, t's decision, and
// for a tools/call that the answer holds its result under the request's id.
func (l *loader) do(t *target) error {
	key := t.keys.next()
	var (
		req    *http.Request
		answer []byte // what the answer to a tools/call holds (newToolCall)
		err    error
	)
	status := http.StatusCreated
	if t.mcp {
		req, answer, err = newToolCall(t.url, key, t.size, t.keyArg)
		status = http.StatusOK
	} else if req, err = http.NewRequest(http.MethodPost, t.url, bytes.NewReader(makeBody(key, t.size))); err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
	}
	if err != nil {
		return err
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%s: status %d: %s", t.name, resp.StatusCode, msg)
	}
	if answer == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		var body []byte
		if body, err = io.ReadAll(resp.Body); err == nil && !bytes.Contains(body, answer) {
			return fmt.Errorf("%s: the answer holds no %s: %.300s", t.name, answer, body)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: reading the body: %w", t.name, err)
	}
	if got := resp.Header.Get("Idempotency-Decision"); got != t.decision {
		return fmt.Errorf("%s: decision %q, want %q", t.name, got, t.decision)
	}
	return nil
}

// failures counts the requests that failed in a run and keeps the first error; it is safe for
// concurrent use.
type failures struct {
	n     atomic.Int64
	mu    sync.Mutex
	first error
}

func (f *failures) add(err error) {
	f.n.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		f.first = err
	}
}

// err returns the first error added, nil if none.
func (f *failures) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// runResult is what one run measured.
type runResult struct {
	throughput float64         // successful requests per second (closed loop)
	requests   int64           // successful requests, warm-up included (closed loop)
	latencies  []time.Duration // ascending, of the successful requests (open loop)
	// dispatchLag is the p99 of how late the open loop sent its requests after their scheduled
	// times: small against the latencies when the load generator kept up.
	dispatchLag time.Duration
	failed      int64 // failed requests in the measured window
	firstErr    error
}

// closedLoop runs workers that each send the next request as soon as the previous one is
// answered, for warmup and then for d, and returns the successful requests per second of the
// window d.
func (l *loader) closedLoop(ctx context.Context, t *target, workers int, warmup, d time.Duration) (runResult, error) {
	var ok atomic.Int64
	var fail failures
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := l.do(t); err != nil {
					fail.add(err)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	finish := func() { close(stop); wg.Wait() }

	if err := sleep(ctx, warmup); err != nil {
		finish()
		return runResult{}, err
	}
	ok0, fail0, t0 := ok.Load(), fail.n.Load(), time.Now()
	if err := sleep(ctx, d); err != nil {
		finish()
		return runResult{}, err
	}
	ok1, fail1, t1 := ok.Load(), fail.n.Load(), time.Now()
	finish()
	return runResult{
		throughput: float64(ok1-ok0) / t1.Sub(t0).Seconds(),
		requests:   ok.Load(),
		failed:     fail1 - fail0,
		firstErr:   fail.err(),
	}, nil
}

// maxInFlight bounds the requests an open loop has outstanding; a request due while that many are
// still unanswered fails (the target cannot sustain the rate).
const maxInFlight = 2048

// openLoop sends requests at a fixed rate (per second), each at its scheduled time whatever the
// answers of earlier ones, for warmup and then for d, and returns the latencies of the requests
// scheduled in the window d. Each request is sent from its own goroutine, so a slow answer never
// delays the sending of later requests (no coordinated omission). A latency runs from when the
// request was sent, not from its scheduled time: Go's timers wake an idle process up to about a
// millisecond late, which would otherwise add the load generator's jitter to every sample; how late
// the sends were is reported as the dispatch lag.
func (l *loader) openLoop(ctx context.Context, t *target, rate float64, warmup, d time.Duration) (runResult, error) {
	interval := time.Duration(float64(time.Second) / rate)
	nWarm, n := int(warmup/interval), int(d/interval)
	lat := make([]time.Duration, n) // 0: failed
	lags := make([]time.Duration, 0, n)
	var fail failures
	var failedInWindow, inFlight atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()

	start := time.Now()
	for i := range nWarm + n {
		at := start.Add(time.Duration(i) * interval)
		if err := sleep(ctx, time.Until(at)); err != nil {
			return runResult{}, err
		}
		sent := time.Now()
		if i >= nWarm {
			lags = append(lags, sent.Sub(at))
		}
		if inFlight.Load() >= maxInFlight {
			fail.add(fmt.Errorf("%s: over %d requests in flight at %.0f req/s", t.name, maxInFlight, rate))
			if i >= nWarm {
				failedInWindow.Add(1)
			}
			continue
		}
		inFlight.Add(1)
		wg.Go(func() {
			defer inFlight.Add(-1)
			err := l.do(t)
			took := time.Since(sent)
			switch {
			case err != nil:
				fail.add(err)
				if i >= nWarm {
					failedInWindow.Add(1)
				}
			case i >= nWarm:
				lat[i-nWarm] = took
			}
		})
	}
	wg.Wait()
	lat = slices.DeleteFunc(lat, func(d time.Duration) bool { return d == 0 })
	slices.Sort(lat)
	slices.Sort(lags)
	return runResult{latencies: lat, dispatchLag: percentile(lags, 99), failed: failedInWindow.Load(), firstErr: fail.err()}, nil
}

// count sends n requests to t from workers concurrent workers and returns the first error.
func (l *loader) count(ctx context.Context, t *target, n, workers int) error {
	var left atomic.Int64
	left.Store(int64(n))
	var fail failures
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				if err := l.do(t); err != nil {
					fail.add(err)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return fail.err()
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
