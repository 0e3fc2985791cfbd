package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"

	"github.com/idemgateway/idemgateway/gateway"
)

// Task handles (docs/contract.md §9 Tasks): a tools/call a server answers with a task handle is
// committed, its task id the record's remote id; the handle is replayed only to a retry of the same
// protocol era that may be sent one, and any other retry gets a tool result naming the task.

// taskRoutes is a kind: mcp route "jobs" in front of upstream, its tools' receipts naming no
// remote id, so that a task's id is the record's.
func taskRoutes(upstream string) string {
	return fmt.Sprintf(`
upstreams:
  jobs: {url: %q, timeout: 10s}
routes:
  - name: jobs
    kind: mcp
    upstream: jobs
    path: /mcp
    key: {meta: %s}
`, upstream, metaKey)
}

// TestMCPTaskHandle2025: an mcp-go server (2025-11-25 tasks) answers a call that asks for a task
// (params.task) with a handle. The retry that asks for a task again is sent the same handle; one
// that does not, or that speaks 2026-07-28, gets a tool result naming the task, without
// "resultType":"complete" added to any handle. The tool's work started once.
func TestMCPTaskHandle2025(t *testing.T) {
	t.Parallel()
	var started atomic.Int32
	server := mcpgoserver.NewMCPServer("jobs", "1", mcpgoserver.WithTaskCapabilities(true, true, true), mcpgoserver.WithToolCapabilities(true))
	server.AddTaskTool(mcpgo.NewTool("export", mcpgo.WithTaskSupport(mcpgo.TaskSupportRequired)),
		func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CreateTaskResult, error) {
			started.Add(1)
			return &mcpgo.CreateTaskResult{}, nil
		})
	up := httptest.NewServer(mcpgoserver.NewStreamableHTTPServer(server, mcpgoserver.WithStateLess(true)))
	t.Cleanup(up.Close)
	srv, _, gw := newGatewayYAML(t, openEmbedded, taskRoutes(up.URL), gateway.Options{})
	call := func(id, task string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"export",` + task + `"_meta":{"` + metaKey + `":"k1"}}}`
	}
	v2025 := []string{"Mcp-Protocol-Version", "2025-11-25"}

	_, h, first := postRaw(t, srv.URL+"/mcp", call("1", `"task":{"ttl":60000},`), v2025...)
	taskID := taskIDOf(t, first, "task", "taskId")
	if h.Get("Idempotency-Decision") != "execute" || taskID == "" {
		t.Fatalf("first call: %s %s, want a task handle executed", h.Get("Idempotency-Decision"), first)
	}
	_, h, again := postRaw(t, srv.URL+"/mcp", call("2", `"task":{"ttl":60000},`), v2025...)
	if h.Get("Idempotency-Decision") != "replay" || taskIDOf(t, again, "task", "taskId") != taskID || strings.Contains(again, "resultType") {
		t.Errorf("a retry that asks for a task: %s %s, want the handle of %s replayed", h.Get("Idempotency-Decision"), again, taskID)
	}
	_, h, plain := postRaw(t, srv.URL+"/mcp", call("3", ""), v2025...)
	if h.Get("Idempotency-Decision") != "replay" || strings.Contains(plain, `"task":{`) || !strings.Contains(plain, "as task "+taskID) {
		t.Errorf("a retry that asks for no task: %s %s, want a tool result naming task %s", h.Get("Idempotency-Decision"), plain, taskID)
	}
	modern := strings.Replace(call("4", ""), `"_meta":{`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},`, 1)
	_, _, later := postRaw(t, srv.URL+"/mcp", modern, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "export")
	if strings.Contains(later, `"task":{`) || !strings.Contains(later, "as task "+taskID) || !strings.Contains(later, `"resultType":"complete"`) {
		t.Errorf("a 2026-07-28 retry: %s, want a complete tool result naming task %s", later, taskID)
	}
	if n := started.Load(); n != 1 {
		t.Errorf("the task tool started %d times, want 1", n)
	}
	if code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/default/jobs%2Fexport/k1", "", ""); code != http.StatusOK || rec["remote_id"] != taskID {
		t.Errorf("the record: %d %v; want remote_id %s", code, rec, taskID)
	}
}

