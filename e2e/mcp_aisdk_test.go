package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMCPAISDKKeyArgument: the AI SDK's MCP client (@ai-sdk/mcp) sends a tool call's name and
// arguments and nothing else. The tool list it hands the model declares the key argument
// (key.argument); the key the model fills in guards the call: a retry with the same
// key and arguments replays the first ticket (and says so in its _meta), other arguments under the
// key are a conflict the client reads as a tool error, and a new key acts again. The server never
// sees the argument. Each way of the MCP routes: sessions with SSE and JSON answers, stateless.
func TestMCPAISDKKeyArgument(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	forEachWay(t, e, mcpWays, func(t *testing.T, w mcpWay) {
		before := e.sb.mcpCounts(t, "create_ticket")
		key := "aisdk-" + w.name
		var out struct {
			Schema struct {
				Properties map[string]any `json:"properties"`
			} `json:"schema"`
			Calls []tsCall `json:"calls"`
		}
		runNode(t, "aisdk.mjs", map[string]any{"url": e.gw.Proxy + w.path, "tool": "create_ticket", "calls": []map[string]any{
			{"title": "Disk full on db-1", keyArgument: key},
			{"title": "Disk full on db-1", keyArgument: key},
			{"title": "Disk full on db-2", keyArgument: key},
			{"title": "Disk full on db-2", keyArgument: key + "-2"},
		}}, &out)
		if p, _ := out.Schema.Properties[keyArgument].(map[string]any); p == nil || !strings.Contains(fmt.Sprint(p["description"]), "Idempotency key") {
			t.Errorf("the schema the model gets: %+v, want %s declared and described", out.Schema, keyArgument)
		}
		if len(out.Calls) != 4 {
			t.Fatalf("calls %+v, want 4", out.Calls)
		}
		first, again, conflict, next := out.Calls[0], out.Calls[1], out.Calls[2], out.Calls[3]
		if first.ticket() == "" || again.ticket() != first.ticket() || again.decision() != "replay" {
			t.Errorf("first %+v, retry %+v: want one ticket, the retry a replay that says so", first, again)
		}
		if !conflict.IsError || conflict.decision() != "conflict" || !strings.Contains(strings.Join(conflict.Texts, " "), "different arguments") {
			t.Errorf("other arguments under the key: %+v, want a conflict the model can read", conflict)
		}
		if next.ticket() == "" || next.ticket() == first.ticket() {
			t.Errorf("a new key: %+v, want a new ticket", next)
		}
		e.sb.expectSince(t, "create_ticket", before, 2, 2)
	})
}

// keyArgument is the argument the MCP routes of the e2e tests read keys from
// (testdata/mcp.yaml.tmpl, key.argument).
const keyArgument = "idempotency_key"

// TestMCPAISDKRetriesWhileTheCallRuns: a host that sends no key (the AI SDK with maxRetries: 2) is
// told 504 by an ingress in front of the gateway while the first call still runs upstream, and the
// SDK sends the call again with a new JSON-RPC id (it retries 408, 409, 429 and 5xx). The route
// derives the key from the arguments ({tenant}:{body:/params/arguments}) and waits (the kind: mcp
// default): the retry gets the first call's ticket, once. The ingress is a proxy that answers the
// first tools/call 504 once the sandbox holds it (the call goes on to the gateway), and forwards
// everything else.
func TestMCPAISDKRetriesWhileTheCallRuns(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, embeddedStore)
	before := e.sb.mcpCounts(t, "slow_create")
	hold := t.Name()
	cut := newFirstCallCutter(t, e, hold)
	var out struct {
		Calls []tsCall `json:"calls"`
	}
	runNode(t, "aisdk.mjs", map[string]any{"url": cut.URL + "/derived/mcp-stateless", "tool": "slow_create", "maxRetries": 2,
		"calls": []map[string]any{{"title": "Rotate the keys", "hold": hold}}}, &out)
	if err := cut.wait(); err != nil {
		t.Fatal(err)
	}
	if len(out.Calls) != 1 || out.Calls[0].ticket() == "" || out.Calls[0].decision() != "replay" {
		t.Fatalf("the call: %+v, want the first call's ticket replayed to the SDK's retry", out.Calls)
	}
	if n := cut.calls.Load(); n != 2 {
		t.Errorf("%d tools/calls reached the proxy, want the call and the SDK's one retry", n)
	}
	e.sb.expectSince(t, "slow_create", before, 1, 1)
}

// firstCallCutter is a proxy in front of the gateway's MCP routes: the first tools/call goes on to
// the gateway in the background, and once the sandbox holds it (on hold) the client is answered
// 504, as an ingress that gave up on the gateway answers; when the client sends its next tools/call
// (the retry), the hold is released. Everything else is proxied as it is.
type firstCallCutter struct {
	*httptest.Server
	calls atomic.Int32
	errs  chan error // the background call's and the release's errors, nil for none
}

func newFirstCallCutter(t *testing.T, e *env, hold string) *firstCallCutter {
	t.Helper()
	gw, err := url.Parse(e.gw.Proxy)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(gw)
	c := &firstCallCutter{errs: make(chan error, 2)}
	t.Cleanup(func() { _ = e.sb.releaseHold(hold) }) // so that a failed test leaves no call held
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method != http.MethodPost || !bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			rp.ServeHTTP(w, r)
			return
		}
		switch c.calls.Add(1) {
		case 1:
			go c.forward(e.gw.Proxy+r.URL.Path, r.Header.Clone(), body)
			c.cutWhenHeld(w, e.sb, hold)
		case 2:
			go func() { c.errs <- e.sb.releaseHold(hold) }()
			rp.ServeHTTP(w, r)
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

// forward sends the first tools/call to the gateway, as the client would have, and reads its answer.
func (c *firstCallCutter) forward(url string, h http.Header, body []byte) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		c.errs <- err
		return
	}
	req.Header = h
	resp, err := Client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c.errs <- err
}

// cutWhenHeld answers 504 once the sandbox holds the call.
func (c *firstCallCutter) cutWhenHeld(w http.ResponseWriter, sb *Sandbox, hold string) {
	deadline := time.Now().Add(30 * time.Second) // bounds a hang only
	for n, err := sb.held(hold); n == 0 && err == nil && time.Now().Before(deadline); n, err = sb.held(hold) {
		time.Sleep(10 * time.Millisecond) // a poll's pace
	}
	http.Error(w, "upstream request timeout", http.StatusGatewayTimeout)
}

// wait returns the errors of the background call and of the release, or says which of them did
// not end within 30 s (the client never retried: nothing released the first call).
func (c *firstCallCutter) wait() error {
	var errs []error
	for range 2 {
		select {
		case err := <-c.errs:
			errs = append(errs, err)
		case <-time.After(30 * time.Second):
			return errors.Join(append(errs, errors.New("the first call or the release did not end: did the client retry?"))...)
		}
	}
	return errors.Join(errs...)
}
