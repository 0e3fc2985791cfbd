package main

// Fault injection. Every tool endpoint reads these request headers; a concurrent test sets them on
// its own requests only, so tests do not interfere:
//
//	X-Sandbox-Delay: 500ms            Wait this long (time.ParseDuration) before acting. If the
//	                                  request's context ends meanwhile (the client went away), the
//	                                  side effect is NOT performed and no response is written
//	                                  (logged status=canceled), unless the request is detached.
//	X-Sandbox-Hold: NAME              Then wait until POST /_sandbox/release {"hold":"NAME"}
//	                                  (see holds.go): a test decides when the upstream acts. A
//	                                  client that goes away ends the wait as it ends a delay.
//	X-Sandbox-Detach: 1               Finish the request whatever its client does, as most real
//	                                  APIs finish a request they accepted: the delay and the hold
//	                                  are not cut short when the client (the gateway) times out,
//	                                  disconnects or dies; the side effect is performed and
//	                                  counted after them, and the answer goes to a connection that
//	                                  nobody reads (logged status=abandoned). Any
//	                                  strconv.ParseBool true value.
//	X-Sandbox-Status: 503             Answer this status (400-599) with an application/problem+json
//	                                  body WITHOUT performing the side effect. 429 and 503 carry
//	                                  Retry-After: 1.
//	X-Sandbox-Fail-After-Commit: drop Perform the side effect, then hijack the connection and close
//	                                  it without writing a response.
//	X-Sandbox-Fail-After-Commit: 500  Perform the side effect, then answer this status (400-599)
//	                                  with a problem body that says "effect_performed": true.
//	X-Sandbox-Set-Cookie: 1           Add "Set-Cookie: sandbox_session=...; Path=/; HttpOnly" to
//	                                  the success response (any strconv.ParseBool true value).
//	X-Sandbox-Body-Bytes: 5242880     Append to the success response's JSON object a member
//	                                  "sandbox_padding" whose string value is that many bytes
//	                                  (at most 64 MiB).
//	X-Sandbox-Success-Status: 202     Answer the success with this status (200-299) instead of the
//	                                  endpoint's own; 204 without a body.
//	X-Sandbox-Gzip: 1                 Encode the success response with gzip (Content-Encoding:
//	                                  gzip, Vary: Accept-Encoding) when the request's
//	                                  Accept-Encoding allows it, as many APIs do.
//
// The faults combine and apply in this order: delay, hold, status, the request's own validation (an
// invalid request, including a GraphQL document answered with 200 and "errors", is rejected without
// effect and without further faults), side effect, fail after commit, Set-Cookie, padding, the success status and gzip. On
// the read endpoint the faults apply alike, without the side effect. A malformed fault header gets
// 400 without effect.
//
// A client that cannot set headers (the gateway's own client in an end-to-end test, an agent)
// scripts faults instead: POST /_sandbox/script with
//
//	{"fail_next": [{"status": 503}, {}, {"fail_after_commit": "drop", "endpoint": "jira.create_issue"}]}
//
// queues faults, with the same fields as the headers (delay, hold, detach, status,
// fail_after_commit, set_cookie, body_bytes). Each request to a tool endpoint takes the first queued fault whose
// endpoint is empty or its own, and that fault replaces its headers entirely; {} is a request
// without fault. The queue is process-wide: scripted tests must not run in parallel.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The fault headers.
const (
	headerDelay           = "X-Sandbox-Delay"
	headerHold            = "X-Sandbox-Hold"
	headerDetach          = "X-Sandbox-Detach"
	headerStatus          = "X-Sandbox-Status"
	headerFailAfterCommit = "X-Sandbox-Fail-After-Commit"
	headerSetCookie       = "X-Sandbox-Set-Cookie"
	headerBodyBytes       = "X-Sandbox-Body-Bytes"
	headerSuccessStatus   = "X-Sandbox-Success-Status"
	headerGzip            = "X-Sandbox-Gzip"
)

// maxPadBytes bounds X-Sandbox-Body-Bytes.
const maxPadBytes = 64 << 20

// dropConnection is fault.afterCommit for "drop".
const dropConnection = -1

