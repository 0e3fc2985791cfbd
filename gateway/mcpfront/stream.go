package gateway

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idemgateway/idemgateway/gateway/mcpwire"
)

// Pass-through answers of kind: mcp routes (docs/contract.md §7): bounded between reads, and
// read by the tool book (mcptools.go) for tool lists and list_changed.

// watchStream bounds a pass-through answer by the upstream's stream_idle_timeout between reads,
// and lets the tool book learn from it (mcptools.go): a tools/list answer (x.learn) is read whole
// first (up to maxToolListBytes), so that the client's next call meets what it says; any SSE
// stream is watched for notifications/tools/list_changed.
func (x *exchange) watchStream(resp *http.Response) {
	x.idle.Reset(x.rt.Upstream.MCP.StreamIdleTimeout)
	mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	sse := strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
	if x.learn && x.g.tools.learns(x.rt) {
		var read bytes.Buffer
		if msg := toolListAnswer(io.TeeReader(io.LimitReader(resp.Body, maxToolListBytes), &read), sse); msg != nil {
			x.g.tools.learn(x.rt, msg)
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(&read, resp.Body), resp.Body}
	}
	// Notifications come in SSE streams only; the book has something to drop only when it learns
	// or lists.
	resp.Body = &watchedBody{ReadCloser: resp.Body, x: x, idle: x.rt.Upstream.MCP.StreamIdleTimeout,
		seen: !sse || !(x.g.tools.learns(x.rt) || x.rt.Upstream.MCP.DiscoverTools)}
}

// toolListAnswer reads a tools/list answer from r up to its response: the whole of a JSON
// answer, the events of an SSE answer up to the first response (the stream may stay open after
// it). nil when there is none.
func toolListAnswer(r io.Reader, sse bool) []byte {
	if !sse {
		msg, err := io.ReadAll(r)
		if err != nil {
			return nil
		}
		return msg
	}
	events := mcpwire.NewReader(r, maxToolListBytes)
	for {
		ev, err := events.Next()
		if err != nil {
			return nil
		}
		if m, err := mcpwire.Parse(ev.Data); err == nil && m.Kind == mcpwire.Response {
			return ev.Data
		}
	}
}

// watchedBody is a pass-through answer's body (watchStream).
type watchedBody struct {
	io.ReadCloser
	x    *exchange
	idle time.Duration
	tail []byte // the last bytes read, for a list_changed split across reads
	seen bool   // list_changed seen, or not looked for
}

// maxToolListBytes bounds the tools/list answer the gateway reads whole to learn from; a longer
// one passes through unread.
const maxToolListBytes = 4 << 20

// listChanged is the method as a JSON string token: quotes in a string value are escaped, so a
// tool's result that merely names the method does not match, where the bare name would.
var listChanged = []byte(`"` + methodListChanged + `"`)

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.x.idle.Reset(b.idle)
	if n > 0 && !b.seen && b.sees(p[:n]) {
		b.seen = true
		b.x.g.tools.invalidate(b.x.rt)
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
