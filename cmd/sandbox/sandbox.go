package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Endpoint names: the keys of the counters in GET /_sandbox/stats and the endpoint of log lines and
// scripted faults.
const (
	jiraCreateIssue     = "jira.create_issue"
	jiraGetIssue        = "jira.get_issue"
	zendeskCreateTicket = "zendesk.create_ticket"
	linearIssueCreate   = "linear.issue_create"
	stripeCreateRefund  = "stripe.create_refund"
	ticketsCreateTicket = "tickets.create_ticket"
	ticketsFindTickets  = "tickets.find_tickets"
	jsonrpcCreateTicket = "jsonrpc.create_ticket"
	jiraAddAttachment   = "jira.add_attachment"
)

// effectEndpoints are the endpoints (and MCP tools, mcp.go) that perform a side effect; the stats
// list each of them, zero or not. apiEndpoints are all the endpoints and tools that play a tool's API.
var (
	effectEndpoints = []string{jiraCreateIssue, zendeskCreateTicket, linearIssueCreate, stripeCreateRefund, ticketsCreateTicket,
		jsonrpcCreateTicket, jiraAddAttachment, mcpCreateTicket, mcpSlowCreate, mcpProgressCreate, mcpBrokenCreate, mcpConfirmCreate}
	apiEndpoints = append([]string{jiraGetIssue, ticketsFindTickets, mcpSearchTickets, mcpFailingCreate}, effectEndpoints...)
)

// maxRequestBytes bounds a request body; larger ones get 413.
const maxRequestBytes = 10 << 20

// sandbox is the HTTP handler of the sandbox: the tool APIs, the admin endpoints under /_sandbox/
// and the fault injection. It is safe for concurrent use.
type sandbox struct {
	log *slog.Logger
	mux *http.ServeMux
	// after is the timer of X-Sandbox-Delay (time.After); a test replaces it to end a delay when
	// it decides.
	after func(time.Duration) <-chan time.Time
	// keyMu serialises the requests with a forwarded key at their side effect (dedup.go).
	keyMu sync.Mutex

	// mu guards everything below. A side effect and its count change under one lock (see commit),
	// so the counters never disagree with the objects created.
	mu       sync.Mutex
	effects  counter
	requests counter
	// cancelled counts the MCP tool calls whose client cancelled them before they finished (mcp.go).
	cancelled counter
	script    []fault          // queued by POST /_sandbox/script, oldest first
	inFlight  int64            // requests to tool endpoints being served
	holds     map[string]*hold // by name (holds.go)
	keyed     map[string]reply // the answer of the first effect by endpoint and forwarded key (dedup.go)
	jira      jiraState
	zendesk   zendeskState
	linear    linearState
	tickets   ticketsState
	// mcpTickets are the tickets the MCP tools created, oldest first (mcp.go).
	mcpTickets []ticket
}

// newSandbox returns a sandbox with zero counters that logs one line per request to log.
func newSandbox(log *slog.Logger) *sandbox {
	s := &sandbox{
		log:     log,
		mux:     http.NewServeMux(),
		after:   time.After,
		holds:   make(map[string]*hold),
		jira:    newJiraState(),
		zendesk: newZendeskState(),
		linear:  newLinearState(),
		tickets: newTicketsState(),
	}
	s.resetLocked()

	s.mux.Handle("POST /rest/api/3/issue", s.api(jiraCreateIssue, s.jiraCreateIssue))
	s.mux.Handle("GET /rest/api/3/issue/{id}", s.api(jiraGetIssue, s.jiraGetIssue))
	s.mux.Handle("POST /rest/api/3/issue/{id}/attachments", s.api(jiraAddAttachment, s.jiraAddAttachment))
	s.mux.Handle("POST /api/v2/tickets.json", s.api(zendeskCreateTicket, s.zendeskCreateTicket))
	s.mux.Handle("POST /graphql", s.api(linearIssueCreate, s.linearGraphQL))
	s.mux.Handle("POST /v1/refunds", s.api(stripeCreateRefund, s.stripeCreateRefund))
	s.mux.Handle("POST /v1/tickets", s.api(ticketsCreateTicket, s.ticketsCreateTicket))
	s.mux.Handle("GET /v1/tickets", s.api(ticketsFindTickets, s.ticketsFindTickets))
	s.mux.Handle("POST /jsonrpc", s.api(jsonrpcCreateTicket, s.jsonrpcCreate))
	s.mountMCP()

	s.mux.Handle("GET /_sandbox/stats", s.admin("sandbox.stats", s.serveStats))
	s.mux.Handle("POST /_sandbox/reset", s.admin("sandbox.reset", s.serveReset))
	s.mux.Handle("GET /_sandbox/script", s.admin("sandbox.script", s.serveScript))
	s.mux.Handle("POST /_sandbox/script", s.admin("sandbox.script", s.serveSetScript))
	s.mux.Handle("GET /_sandbox/holds", s.admin("sandbox.holds", s.serveHolds))
	s.mux.Handle("POST /_sandbox/release", s.admin("sandbox.release", s.serveRelease))
	return s
}

