package mcpfront

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/idemgateway/idemgateway/canonical"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/record"
	"github.com/idemgateway/idemgateway/routes"
)

// Capture of a guarded tools/call's answer (docs/contract.md §7 Capture). A JSON answer is read
// whole; an SSE answer is passed on event by event, notifications as they come and without the
// SSE id: and retry: fields (the gateway's stream is not the server's: a client must not resume
// it there), and the final response, the message whose id is the call's (alone, or in a batch:
// mcpwire.Messages), is held until the record is settled. The record settles on what that
// message says (finalClass), never on the HTTP status of a 2xx.

// maxEventBytes bounds one SSE event, or the JSON answer, of a guarded call: a longer one breaks
// the answer, and the outcome is unknown.
const maxEventBytes = 16 << 20

// errNoFinal says an answer ended without the call's final response.
var errNoFinal = errors.New("the tool server's answer ended without the call's response")

// Capture settles x's record from resp, a 2xx answer to the call (gateway.Capturer).
func (m *mcpTool) Capture(x *gateway.Exchange, resp *http.Response) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "text/event-stream":
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Body = &sseCapture{m: m, x: x, src: resp.Body, events: mcpwire.NewReader(resp.Body, maxEventBytes)}
		return
	case "application/json":
		// Read whole: the answer is the final response, settled before a byte of it is sent.
		// The upstream's timeout bounds the read in time, maxEventBytes in memory.
		msg, err := io.ReadAll(io.LimitReader(resp.Body, maxEventBytes+1))
		if err != nil {
			err = fmt.Errorf("%w: %v", errNoFinal, timedOut(x, err))
		}
		if err == nil && len(msg) > maxEventBytes {
			err = fmt.Errorf("%w: a JSON answer of more than %d bytes", errNoFinal, maxEventBytes)
		}
		if err == nil {
			var f *mcpwire.Final
			if f, err = m.finalIn(msg); err == nil {
				m.settleFinal(x, f)
				replaceBody(resp, msg, "application/json")
				return
			}
		}
		m.answerInstead(x, resp, err)
	default:
		m.answerInstead(x, resp, fmt.Errorf("%w: a %d answer of type %q", errNoFinal, resp.StatusCode, ct))
	}
}

// finalIn finds the call's final response in data, one message or a batch (mcpwire.Messages):
// the first that final reads; the error of the last message read when none is, errNoFinal for
// an empty batch.
func (m *mcpTool) finalIn(data []byte) (*mcpwire.Final, error) {
	msgs := mcpwire.Messages(data)
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: an empty batch", errNoFinal)
	}
	var err error
	for _, msg := range msgs {
		var f *mcpwire.Final
		if f, err = m.final(msg); err == nil {
			return f, nil
		}
	}
	return nil, err
}

// final reads msg as the call's final response: a JSON-RPC response with the call's id.
func (m *mcpTool) final(msg []byte) (*mcpwire.Final, error) {
	f, err := mcpwire.ReadFinal(msg)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %v", errNoFinal, err)
	case !mcpwire.SameID(f.ID, m.msg.ID):
		return nil, fmt.Errorf("%w: a response to another id", errNoFinal)
	}
	return f, nil
}

// answerInstead settles an answer that holds no final response (why) as an unknown outcome, and
// replaces it by the gateway's answer, which says so, at HTTP 200 (docs/contract.md §7 Refusals):
// a client reads no body from a 202, and a 204 has none.
func (m *mcpTool) answerInstead(x *gateway.Exchange, resp *http.Response, why error) {
	msg := m.unsettled(x, why, settleWithout(x, why))
	ct := "application/json"
	if m.sse {
		msg, ct = sseEvent(msg), "text/event-stream"
	}
	replaceBody(resp, msg, ct)
	resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
}

// replaceBody makes b, of type ct, resp's body; the upstream's body is closed.
func replaceBody(resp *http.Response, b []byte, ct string) {
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	resp.Header.Set("Content-Type", ct)
}

// settleFinal settles x's record from f, the call's final response (outcome.go): a committed
// one's receipt keeps f.Member (up to the receipt limit) and the remote id it names.
func (m *mcpTool) settleFinal(x *gateway.Exchange, f *mcpwire.Final) {
	rt := x.Route()
	c := finalClass(f, rt.Tool)
	if c != gateway.Committed {
		x.Settle(c, finalDetail(f, rt.Tool))
		return
	}
	x.Record().MCPProtocolVersion = m.version
	stored := &record.Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}}
	kept := int64(len(f.Member)) <= x.ReceiptLimit()
	if kept {
		stored.Body = f.Member
	}
	// receipt pointers address the final message (/result/structuredContent/id): the member
	// holds the same path. A task handle's remote id is its task id unless the route names one.
	var taskID canonical.Pointer
	if f.Task {
		taskID = taskIDAt[f.ResultType == mcpwire.ResultTypeTask]
	}
	x.Commit(stored, kept, f.Member, taskID)
}