// fault is what to do wrong with one request. The zero fault does nothing wrong.
type fault struct {
	endpoint    string        // scripted faults only: the endpoint it is for; "" is any
	scripted    bool          // it came from the script, not from headers
	delay       time.Duration // wait before acting
	hold        string        // then wait until this hold is released; "" is none
	detach      bool          // the client going away cuts neither the delay nor the hold short
	status      int           // answer this status without acting; 0 is none
	afterCommit int           // after acting: dropConnection, or a status to answer; 0 is none
	setCookie   bool          // add Set-Cookie to the success response
	bodyBytes   int           // pad the success response with this many bytes
	success     int           // answer a success with this status; 0 is the endpoint's own
	gzip        bool          // gzip the success response when the request accepts it
}

// faultFor returns the fault for a request to endpoint: the first scripted fault for it, taken off
// the queue, else the one its headers ask for.
func (s *sandbox) faultFor(endpoint string, h http.Header) (fault, error) {
	s.mu.Lock()
	i := slices.IndexFunc(s.script, func(f fault) bool { return f.endpoint == "" || f.endpoint == endpoint })
	if i >= 0 {
		f := s.script[i]
		s.script = slices.Delete(s.script, i, i+1)
		s.mu.Unlock()
		return f, nil
	}
	s.mu.Unlock()
	return faultFromHeaders(h)
}

// faultFromHeaders reads the X-Sandbox-* headers. An error names the malformed header.
func faultFromHeaders(h http.Header) (fault, error) {
	f := faultJSON{Delay: h.Get(headerDelay), Hold: h.Get(headerHold)}
	if v := h.Get(headerFailAfterCommit); v != "" {
		f.FailAfterCommit = json.RawMessage(strconv.Quote(v))
	}
	for _, err := range []error{
		headerBool(h, headerDetach, &f.Detach),
		headerInt(h, headerStatus, "a status code", &f.Status),
		headerBool(h, headerSetCookie, &f.SetCookie),
		headerInt(h, headerBodyBytes, "a number of bytes", &f.BodyBytes),
		headerInt(h, headerSuccessStatus, "a status code", &f.SuccessStatus),
		headerBool(h, headerGzip, &f.Gzip),
	} {
		if err != nil {
			return fault{}, err
		}
	}
	flt, err := f.toFault()
	var fe *faultError
	if errors.As(err, &fe) {
		return fault{}, fmt.Errorf("%s: %s", fe.header, fe.msg)
	}
	return flt, err
}

// headerBool sets *dst from h's header name, when sent (any strconv.ParseBool value); the error
// names the header.
func headerBool(h http.Header, name string, dst *bool) error {
	v := h.Get(name)
	if v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%s: %q is not a boolean", name, v)
	}
	*dst = b
	return nil
}

// headerInt sets *dst from h's header name, when sent (a decimal integer, what it stands for
// named in the error).
func headerInt(h http.Header, name, what string, dst *int) error {
	v := h.Get(name)
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%s: %q is not %s", name, v, what)
	}
	*dst = n
	return nil
}

// faultError is a fault field that does not validate: its name in a script and as a header.
type faultError struct {
	field, header, msg string
}

func (e *faultError) Error() string { return e.field + ": " + e.msg }

// faultJSON is a fault as scripted in POST /_sandbox/script, e.g.
// {"endpoint":"jira.create_issue","delay":"500ms","hold":"h1","detach":true,"status":503,
// "fail_after_commit":"drop","set_cookie":true,"body_bytes":1024,"success_status":202,"gzip":true}.
// fail_after_commit is "drop" or a status, as a string or a number.
type faultJSON struct {
	Endpoint        string          `json:"endpoint,omitempty"`
	Delay           string          `json:"delay,omitempty"`
	Hold            string          `json:"hold,omitempty"`
	Detach          bool            `json:"detach,omitempty"`
	Status          int             `json:"status,omitempty"`
	FailAfterCommit json.RawMessage `json:"fail_after_commit,omitempty"`
	SetCookie       bool            `json:"set_cookie,omitempty"`
	BodyBytes       int             `json:"body_bytes,omitempty"`
	SuccessStatus   int             `json:"success_status,omitempty"`
	Gzip            bool            `json:"gzip,omitempty"`
}

