package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// newOperation derives operation idx from the seed alone, so that a seed names the operations.
func newOperation(seed uint64, idx int) *operation {
	rng := rand.New(rand.NewPCG(seed, uint64(idx)))
	op := &operation{idx: idx, key: fmt.Sprintf("chaos-%d-%d", seed, idx), deliveries: 2 + rng.IntN(3)}
	switch r := rng.IntN(10); {
	case r < 4:
		op.tool = toolTicket
	case r < 6:
		op.tool = toolWait
	case r < 8:
		op.tool = toolFK
	default:
		op.tool = toolRec
	}
	n := rng.IntN(100)
	for _, m := range behaviourMix {
		if n < m.weight {
			op.kind = m.kind
			break
		}
		n -= m.weight
	}
	// Twice in every twenty operations: the upstream acts and drops the connection on the
	// forward_key and on the reconcile route, so that each run sees the upstream's de-duplication
	// answer a re-execution and a lookup find an effect.
	switch idx % 20 {
	case 3:
		op.tool, op.kind = toolFK, opDrop
	case 13:
		op.tool, op.kind = toolRec, opDrop
	}
	if op.kind == opTimeout {
		op.tool = toolSlow
	}
	op.path = paths[op.tool]
	ms := func(lo, span int) time.Duration { return time.Duration(lo+rng.IntN(span)) * time.Millisecond }
	switch op.kind {
	case opPlain:
		op.delay = ms(0, 250)
	case opBeyondLease:
		op.delay = ms(1300, 1000)
	case opDrop, op500:
		op.delay = ms(0, 200)
		op.budget.Store(1)
	case op503:
		op.delay = ms(0, 200)
		op.budget.Store(int32(1 + rng.IntN(2)))
	case opGiveUp:
		op.delay = ms(400, 500)
		op.giveUp = ms(80, 170)
	case opTimeout:
		op.delay = ms(600, 400)
	}
	op.body = fmt.Sprintf(`{"op":%q,"title":"chaos ticket %d","priority":%d}`, op.key, idx, rng.IntN(5))
	return op
}