// resetLocked zeroes the counters, clears the script, ends the holds without effect and forgets
// the objects created and the forwarded keys. Identifier sequences go on, so an id is never
// handed out twice by one process. s.mu must be held.
func (s *sandbox) resetLocked() {
	s.effects = newCounter(effectEndpoints)
	s.requests = newCounter(apiEndpoints)
	s.cancelled = newCounter(mcpTools)
	s.script = nil
	s.abortHoldsLocked()
	s.keyed = make(map[string]reply)
	s.jira.forget()
	s.zendesk.forget()
	s.tickets.forget()
	s.mcpTickets = nil
}

// commit performs a side effect: it runs apply and counts one effect of endpoint, under s.mu.
// apply must not take s.mu.
func (s *sandbox) commit(endpoint string, apply func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	apply()
	s.effects.add(endpoint)
}

// call is one request to a tool API, its body already read.
type call struct {
	r    *http.Request
	body []byte
	base string // scheme://host the client used, for the URLs in responses
}

// reply is what a tool API answers. The fault's after-commit action, Set-Cookie and padding apply
// to a success only (see succeeded).
type reply struct {
	status   int
	header   http.Header // extra response headers, e.g. Location
	body     any         // encoded as JSON
	effect   bool        // a side effect was performed
	id       string      // the created or read object, for the log
	rejected bool        // refused with a 2xx status, as GraphQL answers errors
}

// succeeded reports whether the call did what it was asked.
func (rep reply) succeeded() bool { return rep.status < 300 && !rep.rejected }

// apiHandler plays one endpoint of a tool API: it validates the call and, when the call is valid,
// performs the side effect through commit.
type apiHandler func(c *call) reply

