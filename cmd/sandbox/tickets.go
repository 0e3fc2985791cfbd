package main

// A generic ticket API, shaped like the example upstream of the contract (§2, §5): POST /v1/tickets
// with any JSON object. End-to-end tests use it where the body's shape is the point of the test
// (field order, numbers, defaults), not the tool.

import (
	"fmt"
	"net/http"
	"time"
)

// ticketsState numbers the tickets. It survives a reset, so an id is never reused.
type ticketsState struct {
	last int64 // the first ticket is T-1842
}

func newTicketsState() ticketsState { return ticketsState{last: 1841} }

// ticketsCreateTicket plays POST /v1/tickets with any JSON object: 201 with that object's members
// plus "id" ("T-1842"), "url", "status":"open" and "created_at", which replace members of the same
// name. A body that is not a JSON object gets 400 and no effect.
func (s *sandbox) ticketsCreateTicket(c *call) reply {
	var obj map[string]any
	if err := decodeJSON(c.body, &obj); err != nil || obj == nil {
		return reply{status: http.StatusBadRequest, body: map[string]string{"error": "the body must be a JSON object"}}
	}
	var id string
	s.commit(ticketsCreateTicket, func() {
		s.tickets.last++
		id = fmt.Sprintf("T-%d", s.tickets.last)
	})
	obj["id"] = id
	obj["url"] = c.base + "/v1/tickets/" + id
	obj["status"] = "open"
	obj["created_at"] = time.Now().UTC().Format(time.RFC3339)
	return reply{status: http.StatusCreated, body: obj, effect: true, id: id}
}
