package gateway_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/gateway"
)

// rawSession opens a session on the gateway's /mcp by raw HTTP, speaking version, and returns
// its Mcp-Session-Id.
func rawSession(t *testing.T, url, version string) string {
	t.Helper()
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	status, h, body := postRaw(t, url, init)
	sid := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	if status, _, body := postRaw(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", version); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	return sid
}

// TestMCPCancelAbsorbedHoweverSent: a client's notifications/cancelled of a guarded call in flight
// never reaches the server (cancel: finish), also when it spells the call's id otherwise (5.0 for
// 5, "\u0061" for "a": the server reads them as the same id) or sends it in a batch (which a
// 2025-03-26 server takes): the tool runs to its end and the client gets its result.
func TestMCPCancelAbsorbedHoweverSent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, callID, cancel string
		status               int
	}{
		{"number spelt otherwise", "5", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5.0}}`, http.StatusAccepted},
		{"string escaped", `"a"`, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\u0061"}}`, http.StatusAccepted},
		{"in a batch", "5", `[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}]`, http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := newMCPUpstream(t, nil)
			srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
			url := srv.URL + "/mcp"
			sid := rawSession(t, url, "2025-03-26") // no Mcp-Protocol-Version below: the server takes batches
			answer := make(chan string, 1)
			go func() {
				_, _, body := postRaw(t, url, `{"jsonrpc":"2.0","id":`+c.callID+`,"method":"tools/call","params":{"name":"slow_create","arguments":{"ms":600},"_meta":{"`+metaKey+`":"k1"}}}`, "Mcp-Session-Id", sid)
				answer <- body
			}()
			time.Sleep(200 * time.Millisecond) // the call is in flight
			if status, _, body := postRaw(t, url, c.cancel, "Mcp-Session-Id", sid); status != c.status {
				t.Errorf("cancel: %d %s, want %d", status, body, c.status)
			}
			if body := <-answer; !strings.Contains(body, `"structuredContent":{"id":"T-1"}`) {
				t.Errorf("the call answered %s, want its result", body)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if n := up.finished["slow_create"]; n != 1 {
				t.Errorf("the tool finished %d times, want 1: the cancel reached the server", n)
			}
		})
	}
}

func TestMCPBreakProbeDisconnect(t *testing.T) {
	up := newMCPUpstream(t, nil)
	srv, _, _ := newGatewayYAML(t, openEmbedded, mcpRoutes(up.url, ""), gateway.Options{})
	url := srv.URL + "/mcp"
	sid := rawSession(t, url, "2025-11-25")
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow_create","arguments":{"ms":400},"_meta":{"` + metaKey + `":"k1"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(call))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("headers %v", resp.Header)
	_, _ = bufio.NewReader(resp.Body).Peek(1)
	resp.Body.Close()
	tr.CloseIdleConnections()
	time.Sleep(800 * time.Millisecond)
	_, h, body := postRaw(t, url, strings.Replace(call, `"id":5`, `"id":6`, 1), "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	t.Logf("retry: %s %s", h.Get("Idempotency-Decision"), body)
	t.Logf("calls %d", up.count("slow_create"))
}
