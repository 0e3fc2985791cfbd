package mcpwire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		kind   Kind
		method string
		id     string // "" : nil
		params string // "" : nil
		tool   string
	}{
		{"request, number id", `{"jsonrpc":"2.0","id":17,"method":"tools/list"}`, Request, "tools/list", `17`, "", ""},
		{"request, string id", `{"jsonrpc":"2.0","id":"a-1","method":"ping","params":{}}`, Request, "ping", `"a-1"`, `{}`, ""},
		{"request, big integer id kept", `{"jsonrpc":"2.0","id":12345678901234567890123,"method":"ping"}`, Request, "ping", `12345678901234567890123`, "", ""},
		{"request, escaped string id kept", `{"jsonrpc":"2.0","id":"\u0061\"b","method":"ping"}`, Request, "ping", `"\u0061\"b"`, "", ""},
		{"request, fraction and exponent ids kept", `{"jsonrpc":"2.0","id":-1.5e3,"method":"ping"}`, Request, "ping", `-1.5e3`, "", ""},
		{"tools/call", ` {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","arguments":{"name":"x"}}} `,
			Request, "tools/call", `1`, `{"name":"create_ticket","arguments":{"name":"x"}}`, "create_ticket"},
		{"tools/call, escaped name", `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"n\u0061me":"cr\u00e9er"}}`,
			Request, "tools/call", `1`, `{"n\u0061me":"cr\u00e9er"}`, "créer"},
		{"white space everywhere", "{ \"jsonrpc\" :\t\"2.0\" ,\r\n\"id\" : 2 , \"method\" : \"ping\" , \"params\" : [ 1 , 2 ] }", Request, "ping", `2`, `[ 1 , 2 ]`, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, Notification, "notifications/initialized", "", "", ""},
		{"notification with params", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"x"}}`, Notification, "notifications/cancelled", "", `{"requestId":3,"reason":"x"}`, ""},
		{"null params kept", `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`, Request, "ping", `1`, `null`, ""},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, Request, "", `1`, "", ""},
		{"names sent twice below the top level are the server's to judge", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}`, Request, "m", `1`, `{"a":1,"a":2}`, ""},
		{"unknown members ignored", `{"jsonrpc":"2.0","id":1,"method":"ping","x":{"id":2}}`, Request, "ping", `1`, "", ""},
		{"response with result", `{"jsonrpc":"2.0","id":"s-1","result":{"content":[]}}`, Response, "", `"s-1"`, "", ""},
		{"response with error", `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"no"}}`, Response, "", `4`, "", ""},
		{"error response with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, Response, "", `null`, "", ""},
		{"response with null result", `{"jsonrpc":"2.0","id":4,"result":null}`, Response, "", `4`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if m.Kind != tt.kind || m.Method != tt.method || string(m.ID) != tt.id || string(m.Params) != tt.params || m.Tool != tt.tool || m.Batch != nil {
				t.Errorf("Parse = %+v\nwant kind %d method %q id %s params %s tool %q", m, tt.kind, tt.method, tt.id, tt.params, tt.tool)
			}
			if (tt.id == "") != (m.ID == nil) || (tt.params == "") != (m.Params == nil) {
				t.Errorf("absent id or params not nil: id %q params %q", m.ID, m.Params)
			}
		})
	}
}

