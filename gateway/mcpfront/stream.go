package mcpfront

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/idemgateway/idemgateway/gateway/mcpwire"
	"github.com/idemgateway/idemgateway/routes"
)

// Pass-through answers of kind: mcp routes (docs/contract.md §7), read by the tool book
// (tools.go) for tool lists and list_changed. The pipeline bounds them by stream_idle_timeout
// between reads (gateway.Exchange.Stream).

// watch lets the tool book learn from resp, a pass-through answer on rt, and has tool lists
// declare the key argument: a tools/list answer (learn) is read first (up to maxToolListBytes),
// learnt from, so that the client's next call meets what it says, and rewritten with the key
// argument in its tools' schemas (declareKeys) when rt reads one; an SSE stream is watched for
// notifications/tools/list_changed when the book has something to drop (it learns or lists rt's
// tools).
func (f *Front) watch(rt *routes.Route, learn bool, resp *http.Response) {
	mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	sse := strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
	learns := f.tools.learns(rt)
	if declares := rt.MCP.KeyArguments(); learn && (learns || declares) {
		var read bytes.Buffer
		msg := toolListAnswer(io.TeeReader(io.LimitReader(resp.Body, maxToolListBytes), &read), sse)
		if msg != nil && learns {
			f.tools.learn(rt, msg)
		}
		head := read.Bytes()
		if msg != nil && declares {
			head = f.declareIn(rt, head, msg, resp)
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	}
	if sse && (learns || rt.Upstream.MCP.DiscoverTools) { // notifications come in SSE streams only
		resp.Body = &watchedBody{ReadCloser: resp.Body, book: &f.tools, rt: rt}
	}
}

// declareIn returns head, the bytes of resp read so far, with msg, the tools/list response among
// them (all of a JSON answer; one data line of an SSE event, as every SDK writes it), rewritten by
// declareKeys; resp's length is then unknown. head is unchanged when there is nothing to declare,
// or when msg is not found whole in head (an event split over several data lines).
func (f *Front) declareIn(rt *routes.Route, head, msg []byte, resp *http.Response) []byte {
	at := bytes.Index(head, msg)
	if at < 0 {
		return head
	}
	out, ok := f.declareKeys(rt, msg)
	if !ok {
		return head
	}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return slices.Concat(head[:at], out, head[at+len(msg):])
}

// toolListAnswer reads a tools/list answer from r up to its response, and returns that message:
// read from the whole of a JSON answer, or from the events of an SSE answer up to the first that
// holds a response (the stream may stay open after it); alone or in a batch (responseIn). nil
// when there is none.
func toolListAnswer(r io.Reader, sse bool) []byte {
	if !sse {
		data, err := io.ReadAll(r)
		if err != nil {
			return nil
		}
		return responseIn(data)
	}
	events := mcpwire.NewReader(r, maxToolListBytes)
	for {
		ev, err := events.Next()
		if err != nil {
			return nil
		}
		if msg := responseIn(ev.Data); msg != nil {
			return msg
		}
	}
}

// responseIn returns the first JSON-RPC response in data, one message or a batch of them
// (mcpwire.Messages), exactly as sent; nil when there is none.
func responseIn(data []byte) []byte {
	for _, msg := range mcpwire.Messages(data) {
		if m, err := mcpwire.Parse(msg); err == nil && m.Kind == mcpwire.Response {
			return msg
		}
	}
	return nil
}

// maxToolListBytes bounds the tools/list answer the gateway reads whole to learn from; a longer
// one passes through unread.
const maxToolListBytes = 4 << 20

// watchedBody is a pass-through SSE answer's body, watched for list_changed (watch).
type watchedBody struct {
	io.ReadCloser
	book *toolBook
	rt   *routes.Route
	tail []byte // the last bytes read, for a list_changed split across reads
	seen bool   // list_changed seen
}

// listChanged is the method as a JSON string token: quotes in a string value are escaped, so a
// tool's result that merely names the method does not match, where the bare name would.
var listChanged = []byte(`"` + methodListChanged + `"`)

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.seen && b.sees(p[:n]) {
		b.seen = true
		b.book.invalidate(b.rt)
	}
	return n, err
}

// sees reports whether listChanged is in p, or across the seam of the bytes read before it, and
// keeps the last bytes of p for the next read's seam.
func (b *watchedBody) sees(p []byte) bool {
	k := len(listChanged) - 1
	seam := append(b.tail, p[:min(len(p), k)]...) // at most 2k bytes
	found := bytes.Contains(seam, listChanged) || bytes.Contains(p, listChanged)
	if len(p) >= k {
		b.tail = append(b.tail[:0], p[len(p)-k:]...)
	} else {
		b.tail = append(b.tail[:0], seam[max(0, len(seam)-k):]...)
	}
	return found
}
