package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
)

// TestMCPGoTaskClient: mark3labs/mcp-go's task client (CallTool with params.task, then tasks/get,
// tasks/list, tasks/result) through the built gateway in front of an mcp-go server whose tool runs
// as a task (docs/mcp.md#tasks). The client asks for the task twice under one key in _meta: the
// tool starts once, one task exists, and the client follows it to its result through the gateway,
// which passes tasks/* through unkeyed. Under 2025-11-25 the retry is sent the same handle; under
// 2026-07-28 mcp-go does not declare the tasks extension, so its retry is answered a tool result
// naming the task, which it reads, then follows the task by its id.
//
// mcp-go v1.6.0's CallTool cannot read a task handle (it reports "content is missing" for a
// result without content, against the server directly as through the gateway): the test asks for
// the handle as the client does and finds the task by tasks/list or the retry's text. Its
// 2026-07-28 client still sends tasks/list and tasks/result, which its own server no longer
// serves (404 at the server, not the gateway), so there the task is followed by tasks/get alone.
func TestMCPGoTaskClient(t *testing.T) {
	t.Parallel()
	var started atomic.Int32
	server := mcpgoserver.NewMCPServer("jobs", "1", mcpgoserver.WithTaskCapabilities(true, true, true), mcpgoserver.WithToolCapabilities(true))
	server.AddTaskTool(mcpgo.NewTool("export", mcpgo.WithTaskSupport(mcpgo.TaskSupportRequired)),
		func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CreateTaskResult, error) {
			started.Add(1)
			return &mcpgo.CreateTaskResult{Content: []mcpgo.Content{mcpgo.NewTextContent("exported 42 tickets")}}, nil
		})
	up := httptest.NewServer(mcpgoserver.NewStreamableHTTPServer(server, mcpgoserver.WithStateLess(true)))
	t.Cleanup(up.Close)
	routes := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(routes, fmt.Appendf(nil, `
upstreams:
  jobs: {url: %q, timeout: 10s}
routes:
  - {name: jobs, kind: mcp, upstream: jobs, path: /mcp, key: {meta: %s}}
`, up.URL, metaKey), 0o644); err != nil {
		t.Fatal(err)
	}
	g := StartGateway(t, routes, []string{"IDEMGATEWAY_DATA_DIR=" + filepath.Join(t.TempDir(), "data")})

	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			before := started.Load()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c := startMCPGoClient(ctx, t, g.Proxy+"/mcp", "idemgateway-e2e-mcpgo-tasks", version)
			req := mcpgo.CallToolRequest{}
			req.Params.Name, req.Params.Task = "export", &mcpgo.TaskParams{}
			req.Params.Meta = &mcpgo.Meta{AdditionalFields: map[string]any{metaKey: "export-" + version}}
			_, first := c.CallTool(ctx, req)
			again, retried := c.CallTool(ctx, req)

			var taskID string
			if version == "2025-11-25" {
				// The handle, sent to the first call and replayed to the retry, which the client
				// reads neither time.
				if first == nil || retried == nil || first.Error() != retried.Error() {
					t.Errorf("the call and its retry: %v, then %v; want the same answer to both", first, retried)
				}
				tasks, err := c.ListTasks(ctx, mcpgo.ListTasksRequest{})
				if err != nil || len(tasks.Tasks) != 1 {
					t.Fatalf("tasks/list: %+v, %v; want the one task", tasks, err)
				}
				taskID = tasks.Tasks[0].TaskId
			} else {
				text := ""
				if retried == nil && len(again.Content) > 0 {
					if tc, ok := again.Content[0].(mcpgo.TextContent); ok {
						text = tc.Text
					}
				}
				_, after, found := strings.Cut(text, "as task ")
				if !found || again.IsError {
					t.Fatalf("the retry: %+v, %v; want a tool result naming the task", again, retried)
				}
				taskID = strings.Fields(after)[0]
			}
			got, err := c.WaitForTask(ctx, mcpgo.GetTaskRequest{Params: mcpgo.GetTaskParams{TaskId: taskID}}, 20*time.Millisecond)
			if err != nil || got.Status != mcpgo.TaskStatusCompleted {
				t.Fatalf("tasks/get %s: %+v, %v; want it completed", taskID, got, err)
			}
			if version == "2025-11-25" {
				res, err := c.TaskResult(ctx, mcpgo.TaskResultRequest{Params: mcpgo.TaskResultParams{TaskId: taskID}})
				if err != nil || len(res.Content) == 0 || res.Content[0].(mcpgo.TextContent).Text != "exported 42 tickets" {
					t.Errorf("tasks/result %s: %+v, %v; want the tool's result", taskID, res, err)
				}
			}
			if n := started.Load() - before; n != 1 {
				t.Errorf("the task tool started %d times for a call and its retry, want 1", n)
			}
			if rec := g.mustRecord(t, "jobs/export", "export-"+version); rec.RemoteID != taskID {
				t.Errorf("the record's remote id %q, want the task id %q", rec.RemoteID, taskID)
			}
		})
	}
}