// toFault validates fj. Its errors are *faultError, which name the field as a script writes it
// ("status: 200 is not between 400 and 599") and as a header (X-Sandbox-Status).
func (fj faultJSON) toFault() (fault, error) {
	f := fault{endpoint: fj.Endpoint, hold: fj.Hold, detach: fj.Detach, status: fj.Status, setCookie: fj.SetCookie, bodyBytes: fj.BodyBytes,
		success: fj.SuccessStatus, gzip: fj.Gzip}
	if fj.Endpoint != "" && !slices.Contains(apiEndpoints, fj.Endpoint) {
		return fault{}, &faultError{"endpoint", "endpoint", fmt.Sprintf("unknown endpoint %q (one of %s)", fj.Endpoint, strings.Join(apiEndpoints, ", "))}
	}
	if fj.Delay != "" {
		d, err := time.ParseDuration(fj.Delay)
		if err != nil || d < 0 {
			return fault{}, &faultError{"delay", headerDelay, fmt.Sprintf("%q is not a duration such as 500ms", fj.Delay)}
		}
		f.delay = d
	}
	if fj.Status != 0 && !isErrorStatus(fj.Status) {
		return fault{}, &faultError{"status", headerStatus, fmt.Sprintf("%d is not between 400 and 599", fj.Status)}
	}
	if len(fj.FailAfterCommit) > 0 {
		n, err := parseAfterCommit(fj.FailAfterCommit)
		if err != nil {
			return fault{}, &faultError{"fail_after_commit", headerFailAfterCommit, err.Error()}
		}
		f.afterCommit = n
	}
	if fj.BodyBytes < 0 || fj.BodyBytes > maxPadBytes {
		return fault{}, &faultError{"body_bytes", headerBodyBytes, fmt.Sprintf("%d is not between 0 and %d", fj.BodyBytes, maxPadBytes)}
	}
	if fj.SuccessStatus != 0 && (fj.SuccessStatus < 200 || fj.SuccessStatus > 299) {
		return fault{}, &faultError{"success_status", headerSuccessStatus, fmt.Sprintf("%d is not between 200 and 299", fj.SuccessStatus)}
	}
	return f, nil
}

// parseAfterCommit reads "drop", a status between 400 and 599, or that status as a string.
func parseAfterCommit(raw json.RawMessage) (int, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, err
	}
	s := fmt.Sprint(v)
	if s == "drop" {
		return dropConnection, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || !isErrorStatus(n) {
		return 0, fmt.Errorf("%s is neither \"drop\" nor a status between 400 and 599", raw)
	}
	return n, nil
}

func isErrorStatus(n int) bool { return n >= 400 && n <= 599 }

// toJSON is the inverse of faultJSON.toFault.
func (f fault) toJSON() faultJSON {
	fj := faultJSON{Endpoint: f.endpoint, Hold: f.hold, Detach: f.detach, Status: f.status, SetCookie: f.setCookie, BodyBytes: f.bodyBytes,
		SuccessStatus: f.success, Gzip: f.gzip}
	if f.delay > 0 {
		fj.Delay = f.delay.String()
	}
	switch f.afterCommit {
	case 0:
	case dropConnection:
		fj.FailAfterCommit = json.RawMessage(`"drop"`)
	default:
		fj.FailAfterCommit = json.RawMessage(strconv.Itoa(f.afterCommit))
	}
	return fj
}

// String describes f for logs and problem bodies, e.g. "delay=500ms,status=503", "script:none".
func (f fault) String() string {
	var parts []string
	if f.delay > 0 {
		parts = append(parts, "delay="+f.delay.String())
	}
	if f.hold != "" {
		parts = append(parts, "hold="+f.hold)
	}
	if f.detach {
		parts = append(parts, "detach")
	}
	if f.status != 0 {
		parts = append(parts, "status="+strconv.Itoa(f.status))
	}
	switch f.afterCommit {
	case 0:
	case dropConnection:
		parts = append(parts, "fail_after_commit=drop")
	default:
		parts = append(parts, "fail_after_commit="+strconv.Itoa(f.afterCommit))
	}
	if f.setCookie {
		parts = append(parts, "set_cookie")
	}
	if f.bodyBytes > 0 {
		parts = append(parts, "body_bytes="+strconv.Itoa(f.bodyBytes))
	}
	if f.success != 0 {
		parts = append(parts, "success_status="+strconv.Itoa(f.success))
	}
	if f.gzip {
		parts = append(parts, "gzip")
	}
	s := strings.Join(parts, ",")
	if s == "" {
		s = "none"
	}
	if f.scripted {
		s = "script:" + s
	}
	return s
}