// api wraps h with the fault injection, in this order: read the body; take the fault (the next
// scripted one, else the X-Sandbox-* headers); delay; hold; answer an injected status without
// acting; run h (or answer the reply stored for the request's forwarded key, dedup.go); break the
// connection or answer an error after acting; else add Set-Cookie and padding. Unless the fault
// detaches the request, a client that goes away during the delay or the hold ends the request
// without effect.
func (s *sandbox) api(endpoint string, h apiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := entryFrom(r.Context())
		e.endpoint = endpoint
		s.mu.Lock()
		s.requests.add(endpoint)
		s.inFlight++
		s.mu.Unlock()
		defer func() { // also when the handler aborts
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()

		// Read the whole body first: the server notices that the client went away (and ends the
		// request's context) only once the body has been read.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				writeProblem(w, http.StatusRequestEntityTooLarge, "request body larger than "+strconv.Itoa(maxRequestBytes)+" bytes", false, "")
				return
			}
			writeProblem(w, http.StatusBadRequest, "reading the request body: "+err.Error(), false, "")
			return
		}
		f, err := s.faultFor(endpoint, r.Header)
		if err != nil {
			e.fault = "invalid"
			writeProblem(w, http.StatusBadRequest, err.Error(), false, "")
			return
		}
		e.fault = f.String()

		// gone is closed when the client goes away; a detached request never sees it, and acts
		// as an upstream that finishes what it accepted.
		gone := r.Context().Done()
		cr := r
		if f.detach {
			gone = nil
			cr = r.WithContext(context.WithoutCancel(r.Context()))
		}
		if f.delay > 0 {
			select {
			case <-s.after(f.delay):
			case <-gone:
			}
		}
		if isClosed(gone) {
			// Nobody is waiting for an answer: act as an upstream that died before acting.
			e.outcome = "canceled"
			panic(http.ErrAbortHandler)
		}
		if f.hold != "" && !s.waitHold(f.hold, gone) {
			e.outcome = "aborted" // by a reset or the shutdown
			if isClosed(gone) {
				e.outcome = "canceled"
			}
			panic(http.ErrAbortHandler)
		}
		if f.status != 0 {
			writeProblem(w, f.status, "injected by the sandbox before acting; no side effect was performed", false, f.String())
			return
		}

		c := &call{r: cr, body: body, base: baseURL(r)}
		var rep reply
		if key := dedupKey(r.Header); key != "" {
			rep, e.keyReplayed = s.keyedCall(endpoint, key, h, c)
		} else {
			rep = h(c)
		}
		e.effect, e.id = rep.effect, rep.id
		if r.Context().Err() != nil {
			// The client went away before the answer (a detached request): whatever was done
			// stays done, and the answer below goes to nobody.
			e.outcome = "abandoned"
		}
		if !rep.succeeded() {
			writeJSON(w, rep.status, rep.header, rep.body, 0)
			return
		}
		switch {
		case f.afterCommit == dropConnection:
			e.outcome = "dropped"
			dropConn(w)
			return
		case f.afterCommit != 0:
			detail := "injected by the sandbox after acting; the side effect WAS performed"
			if !rep.effect {
				detail = "injected by the sandbox after a read, which has no side effect"
			}
			writeProblem(w, f.afterCommit, detail, rep.effect, f.String())
			return
		}
		if f.setCookie {
			http.SetCookie(w, &http.Cookie{Name: "sandbox_session", Value: randomToken(24), Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		}
		if f.gzip {
			w.Header().Add("Vary", "Accept-Encoding")
			if acceptsGzip(r.Header) {
				gz := &gzipWriter{ResponseWriter: w}
				defer gz.close()
				w = gz
			}
		}
		status := rep.status
		if f.success != 0 {
			status = f.success
		}
		writeJSON(w, status, rep.header, rep.body, f.bodyBytes)
	})
}

// acceptsGzip reports whether h's Accept-Encoding allows gzip (RFC 9110 §12.5.3; a q of 0
// refuses it).
func acceptsGzip(h http.Header) bool {
	for _, v := range h.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q := 1.0
			if _, v, ok := strings.Cut(params, "q="); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
			return q > 0
		}
	}
	return false
}

// gzipWriter encodes what is written to it with gzip: Content-Encoding: gzip, and the
// Content-Length of the plain body dropped. close ends the stream.
type gzipWriter struct {
	http.ResponseWriter
	gz *gzip.Writer
}

func (g *gzipWriter) WriteHeader(status int) {
	g.Header().Del("Content-Length")
	g.Header().Set("Content-Encoding", "gzip")
	g.gz = gzip.NewWriter(g.ResponseWriter)
	g.ResponseWriter.WriteHeader(status)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if g.gz == nil {
		g.WriteHeader(http.StatusOK)
	}
	return g.gz.Write(b)
}

func (g *gzipWriter) close() {
	if g.gz != nil {
		g.gz.Close()
	}
}

// isClosed reports whether c is closed; a nil c never is. A client that went away when a wait
// ended wins over the wait's end, so that the outcome does not depend on which came first.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// admin wraps an endpoint under /_sandbox/ so that it is logged under name.
func (s *sandbox) admin(name string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entryFrom(r.Context()).endpoint = name
		h(w, r)
	})
}

// dropConn closes the client's connection without writing anything: the client sees the
// connection break after its request was sent.
func dropConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 cannot hijack; aborting resets the stream without a response.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// baseURL is the scheme and host the client addressed, e.g. "http://127.0.0.1:9000".
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if host == "" {
		host = "localhost"
	}
	return scheme + "://" + host
}

