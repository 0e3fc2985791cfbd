package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/gateway/mcpwire"
)

// TestMakeToolCall: a tools/call of the size asked, one JSON-RPC request whose tool and key (in
// params._meta, or as the argument mcpKeyArg) the gateway reads.
func TestMakeToolCall(t *testing.T) {
	t.Parallel()
	for _, keyArg := range []bool{false, true} {
		body := makeToolCall("1000000012", "mcp-k1", mediumBody, keyArg)
		if len(body) != mediumBody {
			t.Errorf("keyArg %v: %d bytes, want %d", keyArg, len(body), mediumBody)
		}
		msg, err := mcpwire.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		meta, want := msg.Meta(mcpKeyMeta), `"mcp-k1"`
		arg, _, err := msg.CutArgument(body, mcpKeyArg)
		if keyArg {
			meta, arg, want = arg, meta, `"mcp-k1"`
		}
		if msg.Kind != mcpwire.Request || msg.Method != "tools/call" || msg.Tool != "create_ticket" || string(msg.ID) != "1000000012" ||
			string(meta) != want || arg != nil || err != nil {
			t.Errorf("keyArg %v: parsed %+v, key %s, the other place %s (%v)", keyArg, msg, meta, arg, err)
		}
	}
}

// TestMCPTargets: the bench's tools/calls, through the bare proxy and through the gateway's kind:
// mcp routes (embedded store), to the go-sdk server of each form of answer, pass the load
// generator's checks: the result under the request's id, the decision; a retry under the same key
// and a new id replays.
func TestMCPTargets(t *testing.T) {
	upstream := httptest.NewServer(newUpstreamMux())
	t.Cleanup(upstream.Close)
	up, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	gw, closeStore, err := newEmbeddedGateway(up, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	gateway := httptest.NewServer(gw)
	t.Cleanup(gateway.Close)
	bare := httptest.NewServer(newBareProxy(up))
	t.Cleanup(bare.Close)

	l := newLoader(1)
	for _, a := range append(mcpAnswers, mcpArgAnswer) {
		keys := &cycleKeys{keys: []string{"mcp-" + a.name}}
		for _, tg := range []*target{
			{name: "bare", url: bare.URL + a.path, keys: keys},
			{name: "execute", url: gateway.URL + a.path, decision: "execute", keys: keys},
			{name: "replay", url: gateway.URL + a.path, decision: "replay", keys: keys},
		} {
			tg.size, tg.mcp, tg.keyArg = mediumBody, true, a.keyArg
			if err := l.do(tg); err != nil {
				t.Errorf("%s, %s: %v", a.name, tg.name, err)
			}
		}
		// The check fails where the answer is not the call's: an HTTP route answers 201.
		wrong := &target{name: "http route", url: gateway.URL + routePath, decision: "execute", keys: keys, size: mediumBody, mcp: true}
		if err := l.do(wrong); err == nil || !strings.Contains(err.Error(), "status") {
			t.Errorf("a tools/call to an HTTP route: %v, want a status error", err)
		}
	}
	// A result under another id is no answer to the call.
	otherID := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":{"content":[]}}`)
	}))
	t.Cleanup(otherID.Close)
	if err := l.do(&target{name: "other id", url: otherID.URL, keys: newKeys("mcp"), size: mediumBody, mcp: true}); err == nil ||
		!strings.Contains(err.Error(), "holds no") {
		t.Errorf("an answer under another id: %v, want an error", err)
	}
}