// TestMCPTaskHandle2026: a 2026-07-28 handle (resultType "task", the tasks extension) is replayed
// to a retry that declares the extension, as stored (nothing added to its resultType); a retry that
// does not declare it, or speaks 2025-11-25, gets a tool result naming the task. tasks/get passes
// through unkeyed, with its Mcp-Name (the task id) or without one.
func TestMCPTaskHandle2026(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls int
	var taskGets []string // the Mcp-Name of each tasks/get the server got
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		mu.Lock()
		defer mu.Unlock()
		result := `{"resultType":"task","taskId":"t-26","status":"working","pollIntervalMs":500}`
		switch msg.Method {
		case "tools/call":
			calls++
		case "tasks/get":
			taskGets = append(taskGets, r.Header.Get("Mcp-Name"))
			result = `{"resultType":"complete","taskId":"t-26","status":"completed"}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
	}))
	t.Cleanup(up.Close)
	srv, _, gw := newGatewayYAML(t, openEmbedded, taskRoutes(up.URL), gateway.Options{})
	modern := func(id, caps string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"export","_meta":{"` + metaKey + `":"k1",` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	}
	v2026 := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "export"}
	const declared = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

	if _, h, first := postRaw(t, srv.URL+"/mcp", modern("1", declared), v2026...); h.Get("Idempotency-Decision") != "execute" || taskIDOf(t, first, "taskId") != "t-26" {
		t.Fatalf("first call: %s %s", h.Get("Idempotency-Decision"), first)
	}
	_, h, again := postRaw(t, srv.URL+"/mcp", modern("2", declared), v2026...)
	if h.Get("Idempotency-Decision") != "replay" || taskIDOf(t, again, "taskId") != "t-26" || strings.Count(again, "resultType") != 1 {
		t.Errorf("a retry that declares the tasks extension: %s %s, want the handle replayed as stored", h.Get("Idempotency-Decision"), again)
	}
	if _, _, undeclared := postRaw(t, srv.URL+"/mcp", modern("3", `{}`), v2026...); strings.Contains(undeclared, `"resultType":"task"`) || !strings.Contains(undeclared, "as task t-26") {
		t.Errorf("a retry without the tasks extension: %s, want a tool result naming task t-26", undeclared)
	}
	older := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"export","task":{},"_meta":{"` + metaKey + `":"k1"}}}`
	if _, _, old := postRaw(t, srv.URL+"/mcp", older, "Mcp-Protocol-Version", "2025-11-25"); strings.Contains(old, `"resultType"`) || !strings.Contains(old, "as task t-26") {
		t.Errorf("a 2025-11-25 retry: %s, want a tool result naming task t-26", old)
	}
	get := `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"t-26","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, name := range []string{"t-26", ""} {
		headers := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tasks/get"}
		if name != "" {
			headers = append(headers, "Mcp-Name", name)
		}
		if status, h, body := postRaw(t, srv.URL+"/mcp", get, headers...); status != http.StatusOK || h.Get("Idempotency-Decision") != "" || !strings.Contains(body, `"status":"completed"`) {
			t.Errorf("tasks/get (Mcp-Name %q): %d %q %s, want the server's answer, unkeyed", name, status, h.Get("Idempotency-Decision"), body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 || len(taskGets) != 2 || taskGets[0] != "t-26" || taskGets[1] != "" {
		t.Errorf("the server ran %d calls and got tasks/get with Mcp-Name %q; want 1, and [t-26 \"\"]", calls, taskGets)
	}
	if code, rec := adminDo(t, gw.AdminHandler(""), "GET", "/v1/records/default/jobs%2Fexport/k1", "", ""); code != http.StatusOK || rec["remote_id"] != "t-26" {
		t.Errorf("the record: %d %v; want remote_id t-26", code, rec)
	}
}

// taskIDOf is the string at path in the result of answer, a JSON-RPC response (the last event of
// an SSE answer); "" when there is none.
func taskIDOf(t *testing.T, answer string, path ...string) string {
	t.Helper()
	if i := strings.LastIndex(answer, "data: "); i >= 0 {
		answer = strings.TrimSpace(answer[i+len("data: "):])
	}
	var msg struct{ Result map[string]any }
	if err := json.Unmarshal([]byte(answer), &msg); err != nil {
		t.Fatalf("the answer %q: %v", answer, err)
	}
	var v any = msg.Result
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}
