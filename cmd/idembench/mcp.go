package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP tool calls (docs/mcp.md, docs/performance.md#mcp-tool-calls): a tools/call of create_ticket
// through a kind: mcp route of the gateway, against the same call through the bare proxy, to a real
// go-sdk MCP server in the harness's process (beside the upstream). The server is stateless, so
// that every request is a raw POST without initialize, as a 2025-11-25 client with a session sends
// its calls after it; it answers with JSON on one path and with an SSE stream on the other.

// The paths of the MCP server, on the gateway, the bare proxy and the upstream: kind: mcp routes
// of the gateway (routesYAML), answered application/json and text/event-stream.
const (
	mcpJSONPath = "/mcp-json"
	mcpSSEPath  = "/mcp-sse"
	mcpArgPath  = "/mcp-json-arg" // JSON answers; the key in an argument (key.argument)
)

// mcpAnswer is a form of answer of the MCP server: its name in the runs ("json", "sse") and the
// path the server answers so on; keyArg: the calls carry their key as the argument mcpKeyArg,
// not in params._meta.
type mcpAnswer struct {
	name, path string
	keyArg     bool
}

// mcpAnswers are the forms of answer the bench measures; tools/calls count their Redis round
// trips on the first.
var mcpAnswers = []mcpAnswer{{"json", mcpJSONPath, false}, {"sse", mcpSSEPath, false}}

// mcpArgAnswer is the form of the replays whose key is an argument, measured beside the JSON
// replays with the key in params._meta (docs/mcp.md#keys-from-every-client).
var mcpArgAnswer = mcpAnswer{"json-arg", mcpArgPath, true}

// mcpKeyArg is the argument that carries the key on mcpArgPath (key.argument).
const mcpKeyArg = "idempotency_key"

// mcpVersion is the MCP revision the bench's requests name (Mcp-Protocol-Version).
const mcpVersion = "2025-11-25"

// mcpKeyMeta is the member of params._meta that carries the key, as a go-sdk host sends it
// (CallToolParams.Meta; docs/mcp.md#sending-keys-from-a-host).
const mcpKeyMeta = "io.github.idemgateway/idempotencyKey"

// newUpstreamMux is the harness's upstream: the HTTP upstream on every path but the MCP server's.
func newUpstreamMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", newUpstream())
	server := newMCPServer()
	getServer := func(*http.Request) *mcp.Server { return server }
	jsonAnswers := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	mux.Handle(mcpJSONPath, jsonAnswers)
	mux.Handle(mcpArgPath, jsonAnswers)
	mux.Handle(mcpSSEPath, mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true}))
	return mux
}

// newMCPServer returns a go-sdk MCP server with one tool, create_ticket, whose result is about
// the size of its arguments, as the HTTP upstream's answer is the size of its request: a text
// content holding the arguments' pad, and structuredContent {id, url}.
func newMCPServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "idembench", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "create_ticket", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Pad string }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "created T-1 " + args.Pad}},
				StructuredContent: map[string]string{"id": "T-1", "url": "https://tickets.example/T-1"},
			}, nil
		})
	return server
}

// rpcIDs numbers the JSON-RPC requests of the bench: every request has an id of its own, so that
// a replay goes out under another id than the call it replays, as an MCP client's retry does.
// From rpcIDBase, the ids are all 10 digits long: a body's pad, and so its arguments, do not
// depend on its id (a replay's arguments must be its execution's).
var rpcIDs atomic.Uint64

const rpcIDBase = 1_000_000_000

// makeToolCall returns a tools/call of create_ticket of exactly size bytes (at least its fixed
// part) with JSON-RPC id id and key in params._meta, or with keyArg in the argument mcpKeyArg; its
// arguments differ per key and, for ids of one length, are the same for every call under one key,
// so that a replay sends what its execution sent.
func makeToolCall(id, key string, size int, keyArg bool) []byte {
	head := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_ticket","_meta":{"` +
		mcpKeyMeta + `":"` + key + `"},"arguments":{"title":"` + key + `","pad":"`
	if keyArg {
		head = `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_ticket",` +
			`"arguments":{"` + mcpKeyArg + `":"` + key + `","title":"` + key + `","pad":"`
	}
	const tail = `"}}}`
	pad := max(size-len(head)-len(tail), 0)
	b := make([]byte, 0, size)
	b = append(b, head...)
	b = append(b, padding[:pad]...)
	return append(b, tail...)
}

// newToolCall returns a request to url with a tools/call under key (keyArg: as an argument), sent as a go-sdk client sends
// one (Accept of both answers, the revision in Mcp-Protocol-Version), and the bytes that the answer
// to it holds: its id, and then its result.
func newToolCall(url, key string, size int, keyArg bool) (*http.Request, []byte, error) {
	id := strconv.FormatUint(rpcIDBase+rpcIDs.Add(1), 10)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(makeToolCall(id, key, size, keyArg)))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpVersion)
	return req, []byte(`"id":` + id + `,"result":{`), nil
}

// mcpName names a run of MCP tools/calls: who ("bare", "execute", "replay") and the answer's form
// ("json", "sse"), for runName.
func mcpName(who, answer string) string { return fmt.Sprintf("mcp-%s-%s", answer, who) }
