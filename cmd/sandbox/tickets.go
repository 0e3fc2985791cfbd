package main

// A generic ticket API, shaped like the example upstream of the contract (§2, §5): POST /v1/tickets
// with any JSON object. End-to-end tests use it where the body's shape is the point of the test
// (field order, numbers, defaults), not the tool.

import (
	"fmt"
	"net/http"
	"time"
)

// ticketsState numbers the tickets and keeps those that carry an external_id, for the lookup. The
// sequence survives a reset, so an id is never reused; the tickets do not.
type ticketsState struct {
	last       int64                       // the first ticket is T-1842
	byExternal map[string][]map[string]any // tickets by their "external_id" string, in order of creation
}

func newTicketsState() ticketsState {
	return ticketsState{last: 1841, byExternal: make(map[string][]map[string]any)}
}

// forget forgets the tickets created.
func (st *ticketsState) forget() { clear(st.byExternal) }

// ticketsCreateTicket plays POST /v1/tickets with any JSON object: 201 with that object's members
// plus "id" ("T-1842"), "url", "status":"open" and "created_at", which replace members of the same
// name, and Location (the url), ETag and Link (rel="self") headers. A body that is not a JSON
// object gets 400 and no effect. A ticket whose "external_id" is a string can be found by it
// (ticketsFindTickets).
func (s *sandbox) ticketsCreateTicket(c *call) reply {
	var obj map[string]any
	if err := decodeJSON(c.body, &obj); err != nil || obj == nil {
		return reply{status: http.StatusBadRequest, body: map[string]string{"error": "the body must be a JSON object"}}
	}
	var id string
	now := time.Now().UTC().Format(time.RFC3339)
	s.commit(ticketsCreateTicket, func() {
		s.tickets.last++
		id = fmt.Sprintf("T-%d", s.tickets.last)
		obj["id"] = id
		obj["url"] = c.base + "/v1/tickets/" + id
		obj["status"] = "open"
		obj["created_at"] = now
		if ext, ok := obj["external_id"].(string); ok {
			s.tickets.byExternal[ext] = append(s.tickets.byExternal[ext], obj)
		}
	})
	// obj is never changed again: the lookup may encode it at the same time as this answer.
	url := c.base + "/v1/tickets/" + id
	return reply{status: http.StatusCreated, body: obj, effect: true, id: id, header: http.Header{
		"Location": {url}, "Etag": {`"` + id + `-1"`}, "Link": {"<" + url + `>; rel="self"`}}}
}

// ticketsFindTickets plays GET /v1/tickets?external_id=X, the lookup a route's reconcile block
// sends (docs/unknown-outcomes.md, "reconcile"): 200 {"data":[ticket,...]} with the tickets created with that
// external_id, oldest first, as POST /v1/tickets answered them; {"data":[]} when there is none. A
// missing external_id gets 400. It has no side effect.
func (s *sandbox) ticketsFindTickets(c *call) reply {
	ext := c.r.URL.Query().Get("external_id")
	if ext == "" {
		return reply{status: http.StatusBadRequest, body: map[string]string{"error": "the query parameter external_id is required"}}
	}
	s.mu.Lock()
	data := append([]map[string]any{}, s.tickets.byExternal[ext]...)
	s.mu.Unlock()
	var id string
	if len(data) > 0 {
		id, _ = data[0]["id"].(string)
	}
	return reply{status: http.StatusOK, body: map[string]any{"data": data}, id: id}
}
