package main

// Holds: a request with X-Sandbox-Hold: NAME (or "hold" in a scripted fault) waits, after its delay
// and before acting, until a test releases NAME:
//
//	POST /_sandbox/release  {"hold":"NAME"}   release NAME: the requests waiting on it go on, and
//	                                          so do later ones (a release is a latch, kept until a
//	                                          reset); answers {"hold":"NAME","waiting":N,"released":true}
//	GET  /_sandbox/holds                      {"holds":{"NAME":{"waiting":N,"released":false},...}}
//
// A test so decides when the upstream acts instead of guessing it with a delay: it waits until
// GET /_sandbox/holds shows the request waiting (the request reached the upstream), does what must
// happen meanwhile (let the gateway time out, kill it), then releases. Without X-Sandbox-Detach a
// client that goes away ends the wait without effect, as it ends a delay; with it only a release
// does. A reset, and the sandbox's shutdown, end every wait without effect (logged status=aborted).

import (
	"encoding/json"
	"net/http"
)

// hold is one name requests wait on.
type hold struct {
	released chan struct{} // closed by a release, a reset or the shutdown
	aborted  bool          // closed by a reset or the shutdown: the waiters do nothing
	waiting  int           // requests waiting on it now
}

// holdLocked returns the hold called name, creating it. s.mu must be held.
func (s *sandbox) holdLocked(name string) *hold {
	h := s.holds[name]
	if h == nil {
		h = &hold{released: make(chan struct{})}
		s.holds[name] = h
	}
	return h
}

// isClosed reports whether h has been released or aborted.
func (h *hold) isClosed() bool { return isClosed(h.released) }

// waitHold waits until the hold called name is released (true), or aborted or gone is closed
// (false; gone wins over a release). A nil gone never closes: the request is detached from its client.
func (s *sandbox) waitHold(name string, gone <-chan struct{}) bool {
	s.mu.Lock()
	h := s.holdLocked(name)
	h.waiting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		h.waiting--
		s.mu.Unlock()
	}()
	select {
	case <-h.released:
	case <-gone:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !h.aborted && !isClosed(gone)
}

// abortHoldsLocked ends every wait without effect and forgets the holds. s.mu must be held.
func (s *sandbox) abortHoldsLocked() {
	for _, h := range s.holds {
		if !h.isClosed() {
			h.aborted = true
			close(h.released)
		}
	}
	s.holds = make(map[string]*hold)
}

// abortHolds is abortHoldsLocked for the shutdown: a held request must not keep it waiting.
func (s *sandbox) abortHolds() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abortHoldsLocked()
}

// holdState is a hold in the admin answers.
type holdState struct {
	Waiting  int  `json:"waiting"`
	Released bool `json:"released"`
}

// serveHolds answers GET /_sandbox/holds.
func (s *sandbox) serveHolds(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	all := make(map[string]holdState, len(s.holds))
	for name, h := range s.holds {
		all[name] = holdState{Waiting: h.waiting, Released: h.isClosed()}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, nil, map[string]any{"holds": all}, 0)
}

// serveRelease answers POST /_sandbox/release {"hold":"NAME"}.
func (s *sandbox) serveRelease(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Hold string `json:"hold"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Hold == "" {
		writeProblem(w, http.StatusBadRequest, `release: want {"hold":"NAME"}`, false, "")
		return
	}
	s.mu.Lock()
	h := s.holdLocked(req.Hold)
	if !h.isClosed() {
		close(h.released)
	}
	st := holdState{Waiting: h.waiting, Released: true}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, nil, map[string]any{"hold": req.Hold, "waiting": st.Waiting, "released": st.Released}, 0)
}