// taskIDAt is where a task handle's id lies in its final message: 2025-11-25's result.task, or
// (true) 2026-07-28's result, with resultType "task".
var taskIDAt = map[bool]canonical.Pointer{false: mustPointer("/result/task/taskId"), true: mustPointer("/result/taskId")}

// mustPointer parses p, a JSON Pointer written in this package.
func mustPointer(p string) canonical.Pointer {
	ptr, err := canonical.ParsePointer(p)
	if err != nil {
		panic(err)
	}
	return ptr
}

// timedOut is err, an error reading x's answer, or what caused it: the upstream timeout, or a
// shutdown that cut the call off.
func timedOut(x *gateway.Exchange, err error) error {
	if what, ok := x.TimedOut(); ok {
		return fmt.Errorf("%w %s", problem.ErrUpstreamTimeout, what)
	}
	if cut := x.CutOff(); cut != nil {
		return cut
	}
	return err
}

// ask holds the call's upstream timeout while data, an event of its answer that is a request of
// the server to the client, waits for the client's answer (asks.go), bounded by
// stream_idle_timeout.
func (m *mcpTool) ask(x *gateway.Exchange, data []byte) {
	var req mcpwire.Message
	if m.asks == nil || req.Parse(data) != nil || req.Kind != mcpwire.Request {
		return
	}
	release := x.HoldDeadline(x.Route().Upstream.MCP.StreamIdleTimeout)
	if k, ok := m.asks.opened(m.session, req.ID, release); ok {
		m.asked = append(m.asked, k)
	}
}

// endAsks records that the call ended: its asks still unanswered are answered too late.
func (m *mcpTool) endAsks() {
	if m.asks != nil && len(m.asked) > 0 {
		m.asks.ended(m.asked)
		m.asked = nil
	}
}

// settleWithout settles a call that got no final response (why) as an unknown outcome.
func settleWithout(x *gateway.Exchange, why error) gateway.Outcome {
	return x.Settle(gateway.Unknown, why.Error())
}

// sseCapture is the body the client gets of a guarded call's SSE answer.
type sseCapture struct {
	m      *mcpTool
	x      *gateway.Exchange
	src    io.ReadCloser
	events *mcpwire.Reader
	out    bytes.Buffer // what the client gets next
	done   bool         // the final response, or the gateway's answer in its place, is in out
}

func (c *sseCapture) Read(p []byte) (int, error) {
	for c.out.Len() == 0 {
		if c.done {
			return 0, io.EOF
		}
		c.next()
	}
	return c.out.Read(p)
}

// next reads one event of the upstream's stream into out: a notification or another message
// as it came, less id: and retry:; the final response once its record settled; an event that
// carries no data (a priming event, whose id is the server's) not at all. A stream that ends
// or breaks first settles unknown, and out gets the gateway's answer instead.
func (c *sseCapture) next() {
	ev, err := c.events.Next()
	if err != nil {
		why := errNoFinal
		if !errors.Is(err, io.EOF) {
			why = fmt.Errorf("%w: %v", errNoFinal, timedOut(c.x, err))
		}
		c.out.Write(sseEvent(c.m.unsettled(c.x, why, settleWithout(c.x, why))))
		c.done = true
		c.m.endAsks()
		return
	}
	if len(ev.Data) == 0 {
		return
	}
	if ev.Event == "" || ev.Event == "message" {
		// One message, or a batch of them (2025-03-26), each read in turn. A server's request may
		// carry the call's id too: only a response is final, and the first settles the record.
		// The event goes on as it came, once the record is settled.
		for _, msg := range mcpwire.Messages(ev.Data) {
			if f, err := c.m.final(msg); err != nil {
				c.m.ask(c.x, msg)
			} else if !c.done {
				c.m.settleFinal(c.x, f)
				c.done = true
			}
		}
		if c.done {
			c.m.endAsks()
		}
	}
	_ = mcpwire.WriteEvent(&c.out, &mcpwire.Event{Event: ev.Event, Data: ev.Data}) // a bytes.Buffer does not fail
}

// Close ends the answer. If the client went away before the final response, cancel: finish
// reads the upstream's stream on to it, and the record settles on what the call did
// (docs/contract.md §7 Client gone); cancel: forward stops reading, and the outcome is unknown.
// The proxy calls Close before the call returns, so the lease is held until then.
func (c *sseCapture) Close() error {
	for !c.done && c.x.Route().MCP.Cancel != routes.CancelForward {
		c.out.Reset()
		c.next()
	}
	if !c.done {
		settleWithout(c.x, fmt.Errorf("%w: the client went away (cancel: forward)", errNoFinal))
		c.done = true
	}
	c.m.endAsks()
	return c.src.Close()
}
