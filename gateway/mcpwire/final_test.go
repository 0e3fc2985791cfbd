package mcpwire

import (
	"bytes"
	"errors"
	"testing"
)

func TestReadFinal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  string
		want Final
	}{
		{"result", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"id":"T-1"}}}`,
			Final{ID: []byte(`1`), Member: []byte(`{"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"id":"T-1"}}}`)}},
		{"result bytes kept: spaces, escapes, big numbers", `{ "id" : "a\u0062" , "result" : { "n" : 12345678901234567890.50 , "s" : "\u00e9" } , "jsonrpc" : "2.0" }`,
			Final{ID: []byte(`"a\u0062"`), Member: []byte(`{"result":{ "n" : 12345678901234567890.50 , "s" : "\u00e9" }}`)}},
		{"isError true", `{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":true}}`,
			Final{ID: []byte(`2`), IsError: true, Member: []byte(`{"result":{"content":[],"isError":true}}`)}},
		{"isError false", `{"jsonrpc":"2.0","id":2,"result":{"isError":false}}`,
			Final{ID: []byte(`2`), Member: []byte(`{"result":{"isError":false}}`)}},
		{"isError inside content is not the result's", `{"jsonrpc":"2.0","id":2,"result":{"content":[{"isError":true}],"structuredContent":{"isError":true}}}`,
			Final{ID: []byte(`2`), Member: []byte(`{"result":{"content":[{"isError":true}],"structuredContent":{"isError":true}}}`)}},
		{"resultType", `{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required","inputRequests":{}}}`,
			Final{ID: []byte(`3`), ResultType: "input_required", Member: []byte(`{"result":{"resultType":"input_required","inputRequests":{}}}`)}},
		{"task handle (2025-11-25)", `{"jsonrpc":"2.0","id":4,"result":{"task":{"taskId":"t-1","status":"working"}}}`,
			Final{ID: []byte(`4`), Task: true, TaskID: []byte(`"t-1"`), Member: []byte(`{"result":{"task":{"taskId":"t-1","status":"working"}}}`)}},
		{"task handle (2026-07-28)", `{"jsonrpc":"2.0","id":4,"result":{"resultType":"task","taskId":"t-2","status":"working","pollIntervalMs":500}}`,
			Final{ID: []byte(`4`), Task: true, TaskID: []byte(`"t-2"`), ResultType: "task", Member: []byte(`{"result":{"resultType":"task","taskId":"t-2","status":"working","pollIntervalMs":500}}`)}},
		{"task not an object", `{"jsonrpc":"2.0","id":4,"result":{"task":"t"}}`,
			Final{ID: []byte(`4`), Member: []byte(`{"result":{"task":"t"}}`)}},
		{"result not an object", `{"jsonrpc":"2.0","id":5,"result":[1]}`,
			Final{ID: []byte(`5`), Member: []byte(`{"result":[1]}`)}},
		{"error", `{"jsonrpc":"2.0","id":6,"error":{"code":-32603,"message":"boom","data":{"x":1}}}`,
			Final{ID: []byte(`6`), HasError: true, ErrCode: -32603, Member: []byte(`{"error":{"code":-32603,"message":"boom","data":{"x":1}}}`)}},
		{"error with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`,
			Final{ID: []byte(`null`), HasError: true, ErrCode: -32700, Member: []byte(`{"error":{"code":-32700,"message":"parse"}}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := ReadFinal([]byte(tt.msg))
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			if string(f.ID) != string(w.ID) || f.IsError != w.IsError || f.ResultType != w.ResultType || f.Task != w.Task || string(f.TaskID) != string(w.TaskID) ||
				f.ErrCode != w.ErrCode || f.HasError != w.HasError || string(f.Member) != string(w.Member) {
				t.Errorf("ReadFinal =\n %+v\nwant\n %+v", f, w)
			}
		})
	}
}

func TestReadFinalErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, msg string
		code      int
	}{
		{"not JSON", `{"id":1,`, ParseError},
		{"a request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`, InvalidRequest},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/progress"}`, InvalidRequest},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"result":{}}]`, InvalidRequest},
		{"no id", `{"jsonrpc":"2.0","result":{}}`, InvalidRequest},
		{"both", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}`, InvalidRequest},
		{"result twice", `{"jsonrpc":"2.0","id":1,"result":{},"result":{"isError":true}}`, InvalidRequest},
		{"error code missing", `{"jsonrpc":"2.0","id":1,"error":{"message":"m"}}`, InvalidRequest},
		{"error code a fraction", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603.5,"message":"m"}}`, InvalidRequest},
		{"error code a string", `{"jsonrpc":"2.0","id":1,"error":{"code":"-32603","message":"m"}}`, InvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := ReadFinal([]byte(tt.msg))
			var e *Error
			if !errors.As(err, &e) || e.Code != tt.code || f != nil {
				t.Errorf("ReadFinal(%s) = %+v, %v; want code %d", tt.msg, f, err, tt.code)
			}
		})
	}
}

