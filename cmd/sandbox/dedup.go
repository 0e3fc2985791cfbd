package main

import (
	"net/http"
	"strings"
)

// De-duplication by a forwarded key. The sandbox ignores Idempotency-Key (the client's key reaches
// it unchanged through the gateway, and every de-duplication a test sees must be the gateway's),
// but it honours one header of its own, as an upstream with its own idempotency keys (Stripe,
// Zendesk) honours Idempotency-Key:
//
//	X-Sandbox-Idempotency-Key: K   The first request to an endpoint with K that performs its side
//	                               effect stores its answer (status, headers, body) under K; every
//	                               later request to that endpoint with K gets that answer again,
//	                               without a second effect (logged key_replayed=true, effect=false).
//	                               Requests with one K are served one at a time at the moment of
//	                               the effect, so two concurrent ones make one effect. An answer
//	                               without effect (an invalid request, an injected status) stores
//	                               nothing. A reset forgets the keys.
//	X-Sandbox-Key-Collation: ci    K is compared as a MySQL _ci collation compares: keys equal
//	                               under ASCII case folding are one key (an upstream whose unique
//	                               index folds case, docs/cases.md C25).
//
// A route whose upstream sets forward_key: X-Sandbox-Idempotency-Key sends the gateway's scoped
// key on it: the sandbox is then an upstream that de-duplicates by the forwarded key. Faults apply
// to a replayed answer as to the first (delay, hold, status before it; fail after commit,
// Set-Cookie and padding after it).

// headerIdempotencyKey is the header the sandbox de-duplicates by, and headerKeyCollation the one
// that makes it fold case ("ci").
const (
	headerIdempotencyKey = "X-Sandbox-Idempotency-Key"
	headerKeyCollation   = "X-Sandbox-Key-Collation"
)

// dedupKey is the key a request is de-duplicated by: its X-Sandbox-Idempotency-Key, folded to
// lower case under X-Sandbox-Key-Collation: ci; "" when it has none.
func dedupKey(h http.Header) string {
	key := h.Get(headerIdempotencyKey)
	if strings.EqualFold(h.Get(headerKeyCollation), "ci") {
		key = strings.ToLower(key)
	}
	return key
}

// keyedCall runs h for a request with the forwarded key key, or answers the reply stored for key
// by an earlier effect of endpoint (replayed true, and no effect).
func (s *sandbox) keyedCall(endpoint, key string, h apiHandler, c *call) (rep reply, replayed bool) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	id := endpoint + "\x00" + key
	s.mu.Lock()
	prev, ok := s.keyed[id]
	s.mu.Unlock()
	if ok {
		prev.effect = false
		return prev, true
	}
	rep = h(c)
	if rep.effect && rep.succeeded() {
		s.mu.Lock()
		s.keyed[id] = rep
		s.mu.Unlock()
	}
	return rep, false
}
