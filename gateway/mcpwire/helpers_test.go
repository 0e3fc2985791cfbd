package mcpwire

import "bytes"

// replaceID is ReplaceID's message in one piece; nil when it fails.
func replaceID(msg, id []byte) ([]byte, error) {
	parts, err := ReplaceID(msg, id)
	if err != nil {
		return nil, err
	}
	return bytes.Join(parts[:], nil), nil
}

// messageSeeds are JSON-RPC bodies the fuzz targets start from and the message tests run through:
// a request, a result and an error, a notification, a batch, duplicate and escaped member names,
// ids that are strings and big integers, and bodies that are not one valid message.
var messageSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"x"},"_meta":{"progressToken":1,"io.github.idemgateway/idempotencyKey":"k"}}}`,
	`{"jsonrpc":"2.0","id":"a\u0062","method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":12345678901234567890123,"result":{"content":[],"isError":true}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"m"},{"jsonrpc":"2.0","method":"n"}]`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, `[]`, `{"jsonrpc":"2.0","\u0069d":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","n\u0061me":"b"}}`, ` { } `, `"\ud800"`,
	`{"jsonrpc":"2.0","id":"a long id, past the bytes stringEnd reads one by one \\\" \"","method":"tools/call","params":{"name":"t","arguments":{"text":"0123456789abcdef\\\\\"x\\"}}}`,
}
