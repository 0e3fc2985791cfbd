package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestEnvelope(t *testing.T) {
	t.Parallel()
	member := []byte(`{"result":{"content":[],"structuredContent":{"id":"T-1","n":12345678901234567890}}}`)
	tests := []struct{ name, id, want string }{
		{"number id", `7`, `{"jsonrpc":"2.0","id":7,"result":{"content":[],"structuredContent":{"id":"T-1","n":12345678901234567890}}}`},
		{"big integer id", `123456789012345678901234567890`, `{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{"content":[],"structuredContent":{"id":"T-1","n":12345678901234567890}}}`},
		{"escaped string id", `"\u00e9\"x"`, `{"jsonrpc":"2.0","id":"\u00e9\"x","result":{"content":[],"structuredContent":{"id":"T-1","n":12345678901234567890}}}`},
		{"nil id", ``, `{"jsonrpc":"2.0","id":null,"result":{"content":[],"structuredContent":{"id":"T-1","n":12345678901234567890}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var id []byte
			if tt.id != "" {
				id = []byte(tt.id)
			}
			if got := Envelope(id, member); string(got) != tt.want {
				t.Errorf("Envelope =\n %s\nwant\n %s", got, tt.want)
			}
			dst := []byte("prefix:")
			if got := AppendEnvelope(dst, id, member); string(got) != "prefix:"+tt.want {
				t.Errorf("AppendEnvelope = %s", got)
			}
			parts := EnvelopeParts(id, member)
			if got := bytes.Join(parts[:], nil); string(got) != tt.want {
				t.Errorf("EnvelopeParts joined = %s", got)
			}
			if &parts[3][0] != &member[1] {
				t.Error("EnvelopeParts copied the member")
			}
		})
	}
}

// TestEnvelopeOfReadFinal: what a receipt stores (Final.Member) replays as the message the server
// sent, with the retry's id.
func TestEnvelopeOfReadFinal(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"é\n"}],"isError":true}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`,
	} {
		f, err := ReadFinal([]byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		if got := Envelope([]byte(`1`), f.Member); string(got) != msg {
			t.Errorf("Envelope(ReadFinal(%s)) = %s", msg, got)
		}
	}
}

func TestAppendEnvelopeAllocations(t *testing.T) {
	member := []byte(`{"result":{"content":[]}}`)
	id := []byte(`"req-1"`)
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { buf = AppendEnvelope(buf[:0], id, member) }); n != 0 {
		t.Errorf("AppendEnvelope into a sized buffer: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Envelope(id, member) }); n != 1 {
		t.Errorf("Envelope: %v allocations, want 1", n)
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		id   []byte
		err  *Error
		want string
	}{
		{"no id, no data", nil, &Error{Code: ParseError, Message: "parse error: the body is not JSON"},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: the body is not JSON"}}`},
		{"id kept, message escaped", []byte(`"a\u0062"`), &Error{Code: Conflict, Message: "key \"k\" <reused>\n"},
			`{"jsonrpc":"2.0","id":"a\u0062","error":{"code":-32010,"message":"key \"k\" \u003creused\u003e\n"}}`},
		{"data", []byte(`12345678901234567890`), &Error{Code: InProgress, Message: "m", Data: map[string]any{"type": "idempotency_key_in_progress", "retryAfterMs": 1000}},
			`{"jsonrpc":"2.0","id":12345678901234567890,"error":{"code":-32011,"message":"m","data":{"retryAfterMs":1000,"type":"idempotency_key_in_progress"}}}`},
		{"raw data", []byte(`1`), &Error{Code: KeyMissing, Message: "m", Data: json.RawMessage(`{"type":"idempotency_key_required"}`)},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32013,"message":"m","data":{"type":"idempotency_key_required"}}}`},
		{"data that does not encode is left out", []byte(`1`), &Error{Code: StoreUnavailable, Message: "m", Data: func() {}},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32015,"message":"m"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ErrorMessage(tt.id, tt.err)
			if string(got) != tt.want {
				t.Errorf("ErrorMessage =\n %s\nwant\n %s", got, tt.want)
			}
			if f, err := ReadFinal(got); err != nil || f.ErrCode != tt.err.Code {
				t.Errorf("ReadFinal(ErrorMessage) = %+v, %v", f, err)
			}
		})
	}
}

func TestReplaceID(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, msg, id, want string }{
		{"number by string", `{"jsonrpc":"2.0","id":1,"result":{"id":1}}`, `"b"`, `{"jsonrpc":"2.0","id":"b","result":{"id":1}}`},
		{"id last, spaces kept", `{ "jsonrpc" : "2.0" , "result" : {"id" : 2} , "id" : "a" }`, `12345678901234567890`, `{ "jsonrpc" : "2.0" , "result" : {"id" : 2} , "id" : 12345678901234567890 }`},
		{"escaped name", `{"jsonrpc":"2.0","\u0069d":7,"error":{"code":1,"message":"m"}}`, `"\u00e9"`, `{"jsonrpc":"2.0","\u0069d":"\u00e9","error":{"code":1,"message":"m"}}`},
		{"null id of an error", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`, `3`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32700,"message":"m"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := replaceID([]byte(tt.msg), []byte(tt.id))
			if err != nil || string(got) != tt.want {
				t.Errorf("ReplaceID = %s, %v\nwant %s", got, err, tt.want)
			}
		})
	}
}