// ServeHTTP routes the request and logs one line for it, also when the handler aborts it.
func (s *sandbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	e := &logEntry{endpoint: "-", fault: "none"}
	rec := &recorder{ResponseWriter: w}
	defer func() { s.logRequest(r, rec, e, time.Since(start)) }()
	s.mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), entryKey{}, e)))
}

// logEntry collects what the handlers learn about a request for its log line.
type logEntry struct {
	endpoint string
	fault    string
	effect   bool
	id       string
	outcome  string // "dropped", "canceled" or "aborted" when no response was written; "abandoned" when nobody read it
	// keyReplayed: the answer was the one stored for the request's forwarded key (dedup.go).
	keyReplayed bool
}

type entryKey struct{}

// entryFrom returns the request's log entry, or a throwaway one outside ServeHTTP.
func entryFrom(ctx context.Context) *logEntry {
	if e, ok := ctx.Value(entryKey{}).(*logEntry); ok {
		return e
	}
	return &logEntry{}
}

func (s *sandbox) logRequest(r *http.Request, rec *recorder, e *logEntry, d time.Duration) {
	attrs := []slog.Attr{
		slog.String("endpoint", e.endpoint),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
	}
	switch {
	case e.outcome != "":
		attrs = append(attrs, slog.String("status", e.outcome))
	case rec.status == 0:
		attrs = append(attrs, slog.Int("status", http.StatusOK))
	default:
		attrs = append(attrs, slog.Int("status", rec.status))
	}
	attrs = append(attrs, slog.Bool("effect", e.effect), slog.String("fault", e.fault))
	if e.id != "" {
		attrs = append(attrs, slog.String("id", e.id))
	}
	if e.keyReplayed {
		attrs = append(attrs, slog.Bool("key_replayed", true))
	}
	attrs = append(attrs, slog.Duration("duration", d))
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

// recorder remembers the status written through it. Unwrap lets http.ResponseController reach
// the connection to hijack it.
type recorder struct {
	http.ResponseWriter
	status int
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.ResponseWriter.Write(b)
}

func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// writeJSON answers status with v encoded as JSON, and the extra headers; a status that has no
// body (204) with the headers alone. When pad > 0, v must encode as a non-empty JSON object; a
// member "sandbox_padding" whose string value is pad bytes of "x" is appended to it. Strings are
// written as most APIs write them, "<", ">" and "&" as they are (not as \u003c…, Go's default).
func writeJSON(w http.ResponseWriter, status int, header http.Header, v any, pad int) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "encoding the response: "+err.Error(), false, "")
		return
	}
	for k, vs := range header {
		w.Header()[k] = vs
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if pad <= 0 || len(b) < 3 || b[0] != '{' {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(status)
		w.Write(b)
		return
	}
	head := append(b[:len(b)-1:len(b)-1], `,"sandbox_padding":"`...)
	const tail = `"}`
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+pad+len(tail)))
	w.WriteHeader(status)
	w.Write(head)
	chunk := make([]byte, min(pad, 64<<10))
	for i := range chunk {
		chunk[i] = 'x'
	}
	for left := pad; left > 0; left -= len(chunk) {
		if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
			return
		}
	}
	io.WriteString(w, tail)
}

// problem is an RFC 9457 problem detail, with two members of the sandbox's own.
type problem struct {
	Type            string `json:"type"`
	Title           string `json:"title"`
	Status          int    `json:"status"`
	Detail          string `json:"detail"`
	EffectPerformed bool   `json:"effect_performed"`
	SandboxFault    string `json:"sandbox_fault,omitempty"`
}

// writeProblem answers status with an application/problem+json body. 429 and 503 carry
// Retry-After: 1.
func writeProblem(w http.ResponseWriter, status int, detail string, effect bool, fault string) {
	b, _ := json.Marshal(problem{
		Type:            "about:blank",
		Title:           http.StatusText(status),
		Status:          status,
		Detail:          detail,
		EffectPerformed: effect,
		SandboxFault:    fault,
	})
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// decodeJSON decodes one JSON value from body into v, keeping numbers as json.Number so that
// echoed numbers keep every digit.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("invalid character after top-level value")
	}
	return nil
}
