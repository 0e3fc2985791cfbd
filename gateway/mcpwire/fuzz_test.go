package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzParse checks Parse against encoding/json: what it accepts is JSON, its id, method and
// params are the bytes encoding/json finds there, and what is not JSON (jsontext, duplicate names
// allowed) is -32700.
func FuzzParse(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Parse(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || m != nil || (e.Code == ParseError) == isJSON(body) || !json.Valid(body) && e.Code != ParseError {
				t.Fatalf("Parse(%q) = %v, %v", body, m, err)
			}
			return
		}
		if m.Kind != Batch {
			checkParsed(t, body, m)
			return
		}
		var raws []json.RawMessage
		if json.Unmarshal(body, &raws) != nil || len(raws) != len(m.Batch) {
			t.Fatalf("batch of %d, encoding/json reads %d", len(m.Batch), len(raws))
		}
		for i := range raws {
			checkParsed(t, raws[i], &m.Batch[i])
		}
	})
}

// checkParsed compares what Parse read of the message raw with what encoding/json reads there
// (Parse refuses members sent twice, so encoding/json's last one wins reads the same).
func checkParsed(t *testing.T, raw []byte, m *Message) {
	t.Helper()
	var w map[string]json.RawMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatalf("Parse accepted %q, encoding/json: %v", raw, err)
	}
	var method, tool string
	_, hasMethod := w["method"]
	if hasMethod && json.Unmarshal(w["method"], &method) != nil {
		t.Fatalf("Parse accepted %q: method %s", raw, w["method"])
	}
	if method == methodToolsCall {
		var p map[string]json.RawMessage
		if json.Unmarshal(w["params"], &p) != nil || json.Unmarshal(p["name"], &tool) != nil {
			t.Fatalf("Parse accepted %q: params %s", raw, w["params"])
		}
	}
	if !bytes.Equal(w["id"], m.ID) || !bytes.Equal(w["params"], m.Params) || method != m.Method || tool != m.Tool ||
		hasMethod == (m.Kind == Response) || (m.Kind == Request) != (hasMethod && m.ID != nil) {
		t.Fatalf("Parse(%q) = %+v; encoding/json reads %q", raw, m, w)
	}
}

// FuzzReader checks that the SSE Reader never panics, keeps its bound, reads the same events
// however the stream is cut into reads, and that WriteEvent's output reads back as the events.
func FuzzReader(f *testing.F) {
	for _, s := range []string{"event: message\nid: 1\ndata: {}\n\n", "\uFEFFdata:a\r\n\r\ndata\rdata: b\r\r", ": c\n\nretry: 10\ndata: x\n", "data: a\r", "\uFEFF"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		const limit = 256
		read := func(r io.Reader) ([]Event, error) {
			var evs []Event
			rd := NewReader(r, limit)
			for {
				ev, err := rd.Next()
				if err != nil {
					return evs, err
				}
				if len(ev.Data)+len(ev.Event) > limit {
					t.Fatalf("event of %d bytes past a bound of %d", len(ev.Data)+len(ev.Event), limit)
				}
				evs = append(evs, *ev)
			}
		}
		whole, errWhole := read(bytes.NewReader(stream))
		bytewise, errBytes := read(iotest.OneByteReader(bytes.NewReader(stream)))
		if errWhole != errBytes || len(whole) != len(bytewise) {
			t.Fatalf("whole: %q, %v; byte by byte: %q, %v", whole, errWhole, bytewise, errBytes)
		}
		var out bytes.Buffer
		for i := range whole {
			if whole[i].Event != bytewise[i].Event || !bytes.Equal(whole[i].Data, bytewise[i].Data) || whole[i].ID != bytewise[i].ID {
				t.Fatalf("event %d: whole %q, byte by byte %q", i, whole[i], bytewise[i])
			}
			if err := WriteEvent(&out, &whole[i]); err != nil {
				t.Fatal(err)
			}
		}
		again, err := read(&out)
		if err != io.EOF || len(again) != len(whole) {
			t.Fatalf("written %q read back as %q, %v", whole, again, err)
		}
		for i := range again {
			if again[i].Event != whole[i].Event || !bytes.Equal(again[i].Data, whole[i].Data) {
				t.Fatalf("event %d written %q read back as %q", i, whole[i], again[i])
			}
		}
	})
}

// FuzzReplaceID checks that ReplaceID puts the id byte for byte in a valid response and changes
// nothing else: putting the old id back gives the message again; and that SpliceID, given the
// span IDSpan found, splices the same message without reading it, unless the id's member name is
// escaped.
func FuzzReplaceID(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s), []byte(`"r-1"`))
		f.Add([]byte(s), []byte(`98765432109876543210`))
	}
	f.Fuzz(func(t *testing.T, msg, id []byte) {
		out, err := replaceID(msg, id)
		if err != nil {
			return
		}
		start, end, _ := IDSpan(msg)
		pieces, err := SpliceID(msg, start, end, id)
		if spliced := bytes.Join(pieces[:], nil); err == nil && !bytes.Equal(spliced, out) || err != nil && idMemberAround(msg, start, end) {
			t.Fatalf("SpliceID(%q, %d, %d, %q) = %q, %v; want ReplaceID's %q", msg, start, end, id, spliced, err, out)
		}
		m, err := Parse(out)
		if err != nil || m.Kind != Response || !bytes.Equal(m.ID, id) {
			t.Fatalf("ReplaceID(%q, %q) = %q: Parse %+v, %v", msg, id, out, m, err)
		}
		old, _ := Parse(msg)
		if !validID(old.ID) {
			return // a null id cannot be put back
		}
		if back, err := replaceID(out, old.ID); err != nil || !bytes.Equal(back, msg) {
			t.Fatalf("ReplaceID back = %q, %v; want %q", back, err, msg)
		}
	})
}

// FuzzEnvelope checks that a valid member and any valid id make a valid response whose id is the
// id byte for byte and whose member is the member byte for byte.
func FuzzEnvelope(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"id":"T-1"}}`), []byte(`"a\u0062"`), false)
	f.Add([]byte(` {"code":-32603,"message":"m"} `), []byte(`12345678901234567890e-3`), true)
	f.Fuzz(func(t *testing.T, value, id []byte, isError bool) {
		if !validID(id) {
			return
		}
		name := "result"
		if isError {
			name = "error"
		}
		stored, err := ReadFinal([]byte(`{"jsonrpc":"2.0","id":1,"` + name + `":` + string(value) + `}`))
		if err != nil {
			return
		}
		out := Envelope(id, stored.Member)
		f, err := ReadFinal(out)
		if !json.Valid(out) || err != nil || !bytes.Equal(f.ID, id) || !bytes.Equal(f.Member, stored.Member) {
			t.Fatalf("Envelope(%q, %q) = %q: %+v, %v", id, stored.Member, out, f, err)
		}
		if !strings.HasPrefix(string(out), `{"jsonrpc":"2.0","id":`+string(id)+`,`) {
			t.Fatalf("Envelope = %q", out)
		}
	})
}
