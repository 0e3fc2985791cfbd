package chaos

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/idemgateway/idemgateway/e2e"
	"github.com/idemgateway/idemgateway/internal/eventually"
)

// inject runs the process faults of the seeded schedule until phase ends, from the test's
// goroutine (the process helpers fail the test from it), and returns with every gateway and Redis
// up.
func (c *run) inject(phase context.Context) {
	rng := rand.New(rand.NewPCG(c.seed, 1<<42))
	type fault struct {
		kill    bool // else a Redis restart
		sigkill bool // Redis: SIGKILL, else SIGTERM
		down    time.Duration
		atOp    int // when this many operations were handed out
	}
	var plan []fault
	for range c.cfg.kills {
		plan = append(plan, fault{kill: true, down: time.Duration(rng.IntN(800)) * time.Millisecond})
	}
	for i := range c.cfg.redisRestarts {
		plan = append(plan, fault{sigkill: i%2 == 1, down: time.Duration(rng.IntN(1500)) * time.Millisecond})
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	// Spread over the operations handed out, each at a random one of its own share, leaving the
	// first 5% (work under way) and the last 10% (recovery) free.
	first, span := c.cfg.ops/20, c.cfg.ops*85/100
	share := max(span/max(len(plan), 1), 1)
	for i := range plan {
		plan[i].atOp = first + share*i + rng.IntN(share)
	}
	for _, f := range plan {
		for c.handedOut() < f.atOp {
			select {
			case <-time.After(10 * time.Millisecond):
			case <-phase.Done():
				return
			}
		}
		if f.kill {
			c.killGateway(f.down)
		} else {
			c.restartRedis(f.sigkill, f.down)
		}
	}
	<-phase.Done()
}

// busiest waits up to timeout for a gateway with slow requests in flight and returns the one with
// the most (or, failing that, slot 0) and their number.
func (c *run) busiest(timeout time.Duration) (*node, int) {
	var best *node
	eventually.Within(timeout, func() bool {
		c.mu.RLock()
		defer c.mu.RUnlock()
		best = c.slots[0]
		for _, g := range c.slots {
			if g.slow.Load() > best.slow.Load() {
				best = g
			}
		}
		return best.slow.Load() > 0
	})
	return best, int(best.slow.Load())
}

// victim waits up to timeout for a gateway that has upstream calls in flight by its own
// idemgateway_upstream_in_flight metric, slow ones among them by the clients' count (a
// kill must hit calls under way, so that the upstream acts after the gateway died), and returns
// the one with the most, with its metrics. Failing that it returns the one with the most calls
// in flight, possibly none; the kill is then reported and fails the run.
func (c *run) victim(timeout time.Duration) (g *node, inFlight, slow int, m map[string]float64) {
	var best *node
	var bestM map[string]float64
	bestN := 0
	eventually.Within(timeout, func() bool {
		c.mu.RLock()
		slots := slices.Clone(c.slots)
		c.mu.RUnlock()
		bestSlow := false
		best, bestM, bestN = slots[0], nil, math.MinInt
		for _, g := range slots {
			m, err := g.Metrics()
			if err != nil {
				continue
			}
			n := int(e2e.SumMetric(m, "idemgateway_upstream_in_flight", ""))
			slow := n > 0 && g.slow.Load() > 0
			// Calls in flight with slow ones among them first, then the most calls.
			if (slow && !bestSlow) || (slow == bestSlow && n > bestN) {
				best, bestM, bestN, bestSlow = g, m, n, slow
			}
		}
		return bestSlow
	})
	if bestN == math.MinInt { // no gateway answered
		bestN = 0
	}
	return best, bestN, int(best.slow.Load()), bestM
}

// killGateway kills (SIGKILL) a gateway with slow upstream calls in flight, waits down, and starts
// a new one in its slot, on a new port. It keeps the victim's lease renewals, read just before.
func (c *run) killGateway(down time.Duration) {
	t := c.t
	g, n, slow, m := c.victim(5 * time.Second)
	g.Kill9(t)
	c.kills++
	c.killed[g.String()] = true
	c.killedInFlight = append(c.killedInFlight, n)
	for _, res := range []string{"ok", "lost", "error"} {
		c.killedRenewals[res] += e2e.SumMetric(m, "idemgateway_lease_renewals_total", `result="`+res+`"`)
	}
	c.logf("kill -9 %s (pid %d) with %d upstream calls in flight (%d slow requests sent through it); a new process in %s",
		g, g.Cmd.Process.Pid, n, slow, down)
	time.Sleep(down) // the outage's length, in wall time as an operator's would be
	ng := &node{Gateway: e2e.StartGateway(t, c.routes, c.env(g.slot)), slot: g.slot, gen: g.gen + 1}
	c.mu.Lock()
	c.slots[g.slot] = ng
	c.all = append(c.all, ng)
	c.mu.Unlock()
	c.logf("%s serves slot %d", ng, ng.slot)
}

// restartRedis stops Redis (SIGKILL, or SIGTERM) while slow executions are in flight, keeps it
// down for down, and restarts it on the same port from its AOF.
func (c *run) restartRedis(sigkill bool, down time.Duration) {
	_, n := c.busiest(3 * time.Second)
	how := "SIGTERM"
	if sigkill {
		how = "SIGKILL"
		c.redis.Kill()
		c.redisKills++
	} else {
		c.redis.Stop()
		c.redisStops++
	}
	from := c.since()
	c.logf("redis stopped (%s) with %d slow requests in flight on the busiest gateway; down for %s", how, n, down)
	time.Sleep(down) // the outage's length, in wall time as an operator's would be
	c.redis.Restart()
	c.outages = append(c.outages, [2]time.Duration{from, c.since()})
	c.logf("redis restarted from its AOF")
}
