package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/record"
)

// keyArgumentUpstream is an MCP server whose send_email tool checks its arguments against its
// input schema, which allows no other property (additionalProperties: false, as the go-sdk infers
// it from a struct): a key argument that reached it would make the call fail. Its tool list comes
// one tool a page.
type keyArgumentUpstream struct {
	url   string
	sends atomic.Int64
}

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func newKeyArgumentUpstream(t *testing.T, opts *mcp.StreamableHTTPOptions) *keyArgumentUpstream {
	t.Helper()
	u := new(keyArgumentUpstream)
	server := mcp.NewServer(&mcp.Implementation{Name: "mail", Version: "1"}, &mcp.ServerOptions{PageSize: 1})
	mcp.AddTool(server, &mcp.Tool{Name: "send_email"}, func(_ context.Context, _ *mcp.CallToolRequest, in email) (*mcp.CallToolResult, struct{ ID string }, error) {
		n := u.sends.Add(1)
		return nil, struct{ ID string }{fmt.Sprintf("M-%d", n)}, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "search_mail", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(context.Context, *mcp.CallToolRequest, struct{ Q string }) (*mcp.CallToolResult, struct{}, error) {
		return nil, struct{}{}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// keyArgumentRoutes is a kind: mcp route in front of upstream whose tools take their key in the
// argument idempotency_key, or in _meta.
func keyArgumentRoutes(upstream string) string {
	return fmt.Sprintf(`
upstreams:
  mail: {url: %q, timeout: 10s, mcp: {trust_annotations: true}}
routes:
  - name: mail
    kind: mcp
    upstream: mail
    path: /mcp
    key: {meta: %s, argument: idempotency_key}
    tools:
      send_email: {receipt: {remote_id: /result/structuredContent/ID}}
`, upstream, metaKey)
}

// TestMCPKeyArgument: a client that can send nothing but a tool's arguments (the AI SDK, hosted
// connectors) finds the key argument declared in every page of the tool list, for each guarded
// tool and not the read_only one, not required (a host may send it elsewhere); the key it sends
// there guards the call like one in _meta, and is cut before the call goes on: a server that
// allows no other argument runs the call. A retry replays, other arguments under the key
// conflict, a key in _meta that differs from the argument is refused, and the session serves
// calls after the refusals.
func TestMCPKeyArgument(t *testing.T) {
	t.Parallel()
	for _, mode := range mcpServerModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			up := newKeyArgumentUpstream(t, mode.opts)
			srv, _, _ := newGatewayYAML(t, openEmbedded, keyArgumentRoutes(up.url), gateway.Options{})
			cs, tap := connectMCP(t, srv.URL, mode.version, nil)

			schemas := map[string]map[string]any{}
			for tool, err := range cs.Tools(context.Background(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(tool.InputSchema)
				var s map[string]any
				if err := json.Unmarshal(b, &s); err != nil {
					t.Fatal(err)
				}
				schemas[tool.Name] = s
			}
			send := schemas["send_email"]
			props, _ := send["properties"].(map[string]any)
			if _, ok := props["idempotency_key"]; !ok || props["to"] == nil || send["additionalProperties"] != false {
				t.Errorf("send_email's schema %v: want the server's, with idempotency_key declared", send)
			}
			if req, _ := send["required"].([]any); slices.Contains(req, any("idempotency_key")) || len(req) != 2 {
				t.Errorf("send_email requires %v, want the server's [to subject]: a host may send the key elsewhere", send["required"])
			}
			if props, _ := schemas["search_mail"]["properties"].(map[string]any); props == nil || props["idempotency_key"] != nil {
				t.Errorf("the read_only search_mail's schema %v: want the server's, unchanged", schemas["search_mail"])
			}

			call := func(meta string, args map[string]any) *mcp.CallToolResult {
				t.Helper()
				return callTool(t, cs, "send_email", meta, args)
			}
			first := call("", map[string]any{"to": "a@example.com", "subject": "hi", "idempotency_key": "k1"})
			if first.IsError || lastDecision(tap) != "execute" {
				t.Fatalf("first call: %s (decision %q), want executed", resultText(first), lastDecision(tap))
			}
			again := call("", map[string]any{"subject": "hi", "idempotency_key": "k1", "to": "a@example.com"})
			if got := lastDecision(tap); got != "replay replayed" || resultText(again) != resultText(first) {
				t.Errorf("retry: decision %q, %s; want the first call's answer replayed", got, resultText(again))
			}
			if got := call("k1", map[string]any{"to": "a@example.com", "subject": "hi", "idempotency_key": "k1"}); lastDecision(tap) != "replay replayed" {
				t.Errorf("the same key in _meta and the argument: %s, want a replay", resultText(got))
			}
			conflict := call("", map[string]any{"to": "b@example.com", "subject": "hi", "idempotency_key": "k1"})
			if !conflict.IsError || !strings.Contains(resultText(conflict), "to") {
				t.Errorf("other arguments under the key: %s, want a conflict naming /params/arguments/to", resultText(conflict))
			}
			mismatch := call("k2", map[string]any{"to": "a@example.com", "subject": "hi", "idempotency_key": "k1"})
			if text := resultText(mismatch); !mismatch.IsError || !strings.Contains(text, `params.arguments["idempotency_key"] holds another key than params._meta`) || strings.Contains(text, "k2") {
				t.Errorf("another key in _meta: %s, want a mismatch naming neither key", text)
			}
			for _, bad := range []any{17, 5, ""} { // 5: one byte, no string to look into
				invalid := call("", map[string]any{"to": "a@example.com", "subject": "hi", "idempotency_key": bad})
				if text := resultText(invalid); !invalid.IsError || !strings.Contains(text, `params.arguments["idempotency_key"]`) {
					t.Errorf("the key %#v: %s, want it refused", bad, text)
				}
			}
			if n := up.sends.Load(); n != 1 {
				t.Errorf("send_email ran %d times, want 1", n)
			}
			if next := call("", map[string]any{"to": "a@example.com", "subject": "hi", "idempotency_key": "k3"}); next.IsError || up.sends.Load() != 2 {
				t.Errorf("a new key after the refusals: %s, want it sent", resultText(next))
			}
		})
	}
}

// TestMCPDerivedKeyFromArguments: for a client that sends no key at all and retries blindly (the
// AI SDK's maxRetries: a new JSON-RPC id, perhaps a new session, the arguments re-encoded),
// key.derive "{tenant}:{body:/params/arguments}" is the canonical JSON of the arguments: retries
// that differ in id, member order, white space, number spelling and string escapes replay; other
// arguments are another action. The key is kept as a digest: no argument value in the store.
func TestMCPDerivedKeyFromArguments(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	yaml := strings.Replace(mcpRoutes(up.url, ""), "create_ticket: {receipt:", `create_ticket: {key: {derive: "{tenant}:{body:/params/arguments}"}, receipt:`, 1)
	srv, store, _ := newGatewayYAML(t, openEmbedded, yaml, gateway.Options{})
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	for _, c := range []struct{ name, body, want string }{
		{"first", call(`1`, `{"name":"create_ticket","arguments":{"title":"Disk full","priority":1,"tags":["a","b"]}}`), "execute"},
		{"new id, members reordered, spaced", call(`"retry-2"`, `{ "arguments" : { "tags" : [ "a" , "b" ] , "priority" : 1.0 , "title" : "Disk full" } , "name" : "create_ticket" }`), "replay"},
		{"number and string spelled otherwise", call(`3`, `{"name":"create_ticket","arguments":{"priority":10e-1,"title":"Disk\u0020full","tags":["a","b"]}}`), "replay"},
		{"other arguments", call(`4`, `{"name":"create_ticket","arguments":{"title":"Disk full","priority":2,"tags":["a","b"]}}`), "execute"},
	} {
		if _, h, body := postRaw(t, srv.URL+"/mcp", c.body); h.Get("Idempotency-Decision") != c.want {
			t.Errorf("%s: decision %q (%s), want %s", c.name, h.Get("Idempotency-Decision"), body, c.want)
		}
	}
	if n := up.count("create_ticket"); n != 2 {
		t.Errorf("the tool ran %d times, want 2: once per set of arguments", n)
	}
	sum := sha256.Sum256([]byte(`default:{"priority":1,"tags":["a","b"],"title":"Disk full"}`))
	key := record.NewToolScope("tickets/create_ticket").Key("default", "sha256:"+hex.EncodeToString(sum[:]), "")
	if state, _, err := store.Get(context.Background(), key); err != nil || state != record.StateCommitted {
		t.Errorf("record at the digest of the canonical arguments: %q, %v; want a committed record", state, err)
	}
}

// TestMCPKeyArgumentOddSchemas: tool lists whose input schemas are null, have null properties,
// or are no object at all still reach the client whole: each tool the gateway can declare the
// argument in is declared, the others are passed as they are.
func TestMCPKeyArgumentOddSchemas(t *testing.T) {
	t.Parallel()
	tools := `[{"name":"a","inputSchema":null},{"name":"b","inputSchema":{"type":"object","properties":null}},` +
		`{"name":"c","inputSchema":true},{"name":"d"},{"name":"e","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}]`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct{ ID json.RawMessage }
		_ = json.NewDecoder(r.Body).Decode(&msg)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}`, msg.ID, tools)
	}))
	t.Cleanup(up.Close)
	srv, _, _ := newGatewayYAML(t, openEmbedded, keyArgumentRoutes(up.URL), gateway.Options{})
	_, _, body := postRaw(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var answer struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || len(answer.Result.Tools) != 5 {
		t.Fatalf("the tool list %s (%v): want all five tools", body, err)
	}
	for _, tool := range answer.Result.Tools {
		declared := strings.Contains(string(tool.InputSchema), `"idempotency_key"`)
		if want := tool.Name != "c"; declared != want {
			t.Errorf("tool %s: schema %s, declared %v, want %v", tool.Name, tool.InputSchema, declared, want)
		}
	}
}

// TestMCPKeyArgumentBatchedToolList: a tools/list answer that a 2025-03-26 server sends batched,
// in an SSE event or a JSON answer, is read as one sent alone: the tool's schema declares the key
// argument.
func TestMCPKeyArgumentBatchedToolList(t *testing.T) {
	t.Parallel()
	const tools = `[{"name":"create_ticket","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}}}]`
	for _, c := range []struct{ name, ct, format string }{
		{"SSE", "text/event-stream", "data: [{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}},%s]\n\n"},
		{"JSON", "application/json", "[%s]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var msg struct{ ID json.RawMessage }
				_ = json.NewDecoder(r.Body).Decode(&msg)
				w.Header().Set("Content-Type", c.ct)
				fmt.Fprintf(w, c.format, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}`, msg.ID, tools))
			}))
			t.Cleanup(up.Close)
			srv, _, _ := newGatewayYAML(t, openEmbedded, keyArgumentRoutes(up.URL), gateway.Options{})
			_, _, body := postRaw(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			if !strings.Contains(body, `"idempotency_key"`) || !strings.Contains(body, `"title"`) {
				t.Errorf("the batched tool list %s: want create_ticket's schema to declare idempotency_key", body)
			}
		})
	}
}

// TestMCPHeaderAndMetaKeysAgree: a call that sends its key in the header and in params._meta must
// send the same key in both: the gateway does not choose between two keys (a header set once per
// connection would otherwise put one key on every call, replaying or refusing other actions under
// it). Different keys are refused (idempotency_key_mismatch, naming neither key) and nothing
// reaches the server; the same key in both is the call's key.
func TestMCPHeaderAndMetaKeysAgree(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, &mcp.StreamableHTTPOptions{Stateless: true})
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	call := func(id, meta string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":"t"},"_meta":{"` + metaKey + `":"` + meta + `"}}}`
	}
	status, _, body := postRaw(t, srv.URL+"/mcp", call("1", "meta-key"), "Idempotency-Key", "header-key")
	if status != http.StatusOK || !strings.Contains(body, "two different idempotency keys") || !strings.Contains(body, `"id":1`) ||
		strings.Contains(body, "meta-key") || strings.Contains(body, "header-key") || up.count("create_ticket") != 0 {
		t.Errorf("different keys in the header and _meta: %d %.300s, %d tool calls; want a mismatch naming neither key, none", status, body, up.count("create_ticket"))
	}
	status, h, body := postRaw(t, srv.URL+"/mcp", call("2", "same-key"), "Idempotency-Key", "same-key")
	if status != http.StatusOK || h.Get("Idempotency-Decision") != "execute" || up.count("create_ticket") != 1 {
		t.Errorf("the same key in both: %d %q %.300s, want executed", status, h.Get("Idempotency-Decision"), body)
	}
}