// TestSpliceIDRefusesSpans: a span that holds no id member of the message (one kept with another
// body) is refused, never spliced.
func TestSpliceIDRefusesSpans(t *testing.T) {
	t.Parallel()
	msg := []byte(`{"jsonrpc":"2.0", "id" : 17,"result":{"x":"id"}}`)
	start := bytes.Index(msg, []byte("17"))
	if got, err := SpliceID(msg, start, start+2, []byte(`"r"`)); err != nil || string(bytes.Join(got[:], nil)) != `{"jsonrpc":"2.0", "id" : "r","result":{"x":"id"}}` {
		t.Fatalf("SpliceID at the id = %s, %v", got, err)
	}
	for name, span := range map[string][2]int{
		"part of the id":   {start, start + 1},
		"past the end":     {start, len(msg) + 1},
		"empty":            {start, start},
		"at byte 0":        {0, 1},
		"another string":   {bytes.Index(msg, []byte(`"2.0"`)), bytes.Index(msg, []byte(`"2.0"`)) + 5},
		"a value of \"x\"": {bytes.LastIndex(msg, []byte(`"id"`)), bytes.LastIndex(msg, []byte(`"id"`)) + 4},
	} {
		if got, err := SpliceID(msg, span[0], span[1], []byte(`"r"`)); err == nil {
			t.Errorf("%s: SpliceID(%v) = %s, want an error", name, span, got)
		}
	}
}

func TestReplaceIDErrors(t *testing.T) {
	t.Parallel()
	ok := `{"jsonrpc":"2.0","id":1,"result":{}}`
	tests := []struct{ name, msg, id string }{
		{"not JSON", `{"id":1`, `2`},
		{"a request", `{"jsonrpc":"2.0","id":1,"method":"m"}`, `2`},
		{"a batch", `[` + ok + `]`, `2`},
		{"id twice", `{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`, `2`},
		{"empty id", ok, ``},
		{"null id", ok, `null`},
		{"object id", ok, `{}`},
		{"id not one value", ok, `1,"x":2`},
		{"id with spaces", ok, ` 1`},
		{"id not JSON", ok, `"a`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ReplaceID([]byte(tt.msg), []byte(tt.id))
			var e *Error
			if !errors.As(err, &e) || got[0] != nil || got[1] != nil || got[2] != nil {
				t.Errorf("ReplaceID(%s, %s) = %s, %v; want an *Error", tt.msg, tt.id, got, err)
			}
		})
	}
}
