package canonical

import (
	"errors"
	"slices"
	"testing"
)

func TestJSONRPC(t *testing.T) {
	t.Parallel()
	rpc := Fields{Format: FormatJSONRPC}
	tests := []struct {
		name   string
		fields Fields
		body   string
		want   string
	}{
		{"id and version never count", rpc, `{"jsonrpc":"2.0","id":17,"method":"tickets.create","params":{"title":"x"}}`, `{"method":"tickets.create","params":{"title":"x"}}`},
		{"string id", rpc, `{"jsonrpc":"2.0","id":"a-1","method":"m","params":[1,2]}`, `{"method":"m","params":[1,2]}`},
		{"notification without params", rpc, `{"jsonrpc":"2.0","method":"m"}`, `{"method":"m"}`},
		{"null params kept", rpc, `{"method":"m","params":null}`, `{"method":"m","params":null}`},
		{"other members never count", rpc, `{"method":"m","params":{},"trace":"t"}`, `{"method":"m","params":{}}`},
		{"MCP tools/call drops _meta", rpc,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"x"},"_meta":{"progressToken":"p-1"}}}`,
			`{"method":"tools/call","params":{"arguments":{"title":"x"},"name":"create_ticket"}}`},
		{"MCP tools/call drops inputResponses, requestState and task", rpc,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"x"},"inputResponses":{"r1":{"action":"accept"}},"requestState":"opaque","task":{"ttl":60000}}}`,
			`{"method":"tools/call","params":{"arguments":{"title":"x"},"name":"create_ticket"}}`},
		{"MCP tools/call without arguments counts as {}", rpc,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_all"}}`,
			`{"method":"tools/call","params":{"arguments":{},"name":"list_all"}}`},
		{"MCP tools/call arguments {} kept", rpc,
			`{"method":"tools/call","params":{"name":"list_all","arguments":{}}}`,
			`{"method":"tools/call","params":{"arguments":{},"name":"list_all"}}`},
		{"MCP tools/call null arguments differ from absent ones", rpc,
			`{"method":"tools/call","params":{"name":"list_all","arguments":null}}`,
			`{"method":"tools/call","params":{"arguments":null,"name":"list_all"}}`},
		{"MCP tools/call members that sort before arguments", rpc,
			`{"method":"tools/call","params":{"name":"n","a":1,"B":2}}`,
			`{"method":"tools/call","params":{"B":2,"a":1,"arguments":{},"name":"n"}}`},
		{"MCP tools/call: the members inside arguments count", rpc,
			`{"method":"tools/call","params":{"name":"n","arguments":{"task":1,"requestState":"s","inputResponses":{}}}}`,
			`{"method":"tools/call","params":{"arguments":{"inputResponses":{},"requestState":"s","task":1},"name":"n"}}`},
		{"task and requestState of other methods count", rpc,
			`{"method":"tasks/get","params":{"task":{"ttl":1},"requestState":"s"}}`,
			`{"method":"tasks/get","params":{"requestState":"s","task":{"ttl":1}}}`},
		{"a pointer reads the arguments that absent ones count as", Fields{
			Format:  FormatJSONRPC,
			Include: []Pointer{mustPointer(t, "/params/arguments")},
		}, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"n","task":{}}}`,
			`{"/params/arguments":{}}`},
		{"_meta inside arguments counts", rpc,
			`{"method":"tools/call","params":{"name":"n","arguments":{"_meta":1}}}`,
			`{"method":"tools/call","params":{"arguments":{"_meta":1},"name":"n"}}`},
		{"_meta of other methods counts", rpc,
			`{"method":"resources/read","params":{"uri":"u","_meta":{"progressToken":"p"}}}`,
			`{"method":"resources/read","params":{"_meta":{"progressToken":"p"},"uri":"u"}}`},
		{"rules name members of the body part", Fields{
			Format:    FormatJSONRPC,
			Include:   []Pointer{mustPointer(t, "/params/arguments/title"), mustPointer(t, "/params/name")},
			Normalize: []Normalization{normRule(t, "/params/arguments/title", "trim")},
		}, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"n","arguments":{"title":" x ","note":"y"}}}`,
			`{"/params/arguments/title":"x","/params/name":"n"}`},
		{"default params", Fields{Format: FormatJSONRPC, Defaults: []Default{dflt(t, "/params", `{}`)}}, `{"method":"m","id":1}`, `{"method":"m","params":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := bodyPart(t, tt.fields, &Request{Tool: "t", Method: "POST", Body: []byte(tt.body)})
			if err != nil || got != tt.want {
				t.Errorf("body part\n got %s, %v\nwant %s", got, err, tt.want)
			}
		})
	}
}

func TestJSONRPCErrors(t *testing.T) {
	t.Parallel()
	c, err := Compile(Fields{Format: FormatJSONRPC})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, body, want string }{
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, `invalid body: jsonrpc: batches are not supported`},
		{"empty batch", `[]`, `invalid body: jsonrpc: batches are not supported`},
		{"not an object", `"m"`, `invalid body: jsonrpc: the body is not a JSON-RPC request object`},
		{"no method", `{"jsonrpc":"2.0","id":1,"params":{}}`, `invalid body: jsonrpc: the request has no "method"`},
		{"method not a string", `{"method":1}`, `invalid body: jsonrpc: "method" is not a string`},
		{"duplicate member", `{"method":"a","method":"b"}`, `invalid body: duplicate member "method" at the top level`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := c.Document(&Request{Tool: "t", Method: "POST", Body: []byte(tt.body)})
			if err == nil || !errors.Is(err, ErrInvalidBody) || err.Error() != tt.want {
				t.Errorf("Document() = %s, %v\nwant error %s", doc, err, tt.want)
			}
		})
	}
}

func TestJSONRPCToolsCallSteps(t *testing.T) {
	t.Parallel()
	c, err := Compile(Fields{Format: FormatJSONRPC})
	if err != nil {
		t.Fatal(err)
	}
	_, steps, err := c.Explain(&Request{Tool: "t", Method: "POST",
		Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"task":{},"requestState":"s","name":"n","inputResponses":{}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{"/body/id", "excluded", "jsonrpc: the request id never counts"},
		{"/body/jsonrpc", "excluded", "jsonrpc: the protocol version never counts"},
		{"/body/params/inputResponses", "excluded", "jsonrpc: MCP tools/call: inputResponses (answers to the server's input requests, added when the call is sent again) never count"},
		{"/body/params/requestState", "excluded", "jsonrpc: MCP tools/call: requestState (the server's state echoed when the call is sent again) never counts"},
		{"/body/params/task", "excluded", "jsonrpc: MCP tools/call: task (whether the client asks for a task handle) never counts"},
		{"/body/params/arguments", "defaulted", "jsonrpc: MCP tools/call: absent, counts as {}"},
		{"/body", "included", "the whole body (no include pointers)"},
	}
	if !slices.Equal(steps, want) {
		t.Errorf("steps\n got %q\nwant %q", steps, want)
	}
}