func TestParseBatch(t *testing.T) {
	t.Parallel()
	m, err := Parse([]byte(` [{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}, {"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"x","result":{}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != Batch || len(m.Batch) != 3 {
		t.Fatalf("Parse = %+v, want a batch of 3", m)
	}
	got := m.Batch
	if got[0].Kind != Request || got[0].Tool != "a" || string(got[0].ID) != "1" ||
		got[1].Kind != Notification || got[1].Method != "n" ||
		got[2].Kind != Response || string(got[2].ID) != `"x"` {
		t.Errorf("batch = %+v", got)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		code int
	}{
		{"empty", ``, ParseError},
		{"not JSON", `{"jsonrpc":"2.0",`, ParseError},
		{"trailing bytes", `{"jsonrpc":"2.0","id":1,"method":"m"} x`, ParseError},
		{"two values", `{"jsonrpc":"2.0","id":1,"method":"m"}{}`, ParseError},
		{"nested too deep", `{"jsonrpc":"2.0","id":1,"method":"m","params":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, ParseError},
		{"not UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\x80\"}", ParseError},
		{"escaped lone surrogate", `{"jsonrpc":"2.0","id":"\ud800","method":"m"}`, ParseError},
		{"a string", `"m"`, InvalidRequest},
		{"a number", `1`, InvalidRequest},
		{"empty object", `{}`, InvalidRequest},
		{"no jsonrpc", `{"id":1,"method":"m"}`, InvalidRequest},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"m"}`, InvalidRequest},
		{"jsonrpc a number", `{"jsonrpc":2.0,"id":1,"method":"m"}`, InvalidRequest},
		{"jsonrpc twice", `{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"m"}`, InvalidRequest},
		{"id twice", `{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, InvalidRequest},
		{"id twice, escaped", `{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"m"}`, InvalidRequest},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`, InvalidRequest},
		{"params twice", `{"jsonrpc":"2.0","id":1,"method":"a","params":{},"params":{}}`, InvalidRequest},
		{"id an object", `{"jsonrpc":"2.0","id":{},"method":"m"}`, InvalidRequest},
		{"id an array", `{"jsonrpc":"2.0","id":[1],"method":"m"}`, InvalidRequest},
		{"id true", `{"jsonrpc":"2.0","id":true,"method":"m"}`, InvalidRequest},
		{"request id null", `{"jsonrpc":"2.0","id":null,"method":"m"}`, InvalidRequest},
		{"method a number", `{"jsonrpc":"2.0","id":1,"method":1}`, InvalidRequest},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null}`, InvalidRequest},
		{"params a string", `{"jsonrpc":"2.0","id":1,"method":"m","params":"p"}`, InvalidRequest},
		{"params a number", `{"jsonrpc":"2.0","id":1,"method":"m","params":1}`, InvalidRequest},
		{"request with result", `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, InvalidRequest},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, InvalidRequest},
		{"response with neither", `{"jsonrpc":"2.0","id":1}`, InvalidRequest},
		{"response with both", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, InvalidRequest},
		{"result twice", `{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`, InvalidRequest},
		{"error not an object", `{"jsonrpc":"2.0","id":1,"error":"e"}`, InvalidRequest},
		{"result with null id", `{"jsonrpc":"2.0","id":null,"result":{}}`, InvalidRequest},
		{"empty batch", `[]`, InvalidRequest},
		{"batch with a bad message", `[{"jsonrpc":"2.0","id":1,"method":"m"},{"jsonrpc":"2.0"}]`, InvalidRequest},
		{"nested batch", `[[{"jsonrpc":"2.0","id":1,"method":"m"}]]`, InvalidRequest},
		{"tools/call without params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, InvalidParams},
		{"tools/call params an array", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["a"]}`, InvalidParams},
		{"tools/call without name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, InvalidParams},
		{"tools/call name a number", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1}}`, InvalidParams},
		{"tools/call name twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, InvalidParams},
		{"tools/call name twice, escaped", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","nam\u0065":"b"}}`, InvalidParams},
		{"tools/call params null, a string id", `{"jsonrpc":"2.0","id":"1","method":"tools/call","params":null}`, InvalidParams},
		{"notification tools/call naming no tool", `{"jsonrpc":"2.0","method":"tools/call","params":{}}`, InvalidParams},
		{"batch with a tools/call naming no tool", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}]`, InvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse([]byte(tt.body))
			var e *Error
			if !errors.As(err, &e) || e.Code != tt.code || m != nil {
				t.Errorf("Parse(%s) = %+v, %v; want code %d", tt.body, m, err, tt.code)
			}
			// A tools/call alone whose params name no tool is a request whose id was read: its
			// answer carries the id. Nothing else is, a batch included (refused whole).
			var re *RequestError
			wantID := strings.HasPrefix(tt.name, "tools/call")
			if got := errors.As(err, &re); got != wantID || got && !strings.Contains(tt.body, `"id":`+string(re.ID)+`,`) {
				t.Errorf("Parse(%s): RequestError %v (%+v), want one with the request's id: %v", tt.body, got, re, wantID)
			}
		})
	}
}

func TestMeta(t *testing.T) {
	t.Parallel()
	const key = "io.github.idemgateway/idempotencyKey"
	tests := []struct{ name, body, want string }{
		{"string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1,"io.github.idemgateway/idempotencyKey":"k-1"}}}`, `"k-1"`},
		{"escaped names", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","\u005fmeta":{"io.github.idemgateway\/idempotencyKey":"k"}}}`, `"k"`},
		{"any value, raw", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.github.idemgateway/idempotencyKey": {"a" : 1}}}}`, `{"a" : 1}`},
		{"absent member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1}}}`, ``},
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`, ``},
		{"_meta not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":"k"}}`, ``},
		{"in arguments, not _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"_meta":{"io.github.idemgateway/idempotencyKey":"k"}}}}`, ``},
		{"_meta sent twice: the first", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.github.idemgateway/idempotencyKey":"k-1"},"name":"t","_meta":{"io.github.idemgateway/idempotencyKey":"k-2"}}}`, `"k-1"`},
		{"another method's", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"u","_meta":{"io.github.idemgateway/idempotencyKey":"k"}}}`, `"k"`},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ``},
		{"params an array", `{"jsonrpc":"2.0","id":1,"method":"m","params":[{"_meta":{}}]}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Meta(key); string(got) != tt.want || (tt.want == "") != (got == nil) {
				t.Errorf("Meta = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCutArgument(t *testing.T) {
	t.Parallel()
	const name = "idempotency_key"
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + params + `}`
	}
	tests := []struct{ name, body, val, rest, err string }{
		{"only member", call(`{"name":"t","arguments":{"idempotency_key":"k-1"}}`), `"k-1"`, call(`{"name":"t","arguments":{}}`), ""},
		{"first of several", call(`{"name":"t","arguments":{"idempotency_key":"k" , "title":"a b",  "n":1.0}}`), `"k"`, call(`{"name":"t","arguments":{"title":"a b","n":1.0}}`), ""},
		{"last, nested values kept", call(`{"name":"t","arguments":{"q":{"idempotency_key":1},"idempotency_key":"k"},"_meta":{}}`), `"k"`, call(`{"name":"t","arguments":{"q":{"idempotency_key":1}},"_meta":{}}`), ""},
		{"escaped name", call(`{"name":"t","arguments":{"a":[1,2],"idempotency_key":"k","b":null}}`), `"k"`, call(`{"name":"t","arguments":{"a":[1,2],"b":null}}`), ""},
		{"any value, raw", call(`{"name":"t","arguments":{"idempotency_key":{"x" : 1}}}`), `{"x" : 1}`, call(`{"name":"t","arguments":{}}`), ""},
		{"absent: body as is", call(`{"name":"t","arguments":{"title":"a"}}`), "", call(`{"name":"t","arguments":{"title":"a"}}`), ""},
		{"no arguments", call(`{"name":"t"}`), "", call(`{"name":"t"}`), ""},
		{"arguments not an object", call(`{"name":"t","arguments":["idempotency_key"]}`), "", call(`{"name":"t","arguments":["idempotency_key"]}`), ""},
		{"in _meta, not arguments", call(`{"name":"t","_meta":{"idempotency_key":"k"}}`), "", call(`{"name":"t","_meta":{"idempotency_key":"k"}}`), ""},
		{"twice in arguments", call(`{"name":"t","arguments":{"idempotency_key":"k","idempotency_key":"j"}}`), "", "", `arguments hold "idempotency_key" 2 times`},
		{"arguments twice", call(`{"name":"t","arguments":{"idempotency_key":"k"},"arguments":{"a":1}}`), "", "", `params holds "arguments" more than once`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := []byte("  " + tt.body + "\n") // Parse trims: offsets are the body's, not the message's
			m, err := Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			val, rest, err := m.CutArgument(body, name)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(val) != tt.val || (tt.val == "") != (val == nil) {
				t.Errorf("val = %q, want %q", val, tt.val)
			}
			if want := "  " + tt.rest + "\n"; string(rest) != want {
				t.Errorf("rest = %s, want %s", rest, want)
			}
			if tt.val == "" && &rest[0] != &body[0] {
				t.Error("a body without the member was copied")
			}
			if _, err := Parse(rest); err != nil {
				t.Errorf("rest does not parse: %v", err)
			}
		})
	}
	t.Run("another body", func(t *testing.T) {
		body := []byte(call(`{"name":"t","arguments":{"idempotency_key":"k"}}`))
		m, err := Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.CutArgument(append([]byte(nil), body...), name); err == nil {
			t.Error("CutArgument took a copy of the body for the one it read")
		}
	})
}

func TestCancelledRequestID(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, want string }{
		{"number", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345678901234567890,"reason":"user"}}`, `12345678901234567890`},
		{"string", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"x","requestId":"a\u0062"}}`, `"a\u0062"`},
		{"no requestId", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, ``},
		{"other notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"requestId":1}}`, ``},
		{"a request, not a notification", `{"jsonrpc":"2.0","id":1,"method":"notifications/cancelled","params":{"requestId":1}}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.CancelledRequestID(); string(got) != tt.want || (tt.want == "") != (got == nil) {
				t.Errorf("CancelledRequestID = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	if got := (&Error{Code: InvalidRequest, Message: "invalid request: x"}).Error(); got != "jsonrpc error -32600: invalid request: x" {
		t.Errorf("Error() = %q", got)
	}
}

// TestMessageParseReused checks that the method Parse reads what the function does into a message
// that held another, and leaves the zero Message on error.
func TestMessageParseReused(t *testing.T) {
	t.Parallel()
	const held = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"k":"v"}}}`
	for _, body := range append(messageSeeds, held, `[`+held+`]`) {
		var m Message
		if err := m.Parse([]byte(held)); err != nil {
			t.Fatal(err)
		}
		err := m.Parse([]byte(body))
		want, wantErr := Parse([]byte(body))
		switch {
		case wantErr != nil:
			if err == nil || err.Error() != wantErr.Error() || !reflect.DeepEqual(m, Message{}) {
				t.Errorf("%s: %+v, %v; want the zero Message, %v", body, m, err, wantErr)
			}
		case err != nil || !reflect.DeepEqual(&m, want):
			t.Errorf("%s: %+v, %v; want %+v", body, m, err, want)
		}
	}
}

func TestTaskRequests(t *testing.T) {
	t.Parallel()
	const ext = "io.modelcontextprotocol/tasks"
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"` + params + `}}`
	}
	tests := []struct {
		name, body     string
		asks, declares bool
	}{
		{"neither", call(``), false, false},
		{"params.task (2025-11-25)", call(`,"task":{"ttl":60000}`), true, false},
		{"params.task not an object", call(`,"task":true`), false, false},
		{"the extension declared (2026-07-28)", call(`,"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`), false, true},
		{"another extension", call(`,"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/ui":{}}}}`), false, false},
		{"capabilities without extensions", call(`,"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}`), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if m.AsksForTask() != tt.asks || m.DeclaresExtension(ext) != tt.declares {
				t.Errorf("AsksForTask %v, DeclaresExtension %v; want %v, %v", m.AsksForTask(), m.DeclaresExtension(ext), tt.asks, tt.declares)
			}
		})
	}
}

// TestMessages: one message is itself; a batch is its elements, each as sent; what is not JSON is
// left whole for its parse to refuse.
func TestMessages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, []string{`{"jsonrpc":"2.0","id":1,"result":{}}`}},
		{" [ {\"a\":[1,2]} ,\n{\"b\":\"],\"} ] ", []string{`{"a":[1,2]}`, `{"b":"],"}`}},
		{`[]`, nil},
		{`[{"a":1}`, []string{`[{"a":1}`}},
	} {
		var got []string
		for _, m := range Messages([]byte(c.in)) {
			got = append(got, string(m))
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Messages(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
