package chaos

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgateway/idemgateway/e2e"

	"github.com/idemgateway/idemgateway/internal/eventually"
	"github.com/idemgateway/idemgateway/internal/faultproxy"
)

// The store transitions whose replies TestChaos loses (docs/guarantees.md#lost-replies), by the
// name of their script in redisstore/scripts.
var lostReplyOps = []string{"claim", "commit", "renew", "release", "mark_unknown", "reclaim"}

// lostReplyRequired are the transitions every chaos run must have lost a reply of, by close and by
// stall; reclaim runs only where a reconciliation finds nothing, too rarely to require.
var lostReplyRequired = lostReplyOps[:5]

// keyIdx reads the operation's index from a record's Redis key: <prefix>{tenant/tool/chaos-<seed>-<idx>}.
var keyIdx = regexp.MustCompile(`/chaos-\d+-(\d+)\}`)

// transition returns the transition a command runs on an operation's record, "" for none, and the
// record's Redis key (scriptCall).
func (l *lostReplies) transition(args [][]byte) (op, key string) {
	op, key = e2e.ScriptCall(l.shas, args)
	// Only the operations' records: a lost reply of the gateway's own probes (its safety check's
	// and /readyz's claim and release of a key of their own) makes it refuse keyed requests until
	// its next check, which is not what the run measures.
	if op == "" || !keyIdx.MatchString(key) {
		return "", ""
	}
	return op, key
}

// inject runs one injector per transition and fault until ctx ends. Each pauses pause() between
// two lost replies, so that faults come all through the run and leave most calls untouched.
func (l *lostReplies) inject(ctx context.Context, seed uint64, pause func(rng *rand.Rand) time.Duration) {
	var wg sync.WaitGroup
	for i, op := range lostReplyOps {
		for _, fault := range lostReplyFaults {
			rng := rand.New(rand.NewPCG(seed, 1<<43+uint64(i)<<2+uint64(fault)))
			wg.Go(func() { l.injectOne(ctx, rng, op, fault, pause) })
		}
	}
	wg.Wait()
}

func (l *lostReplies) injectOne(ctx context.Context, rng *rand.Rand, op string, fault faultproxy.Fault, pause func(rng *rand.Rand) time.Duration) {
	name := op + " " + fault.String()
	for {
		select {
		case <-time.After(pause(rng)):
		case <-ctx.Done():
			return
		}
		// The rule takes one command and is retired after it, so that the proxy skips it from
		// then on (a rule loses one reply, and the proxy asks every rule it ever had).
		var taken, retired atomic.Bool
		var key atomic.Value
		rule := faultproxy.NewRule(fault, func(args [][]byte) bool {
			if retired.Load() {
				return false
			}
			t, k := l.transition(args)
			if t != op || !taken.CompareAndSwap(false, true) {
				return false
			}
			key.Store(k)
			return true
		})
		l.proxy.Add(rule)
		for !taken.Load() && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond) // a poll's pace: the rule is taken, or the run ends, at any time
		}
		// Its reply comes at once, or never: Redis went away with the command.
		if taken.Load() {
			eventually.Within(5*time.Second, rule.Lost)
		}
		retired.Store(true)
		l.mu.Lock()
		switch {
		case rule.Lost():
			l.lost[name]++
			if k, _ := key.Load().(string); k != "" {
				if m := keyIdx.FindStringSubmatch(k); m != nil {
					idx, _ := strconv.Atoi(m[1])
					l.byKey[idx+1] = append(l.byKey[idx+1], name)
				}
			}
		case taken.Load():
			l.gone++
		}
		l.mu.Unlock()
	}
}

// summary is the report's row: replies lost by transition and fault.
func (l *lostReplies) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	for i, op := range lostReplyOps {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: close %d, stall %d", op, l.lost[op+" close"], l.lost[op+" stall"])
	}
	fmt.Fprintf(&b, " (and %d commands that Redis took away with it when stopped)", l.gone)
	return b.String()
}