func TestWithResultMeta(t *testing.T) {
	t.Parallel()
	const name, value = "io.github.idemgateway/idempotency", `{"decision":"replay"}`
	tests := []struct{ name, member, want string }{
		{"no _meta", `{"result":{"content":[{"type":"text","text":"T-1 \u00e9"}],"n":12345678901234567890}}`,
			`{"result":{"_meta":{"io.github.idemgateway/idempotency":{"decision":"replay"}},"content":[{"type":"text","text":"T-1 \u00e9"}],"n":12345678901234567890}}`},
		{"spaced", `{"result": { "content" : [] } }`,
			`{"result": {"_meta":{"io.github.idemgateway/idempotency":{"decision":"replay"}}, "content" : [] } }`},
		{"empty result", `{"result":{ }}`, `{"result":{"_meta":{"io.github.idemgateway/idempotency":{"decision":"replay"}} }}`},
		{"the server's _meta kept", `{"result":{"content":[],"_meta":{"trace":"abc", "n":1.50}}}`,
			`{"result":{"content":[],"_meta":{"io.github.idemgateway/idempotency":{"decision":"replay"},"trace":"abc", "n":1.50}}}`},
		{"empty _meta", `{"result":{"_meta":{},"content":[]}}`, `{"result":{"_meta":{"io.github.idemgateway/idempotency":{"decision":"replay"}},"content":[]}}`},
		{"an entry of that name replaced", `{"result":{"_meta":{"io.github.idemgateway/idempotency":{"decision":"execute"},"x":1}}}`,
			`{"result":{"_meta":{"io.github.idemgateway/idempotency":{"decision":"replay"},"x":1}}}`},
		{"an error", `{"error":{"code":-32603,"message":"m"}}`, `{"error":{"code":-32603,"message":"m"}}`},
		{"_meta not an object", `{"result":{"_meta":7}}`, `{"result":{"_meta":7}}`},
		{"_meta null", `{"result":{"content":[],"_meta":null}}`, `{"result":{"content":[],"_meta":{"io.github.idemgateway/idempotency":{"decision":"replay"}}}}`},
		{"_meta spelled with escapes", `{"result":{"content":[],"\u005fmeta":{"srv":1}}}`,
			`{"result":{"content":[],"\u005fmeta":{"io.github.idemgateway/idempotency":{"decision":"replay"},"srv":1}}}`},
		{"\\u elsewhere, no _meta", `{"result":{"content":[{"type":"text","text":"\u003cb\u003e"}]}}`,
			`{"result":{"_meta":{"io.github.idemgateway/idempotency":{"decision":"replay"}},"content":[{"type":"text","text":"\u003cb\u003e"}]}}`},
		{"result not an object", `{"result":[1]}`, `{"result":[1]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			member := []byte(tt.member)
			pieces := WithResultMeta(member, name, []byte(value))
			if got := bytes.Join(pieces[:], nil); string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if _, ok := offsetIn(member, pieces[0]); !ok && tt.name != "an entry of that name replaced" {
				t.Error("piece 0 is a copy of the member")
			}
		})
	}
}
