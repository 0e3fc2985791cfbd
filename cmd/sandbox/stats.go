package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
)

// counter counts events by endpoint. It is not safe for concurrent use; the sandbox guards it with
// its mutex.
type counter struct {
	total      int64
	byEndpoint map[string]int64
}

// newCounter returns a counter that lists every one of endpoints, at zero.
func newCounter(endpoints []string) counter {
	c := counter{byEndpoint: make(map[string]int64, len(endpoints))}
	for _, ep := range endpoints {
		c.byEndpoint[ep] = 0
	}
	return c
}

func (c *counter) add(endpoint string) {
	c.byEndpoint[endpoint]++
	c.total++
}

// counts is the JSON form of a counter.
type counts struct {
	Total      int64            `json:"total"`
	ByEndpoint map[string]int64 `json:"by_endpoint"`
}

// stats is the body of GET /_sandbox/stats:
//
//	{"total":N,"by_endpoint":{"jira.create_issue":N,...},"requests":{"total":N,"by_endpoint":{...}},
//	 "cancelled":{"total":N,"by_endpoint":{"mcp.slow_create":N,...}},"in_flight":N}
//
// total and by_endpoint count side effects performed (a create that succeeded, including one whose
// response was then dropped or replaced by a 5xx). requests counts every request that reached a
// tool endpoint, including reads, rejected requests and injected faults: "attempts". cancelled
// counts the MCP tool calls that the client cancelled before they finished (notifications/cancelled
// reached the server): a gateway in front with cancel: finish keeps it at zero. in_flight
// is the number of requests to tool endpoints being served now (in a delay, a hold, or acting): a
// test waits for 0 before it reads the counters for good, since a detached request may still act
// after its caller has gone.
type stats struct {
	counts
	Requests  counts `json:"requests"`
	Cancelled counts `json:"cancelled"`
	InFlight  int64  `json:"in_flight"`
}

// snapshot returns the counters. s.mu must not be held.
func (s *sandbox) snapshot() stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return stats{
		counts:    counts{Total: s.effects.total, ByEndpoint: maps.Clone(s.effects.byEndpoint)},
		Requests:  counts{Total: s.requests.total, ByEndpoint: maps.Clone(s.requests.byEndpoint)},
		Cancelled: counts{Total: s.cancelled.total, ByEndpoint: maps.Clone(s.cancelled.byEndpoint)},
		InFlight:  s.inFlight,
	}
}

// serveStats answers GET /_sandbox/stats.
func (s *sandbox) serveStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, nil, s.snapshot(), 0)
}

// serveReset answers POST /_sandbox/reset: it zeroes the counters, forgets the objects created and
// clears the script, then answers the (zero) stats.
func (s *sandbox) serveReset(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.resetLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, nil, s.snapshot(), 0)
}

// script is the body of POST and GET /_sandbox/script.
type script struct {
	FailNext []faultJSON `json:"fail_next"`
}

// serveScript answers GET /_sandbox/script with the faults still queued.
func (s *sandbox) serveScript(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sc := script{FailNext: make([]faultJSON, 0, len(s.script))}
	for _, f := range s.script {
		sc.FailNext = append(sc.FailNext, f.toJSON())
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, nil, sc, 0)
}

// serveSetScript answers POST /_sandbox/script: it replaces the queue of scripted faults (an empty
// list clears it) and answers the queue. Unknown fields and invalid faults get 400 and leave the
// queue as it was.
func (s *sandbox) serveSetScript(w http.ResponseWriter, r *http.Request) {
	var sc script
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		writeProblem(w, http.StatusBadRequest, "script: "+err.Error(), false, "")
		return
	}
	queue := make([]fault, 0, len(sc.FailNext))
	for i, fj := range sc.FailNext {
		f, err := fj.toFault()
		if err != nil {
			writeProblem(w, http.StatusBadRequest, fmt.Sprintf("script: fail_next[%d]: %v", i, err), false, "")
			return
		}
		f.scripted = true
		queue = append(queue, f)
	}
	s.mu.Lock()
	s.script = queue
	s.mu.Unlock()
	s.serveScript(w, r)
}
