package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/e2e"
	"github.com/idemgateway/idemgateway/internal/faultproxy"
	"github.com/idemgateway/idemgateway/internal/redistest"
	"github.com/idemgateway/idemgateway/routes"
)

// newRun starts Redis (AOF, fsync always) behind a fault proxy, the sandbox and the gateways.
func newRun(t *testing.T, cfg config, seed uint64) *run {
	t.Helper()
	c := &run{t: t, cfg: cfg, seed: seed, start: time.Now(),
		answers: map[string]int{}, retries: map[string]int{}, killedRenewals: map[string]float64{}, killed: map[string]bool{}}
	c.redis = redistest.Start(t, redistest.Options{AppendOnly: true, Args: []string{"--appendfsync", "always"}})
	shas, err := e2e.ScriptSHAs()
	if err != nil {
		t.Fatal(err)
	}
	c.lost = &lostReplies{proxy: faultproxy.Start(t, c.redis.Addr()), shas: shas, lost: map[string]int{}, byKey: map[int][]string{}}
	c.storeEnv = []string{"IDEMGATEWAY_REDIS_URL=" + strings.Replace(c.redis.URL(), c.redis.Addr(), c.lost.proxy.Addr(), 1)}
	c.sb = e2e.StartSandbox(t)
	c.routes = e2e.WriteRoutes(t, "chaos.yaml.tmpl", c.sb.URL)
	// The report and the checks read the leases from routeLeases: they must be the file's.
	rc, err := routes.Load(c.routes)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range rc.Routes {
		if rt.LockLease != routeLeases[rt.Name] {
			t.Fatalf("route %s has lock_lease %s, routeLeases says %s", rt.Name, rt.LockLease, routeLeases[rt.Name])
		}
	}
	for slot := range cfg.gateways {
		g := &node{Gateway: e2e.StartGateway(t, c.routes, c.env(slot)), slot: slot}
		c.slots = append(c.slots, g)
		c.all = append(c.all, g)
	}
	return c
}

// logf logs a process fault with its time in the run, and keeps it for the report.
func (c *run) logf(format string, args ...any) {
	s := fmt.Sprintf("+%6.2fs ", c.since().Seconds()) + fmt.Sprintf(format, args...)
	c.faults = append(c.faults, s)
	c.t.Log("chaos " + s)
}

// produce hands out cfg.ops operations, as a queue that redelivers: the first two
// deliveries of every operation of a batch are shuffled together, so that they run at once on
// different workers, and each further delivery comes with one of the next three batches. It closes
// out when done.
func (c *run) produce(ctx context.Context, out chan<- *operation) {
	defer close(out)
	rng := rand.New(rand.NewPCG(c.seed, 1<<40))
	late := map[int][]*operation{}
	send := func(batch []*operation) bool {
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for _, op := range batch {
			select {
			case out <- op:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	b := 0
	for ; c.handedOut() < c.cfg.ops; b++ {
		var batch []*operation
		for range batchOps {
			c.opsMu.Lock()
			op := newOperation(c.seed, len(c.ops))
			c.ops = append(c.ops, op)
			c.opsMu.Unlock()
			for d := range op.deliveries {
				if d < 2 {
					batch = append(batch, op)
				} else {
					later := b + 1 + rng.IntN(3)
					late[later] = append(late[later], op)
				}
			}
		}
		batch = append(batch, late[b]...)
		delete(late, b)
		if !send(batch) {
			return
		}
	}
	// Redeliveries already promised still come, in their order.
	for end := b + 3; b <= end; b++ {
		if !send(late[b]) {
			return
		}
	}
}

// work takes deliveries off the queue until it is closed.
func (c *run) work(ctx context.Context, worker int, in <-chan *operation) {
	rng := rand.New(rand.NewPCG(c.seed, 1<<41+uint64(worker)))
	for op := range in {
		c.deliver(ctx, worker, rng, op)
	}
}

// pick returns the gateway of a random slot.
func (c *run) pick(rng *rand.Rand) *node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.slots[rng.IntN(len(c.slots))]
}

// deliver sends op through random gateways until it gets a final answer, or gives up after
// maxAttempts requests or deliveryTimeout.
func (c *run) deliver(ctx context.Context, worker int, rng *rand.Rand, op *operation) {
	deadline := time.Now().Add(deliveryTimeout)
	for attempt := 1; attempt <= maxAttempts && time.Now().Before(deadline); attempt++ {
		if ctx.Err() != nil {
			return
		}
		g := c.pick(rng)
		req, fault, timeout := op.request(worker, attempt == 1, true)
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			rctx, cancel = context.WithTimeout(ctx, timeout)
		}
		req.Ctx = rctx
		retry := op.sent.Swap(true)
		slow := op.delay >= slowDelay
		if slow {
			g.slow.Add(1)
		}
		at := c.since()
		resp, err := g.Send(req)
		if slow {
			g.slow.Add(-1)
		}
		gaveUp := timeout > 0 && errors.Is(rctx.Err(), context.DeadlineExceeded)
		cancel()
		if ctx.Err() != nil {
			return // the test is ending: this answer means nothing
		}
		ev, final := classify(resp, err, gaveUp)
		ev.at, ev.took, ev.worker, ev.gateway, ev.attempt, ev.fault = at, c.since()-at, worker, g.String(), attempt, fault
		op.add(ev)
		c.requests.Add(1)
		c.tallyMu.Lock()
		c.answers[ev.result]++
		if retry {
			c.retries[ev.result]++
		}
		c.tallyMu.Unlock()
		if final {
			return
		}
		pause := 50 * time.Millisecond
		switch ev.result {
		case resInProgress:
			pause = time.Duration(100+rng.IntN(200)) * time.Millisecond
		case resStore503, resUnexpected:
			pause = time.Duration(150+rng.IntN(250)) * time.Millisecond
		case resConnError:
			pause = time.Duration(100+rng.IntN(150)) * time.Millisecond
		case resGaveUp:
			pause = 20 * time.Millisecond
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
	}
	c.unfinished.Add(1)
	op.add(event{at: c.since(), worker: worker, result: resNoFinal})
}
