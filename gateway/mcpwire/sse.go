package mcpwire

import (
	"bytes"
	"errors"
	"io"
	"strings"
)

// Event is one server-sent event (text/event-stream, WHATWG HTML §9.2 "Server-sent events").
type Event struct {
	Event string // the event type ("" = "message")
	Data  []byte // the data lines joined by "\n"
	// ID is the last event ID of the stream when the event was dispatched (an id field persists
	// across events, as the standard says): read, never forwarded.
	ID    string
	Retry string // the event's retry field when it was all ASCII digits: read, never forwarded
}

// ErrEventTooLarge is Reader.Next's error for an event (or a line) longer than its bound.
var ErrEventTooLarge = errors.New("mcpwire: server-sent event too large")

// Reader reads server-sent events: lines end in CR, LF or CRLF, a leading byte order mark is
// skipped, comments and unknown fields are ignored, a blank line dispatches the event (not when
// it has no data field), and a last event not ended by a blank line is never dispatched.
type Reader struct {
	r    io.Reader
	max  int
	buf  []byte // bytes read and not yet consumed: buf[pos:end]
	pos  int
	end  int
	line []byte // a line cut by the end of buf, continued by the next read
	// crlf: the last line ended in CR, so an LF right after it belongs to it.
	crlf    bool
	started bool // the byte order mark check is done
	err     error

	// The event being read.
	event   []byte
	data    []byte
	hasData bool
	size    int // bytes of the fields read for the event
	lastID  string
	retry   string
	pending bool // some field line was read since the last dispatch
}

// NewReader returns a Reader of r whose events (their field lines together) and lines (comments
// too) are at most maxEventBytes long: a longer one is ErrEventTooLarge.
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	return &Reader{r: r, max: maxEventBytes, buf: make([]byte, min(max(maxEventBytes, 64), 32<<10))}
}

// Next returns the next event: io.EOF at a clean end (nothing after the last blank line but
// comments), io.ErrUnexpectedEOF when the stream ends in the middle of an event, or the read error.
func (r *Reader) Next() (*Event, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return nil, err
		}
		if ev := r.field(line); ev != nil {
			return ev, nil
		}
		if r.size > r.max {
			return nil, ErrEventTooLarge
		}
	}
}

// readLine returns the next line without its end; it aliases buf or r.line until the next call.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if r.pos == r.end {
			if err := r.fill(); err != nil {
				if err == io.EOF && (len(r.line) > 0 || r.pending) {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			continue
		}
		if r.crlf {
			r.crlf = false
			if r.buf[r.pos] == '\n' {
				r.pos++
				continue
			}
		}
		rest := r.buf[r.pos:r.end]
		i := bytes.IndexAny(rest, "\r\n")
		if i < 0 {
			if r.size+len(r.line)+len(rest) > r.max {
				return nil, ErrEventTooLarge
			}
			r.line = append(r.line, rest...)
			r.pos = r.end
			continue
		}
		r.crlf = rest[i] == '\r'
		r.pos += i + 1
		if len(r.line) == 0 {
			return rest[:i], nil
		}
		r.line = append(r.line, rest[:i]...)
		return r.line, nil
	}
}

// fill reads more bytes into buf (all of it consumed) and skips a byte order mark at the start.
func (r *Reader) fill() error {
	if r.err != nil {
		return r.err
	}
	n, err := r.r.Read(r.buf[:cap(r.buf)])
	r.pos, r.end = 0, n
	if err != nil {
		r.err = err
	}
	if !r.started && n > 0 {
		// The mark may arrive cut over reads: read until three bytes or the end decide.
		for r.end < 3 && r.err == nil && bytes.HasPrefix([]byte(bom), r.buf[:r.end]) {
			m, err := r.r.Read(r.buf[r.end:])
			r.end += m
			if err != nil {
				r.err = err
			}
		}
		r.started = true
		if bytes.HasPrefix(r.buf[:r.end], []byte(bom)) {
			r.pos = len(bom)
		}
	}
	if n == 0 && r.err == nil {
		return nil // a reader may return 0, nil: read again
	}
	if r.pos == r.end && r.err != nil {
		return r.err
	}
	return nil
}

const bom = "\uFEFF"

// field processes one line (WHATWG HTML §9.2.6 "Interpreting an event stream") and returns the
// event a blank line dispatches.
func (r *Reader) field(line []byte) *Event {
	if len(line) == 0 {
		return r.dispatch()
	}
	if line[0] == ':' { // a comment
		return nil
	}
	r.pending = true
	r.size += len(line) + 1
	name, value, _ := bytes.Cut(line, []byte(":"))
	value, _ = bytes.CutPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		r.event = append(r.event[:0], value...)
	case "data":
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data, r.hasData = append(r.data, value...), true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = string(value)
		}
	case "retry":
		if len(value) > 0 && len(bytes.TrimLeft(value, "0123456789")) == 0 {
			r.retry = string(value)
		}
	}
	return nil
}

// dispatch ends the event at a blank line: no data field, no event.
func (r *Reader) dispatch() *Event {
	var ev *Event
	if r.hasData {
		ev = &Event{Event: string(r.event), Data: r.data, ID: r.lastID, Retry: r.retry}
		r.data = nil // the event owns its data
	}
	r.event, r.hasData, r.size, r.retry, r.pending = r.event[:0], false, 0, "", false
	return ev
}

// WriteEvent writes ev as "event: …\ndata: …\n\n" in one Write (data split into lines at CR, LF
// and CRLF; no event line when the type is ""), without id: and retry: (docs/contract.md §7
// Capture). An event type holding a line end is an error.
func WriteEvent(w io.Writer, ev *Event) error {
	if strings.ContainsAny(ev.Event, "\r\n") {
		return errors.New("mcpwire: an event type holds a line end")
	}
	b := make([]byte, 0, len("event: \n\n")+len(ev.Event)+len(ev.Data)+16)
	if ev.Event != "" {
		b = append(append(append(b, "event: "...), ev.Event...), '\n')
	}
	data := ev.Data
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			b = append(append(append(b, "data: "...), data...), '\n')
			break
		}
		b = append(append(append(b, "data: "...), data[:i]...), '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	_, err := w.Write(append(b, '\n'))
	return err
}
