package mcpwire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReader(t *testing.T) {
	t.Parallel()
	msg := `{"jsonrpc":"2.0","id":1,"result":{}}`
	tests := []struct {
		name   string
		stream string
		want   []Event
		end    error
	}{
		// What the go-sdk writes (mcp/event.go writeEvent): event, id, data with a space.
		{"go-sdk event", "event: message\nid: 0_1\ndata: " + msg + "\n\n", []Event{{Event: "message", ID: "0_1", Data: []byte(msg)}}, io.EOF},
		{"no space after the colon", "data:" + msg + "\n\n", []Event{{Data: []byte(msg)}}, io.EOF},
		{"only one space removed", "data:  x\n\n", []Event{{Data: []byte(" x")}}, io.EOF},
		{"CRLF", "event: message\r\ndata: a\r\n\r\n", []Event{{Event: "message", Data: []byte("a")}}, io.EOF},
		{"CR", "data: a\rdata: b\r\rdata: c\r\r", []Event{{Data: []byte("a\nb")}, {Data: []byte("c")}}, io.EOF},
		{"mixed line ends", "data: a\r\ndata: b\ndata: c\r\n\ndata: d\n\r", []Event{{Data: []byte("a\nb\nc")}, {Data: []byte("d")}}, io.EOF},
		{"byte order mark", "\uFEFFdata: a\n\n", []Event{{Data: []byte("a")}}, io.EOF},
		{"only one byte order mark", "\uFEFF\uFEFFdata: a\n\n", nil, io.EOF}, // the field is "\uFEFFdata"
		{"comments", ": ping\n:\ndata: a\n: inside\ndata: b\n\n: bye\n", []Event{{Data: []byte("a\nb")}}, io.EOF},
		{"empty data dispatched", "data:\n\ndata: \n\n", []Event{{}, {}}, io.EOF},
		{"empty data line joins", "data\ndata\n\n", []Event{{Data: []byte("\n")}}, io.EOF},
		{"no data, no event", "event: x\nid: 7\n\ndata: a\n\n", []Event{{Data: []byte("a"), ID: "7"}}, io.EOF},
		{"event type reset after dispatch", "event: x\ndata: a\n\ndata: b\n\n", []Event{{Event: "x", Data: []byte("a")}, {Data: []byte("b")}}, io.EOF},
		{"id persists, NUL id ignored", "id: 1\ndata: a\n\ndata: b\n\nid: 2\x00\ndata: c\n\nid\ndata: d\n\n",
			[]Event{{ID: "1", Data: []byte("a")}, {ID: "1", Data: []byte("b")}, {ID: "1", Data: []byte("c")}, {Data: []byte("d")}}, io.EOF},
		{"retry digits only, per event", "retry: 1000\ndata: a\n\nretry: 10s\ndata: b\n\n", []Event{{Retry: "1000", Data: []byte("a")}, {Data: []byte("b")}}, io.EOF},
		{"unknown fields ignored", "foo: bar\ndata: a\nDATA: b\n\n", []Event{{Data: []byte("a")}}, io.EOF},
		{"colons in the value kept", "data: a: b:c\n\n", []Event{{Data: []byte("a: b:c")}}, io.EOF},
		{"empty stream", "", nil, io.EOF},
		{"blank lines only", "\n\r\n\r", nil, io.EOF},
		{"last event without a blank line is not dispatched", "data: a\n\ndata: b\n", []Event{{Data: []byte("a")}}, io.ErrUnexpectedEOF},
		{"cut inside a line", "data: a\n\ndata: {\"jso", []Event{{Data: []byte("a")}}, io.ErrUnexpectedEOF},
		{"cut after an id", "id: 3\n", nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		for _, split := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"byte by byte", iotest.OneByteReader}, {"data with EOF", iotest.DataErrReader}} {
			t.Run(tt.name+"/"+split.name, func(t *testing.T) {
				t.Parallel()
				r := NewReader(split.wrap(strings.NewReader(tt.stream)), 1<<10)
				var got []Event
				for {
					ev, err := r.Next()
					if err != nil {
						if err != tt.end {
							t.Errorf("end = %v, want %v", err, tt.end)
						}
						break
					}
					got = append(got, *ev)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("events = %q, want %q", got, tt.want)
				}
				for i := range got {
					g, w := got[i], tt.want[i]
					if g.Event != w.Event || !bytes.Equal(g.Data, w.Data) || g.ID != w.ID || g.Retry != w.Retry {
						t.Errorf("event %d = %q, want %q", i, g, w)
					}
				}
			})
		}
	}
}

func TestReaderBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		ok     int // events read before the error
	}{
		{"data lines over the bound", "data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n", 0},
		{"one long line", "data: " + strings.Repeat("x", 100) + "\n\n", 0},
		{"one long comment", ":" + strings.Repeat("x", 100) + "\n", 0},
		{"a long line cut over reads", "data: a\n\ndata: " + strings.Repeat("x", 40000) + "\n\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewReader(strings.NewReader(tt.stream), 32)
			for i := 0; ; i++ {
				_, err := r.Next()
				if err != nil {
					if !errors.Is(err, ErrEventTooLarge) || i != tt.ok {
						t.Errorf("after %d events: %v, want ErrEventTooLarge after %d", i, err, tt.ok)
					}
					return
				}
			}
		})
	}
	// Events just under the bound pass, however many there are.
	r := NewReader(strings.NewReader(strings.Repeat("data: 0123456789012345678901234\n\n", 3000)), 32)
	for n := 0; ; n++ {
		if _, err := r.Next(); err != nil {
			if err != io.EOF || n != 3000 {
				t.Errorf("after %d events: %v", n, err)
			}
			break
		}
	}
}

func TestReaderDataOwned(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("data: first\n\ndata: second\n\n"), 1<<10)
	a, _ := r.Next()
	b, _ := r.Next()
	if string(a.Data) != "first" || string(b.Data) != "second" {
		t.Errorf("data = %q, %q: an event's data changed when the next was read", a.Data, b.Data)
	}
}

func TestReaderError(t *testing.T) {
	t.Parallel()
	broken := errors.New("connection reset")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(broken)), 1<<10)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("Next = %v, %v", ev, err)
	}
	if _, err := r.Next(); err != broken {
		t.Errorf("Next = %v, want the read error", err)
	}
}

func TestWriteEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"message", Event{Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)}, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"},
		{"type kept, id and retry never written", Event{Event: "message", Data: []byte("a"), ID: "7", Retry: "1000"}, "event: message\ndata: a\n\n"},
		{"lines", Event{Data: []byte("a\nb\r\nc\rd")}, "data: a\ndata: b\ndata: c\ndata: d\n\n"},
		{"empty data", Event{}, "data: \n\n"},
		{"trailing line end", Event{Data: []byte("a\n")}, "data: a\ndata: \n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := WriteEvent(&b, &tt.ev); err != nil || b.String() != tt.want {
				t.Errorf("WriteEvent = %q, %v\nwant %q", b.String(), err, tt.want)
			}
			// What is written reads back as the same event (line ends as LF).
			ev, err := NewReader(&b, 1<<10).Next()
			want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(tt.ev.Data))
			if err != nil || ev.Event != tt.ev.Event || string(ev.Data) != want {
				t.Errorf("read back = %+v, %v", ev, err)
			}
		})
	}
	if err := WriteEvent(io.Discard, &Event{Event: "a\nb"}); err == nil {
		t.Error("WriteEvent of an event type with a line end: no error")
	}
}
