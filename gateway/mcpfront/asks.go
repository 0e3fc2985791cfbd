package mcpfront

import (
	"sync"

	"github.com/idemgateway/idemgateway/gateway/mcpwire"
)

// Requests a server makes of the client during a guarded call (docs/contract.md §9): in the
// sessions era a tool may ask the client something on the call's SSE stream (elicitation/create,
// sampling/createMessage, roots/list) and wait for the answer, which the client POSTs in the same
// session, a person perhaps taking minutes over it. That wait is not the upstream's: the call's
// upstream timeout is held from the ask to the answer (gateway.Exchange.HoldDeadline), bounded by
// stream_idle_timeout instead, and the call stays in flight. An answer to an ask whose call has
// already ended is not relayed: the server would act on a confirmation nobody waits for.

// askKey names an ask: the session it was made in and its JSON-RPC id (mcpwire.IDKey).
type askKey struct{ session, id string }

// maxLateAsks bounds the asks remembered after their call ended, the oldest forgotten first.
const maxLateAsks = 4096

// asks tracks the asks of the calls in flight, and those whose call ended before the answer.
type asks struct {
	mu   sync.Mutex
	open map[askKey]func() // the release of the call's deadline hold, by ask
	late map[askKey]struct{}
	fifo []askKey // late, oldest first
}

// opened records an ask of a call in session (id, raw), whose deadline hold release ends; ok is
// false when it cannot be told apart (no session, an id that is no string or number), and the hold
// is released at once.
func (a *asks) opened(session string, id []byte, release func()) (k askKey, ok bool) {
	key, valid := mcpwire.IDKey(id)
	if session == "" || !valid {
		release()
		return askKey{}, false
	}
	k = askKey{session, key}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open == nil {
		a.open = map[askKey]func(){}
	}
	if prev := a.open[k]; prev != nil {
		prev() // asked again under the same id: one hold per ask
	}
	a.open[k] = release
	return k, true
}

// ended records that the call of the asks ks ended: those still unanswered become late.
func (a *asks) ended(ks []askKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range ks {
		release, open := a.open[k]
		if !open {
			continue
		}
		release()
		delete(a.open, k)
		if a.late == nil {
			a.late = map[askKey]struct{}{}
		}
		if len(a.fifo) == maxLateAsks {
			delete(a.late, a.fifo[0])
			a.fifo = a.fifo[1:]
		}
		a.late[k] = struct{}{}
		a.fifo = append(a.fifo, k)
	}
}

// answered records the client's answer to the ask id in session: an open ask's hold is released
// and the answer goes on. late reports an answer to an ask whose call has ended, which must not.
func (a *asks) answered(session string, id []byte) (late bool) {
	key, valid := mcpwire.IDKey(id)
	if session == "" || !valid {
		return false
	}
	k := askKey{session, key}
	a.mu.Lock()
	defer a.mu.Unlock()
	if release, open := a.open[k]; open {
		release()
		delete(a.open, k)
		return false
	}
	_, late = a.late[k]
	return late
}
