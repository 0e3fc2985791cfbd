package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
)

// TestActivity: GET /v1/activity, the operator console's view of the process, lists its calls in
// flight and its pending receipts, and counts its decisions per minute over the last hour.
func TestActivity(t *testing.T) {
	t.Parallel()
	store := &failingCommits{Store: openEmbedded(t)}
	up := newHeldUpstream(t, nil)
	srv, _, gw := newGatewayOn(t, store, settleYAML(up.URL, 10*time.Second, 1500*time.Millisecond), gateway.Options{})
	gw.SetSettleRetry(10*time.Millisecond, 50*time.Millisecond)
	admin := gw.AdminHandler("")
	activity := func() map[string]any {
		t.Helper()
		code, a := adminDo(t, admin, http.MethodGet, "/v1/activity", "", "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/activity: %d %v", code, a)
		}
		return a
	}
	keys := func(list any) string {
		var out []string
		for _, e := range list.([]any) {
			m := e.(map[string]any)
			out = append(out, fmt.Sprint(m["tenant"], "/", m["tool"], "/", m["idempotency_key"]))
		}
		return fmt.Sprint(out)
	}

	if a := activity(); keys(a["in_flight"]) != "[]" || keys(a["pending"]) != "[]" || a["in_flight_count"] != 0.0 {
		t.Fatalf("an idle gateway's activity: %v", a)
	}
	started := time.Now()
	answered := make(chan reply, 1)
	go func() {
		r, _ := send(srv.URL, "flying", `{}`)
		answered <- r
	}()
	eventually.True(t, "the call to reach the upstream", func() bool { return up.calls.Load() == 1 })
	a := activity()
	if keys(a["in_flight"]) != "[default/create_ticket/flying]" || a["in_flight_count"] != 1.0 {
		t.Fatalf("in flight: %v (count %v), want the held call", a["in_flight"], a["in_flight_count"])
	}
	if at, err := time.Parse(time.RFC3339Nano, a["in_flight"].([]any)[0].(map[string]any)["started_at"].(string)); err != nil || at.Before(started.Add(-time.Second)) {
		t.Errorf("the call in flight started at %v (%v), want about %v", at, err, started)
	}

	// The store fails the commit: the receipt is pending, retried in the background.
	store.failing.Store(true)
	up.release(1)
	if r := <-answered; r.header.Get("Idempotency-Receipt") != "pending" {
		t.Fatalf("the call: %s, want Idempotency-Receipt: pending", r)
	}
	a = activity()
	if keys(a["in_flight"]) != "[]" || keys(a["pending"]) != "[default/create_ticket/flying]" || a["pending_count"] != 1.0 {
		t.Fatalf("after the answer: in flight %v, pending %v (count %v); want none in flight, the receipt pending", a["in_flight"], a["pending"], a["pending_count"])
	}
	if op := a["pending"].([]any)[0].(map[string]any)["op"]; op != "commit" {
		t.Errorf("the pending write's op is %v, want commit", op)
	}
	store.failing.Store(false)
	eventually.True(t, "the pending receipt to be stored", func() bool { return keys(activity()["pending"]) == "[]" })

	// Decisions per minute: 60 minutes, the current one last; the hour holds the one execution
	// and one replay.
	if r, err := send(srv.URL, "flying", `{}`); err != nil || r.String() != "201 replay" {
		t.Fatalf("a retry: %s %v, want 201 replay", r, err)
	}
	minutes := activity()["decisions_per_minute"].([]any)
	if len(minutes) != 60 {
		t.Fatalf("%d minutes, want 60", len(minutes))
	}
	sum := map[string]float64{}
	for _, m := range minutes {
		for d, n := range m.(map[string]any)["decisions"].(map[string]any) {
			sum[d] += n.(float64)
		}
	}
	if sum["execute"] != 1 || sum["replay"] != 1 || sum["conflict"] != 0 {
		t.Errorf("the hour's decisions: %v, want 1 execute, 1 replay", sum)
	}
	last, _ := time.Parse(time.RFC3339, minutes[59].(map[string]any)["start"].(string))
	if now := time.Now(); last.After(now) || now.Sub(last) > 2*time.Minute {
		t.Errorf("the last minute starts at %v, want the current minute (now %v)", last, now)
	}
}

// TestAdminQueueOldestFirst: GET /v1/records?order=oldest, the console's queue, lists the
// outcome_unknown records by started_at (not key order), with their total; a record's GET says
// when its call started and what a resolve as committed stores by default, the route's usual
// success (its first committed code), which a resolve without response_status stores.
func TestAdminQueueOldestFirst(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open storeFactory) {
		up, _ := unknownUpstream(t)
		srv, _, gw := newGatewayYAML(t, open, fmt.Sprintf(`
upstreams:
  u: {url: %q, timeout: 5s}
routes:
  - {name: create_ticket, upstream: u, method: POST, path: /v1/tickets, class: non_idempotent,
     outcome: {committed: [201, 200]}}
`, up.URL), gateway.Options{})
		admin := gw.AdminHandler("")
		for _, k := range []string{"k3", "k1", "k2"} { // started in this order
			if r, err := send(srv.URL, k, `{}`); err != nil || r.String() != "502 execute" {
				t.Fatalf("%s: %s %v, want 502 execute", k, r, err)
			}
		}
		list := func(query string) (string, map[string]any) {
			t.Helper()
			code, page := adminDo(t, admin, http.MethodGet, "/v1/records?state=outcome_unknown&order=oldest"+query, "", "")
			if code != http.StatusOK {
				t.Fatalf("list%s: %d %v", query, code, page)
			}
			var got []any
			for _, r := range page["records"].([]any) {
				got = append(got, r.(map[string]any)["idempotency_key"])
			}
			return fmt.Sprint(got), page
		}
		if got, page := list(""); got != "[k3 k1 k2]" || page["total"] != 3.0 || page["next_cursor"] != nil {
			t.Fatalf("oldest first: %s, total %v, cursor %v; want [k3 k1 k2], 3, none", got, page["total"], page["next_cursor"])
		}
		if got, page := list("&limit=2&tenant=default"); got != "[k3 k1]" || page["total"] != 3.0 {
			t.Fatalf("the oldest two: %s, total %v; want [k3 k1], 3", got, page["total"])
		}
		if got, page := list("&tenant=other"); got != "[]" || page["total"] != 0.0 {
			t.Fatalf("another tenant's queue: %s, total %v; want [], 0", got, page["total"])
		}
		for _, bad := range []string{"order=newest", "order=oldest&cursor=azE"} {
			if code, _ := adminDo(t, admin, http.MethodGet, "/v1/records?"+bad, "", ""); code != http.StatusBadRequest {
				t.Errorf("list %s: %d, want 400", bad, code)
			}
		}

		code, rec := adminDo(t, admin, http.MethodGet, "/v1/records/default/create_ticket/k1", "", "")
		if code != http.StatusOK || rec["resolve_status"] != 201.0 {
			t.Fatalf("GET an unknown record: %d, resolve_status %v; want 200, 201 (the route's first committed code)", code, rec["resolve_status"])
		}
		if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["started_at"])); err != nil || time.Since(at) > time.Minute {
			t.Errorf("started_at %v (%v), want the call's start", rec["started_at"], err)
		}
		if code, rec := adminDo(t, admin, http.MethodPost, "/v1/records/default/create_ticket/k1/resolve", "", `{"outcome":"committed","remote_id":"T-9"}`); code != http.StatusOK || rec["response_status"] != 201.0 {
			t.Fatalf("resolve without response_status: %d, response_status %v; want 200, 201", code, rec["response_status"])
		}
		if code, rec := adminDo(t, admin, http.MethodGet, "/v1/records/default/create_ticket/k1", "", ""); code != http.StatusOK || rec["resolve_status"] != nil {
			t.Errorf("GET a committed record: %d, resolve_status %v; want none", code, rec["resolve_status"])
		}
		if got, _ := list(""); got != "[k3 k2]" {
			t.Errorf("after resolving k1 the queue is %s, want [k3 k2]", got)
		}
	})
}

// TestAdminStoredResponse: GET .../response shows the answer a committed record replays: its
// status, content type and body as text, cut at 64 KiB on a rune boundary; a binary body is
// not shown, a body the receipt did not keep is said to be so, and a record holding no response
// says so. GET .../request shows the request's canonical document.
func TestAdminStoredResponse(t *testing.T) {
	t.Parallel()
	big := `{"text":"` + strings.Repeat("é", 40<<10) + `"}` // 80 KiB of 2-byte runes
	bodies := map[string]string{"small": `{"id":"T-1","title":"<b>x</b>"}`, "big": big, "binary": "\xff\xfe\x00\x01"}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Answer string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		body, ok := bodies[req.Answer]
		if !ok {
			w.WriteHeader(http.StatusBadGateway) // unknown: the record holds no response
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !utf8.ValidString(body) {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(up.Close)
	srv, _, gw := newGateway(t, openEmbedded, up.URL, gateway.Options{MaxReceiptBodyBytes: 96 << 10})
	admin := gw.AdminHandler("")
	bodies["over"] = `{"text":"` + strings.Repeat("x", 100<<10) + `"}` // over the receipt's bound: not kept
	for key := range bodies {
		if r, err := send(srv.URL, key, `{"answer":"`+key+`"}`); err != nil || r.String() != "201 execute" {
			t.Fatalf("%s: %s %v, want 201 execute", key, r, err)
		}
	}
	view := func(key string) map[string]any {
		code, v := adminDo(t, admin, http.MethodGet, "/v1/records/default/create_ticket/"+key+"/response", "", "")
		if code != http.StatusOK {
			t.Fatalf("GET %s/response: %d %v", key, code, v)
		}
		return v
	}
	text := func(v map[string]any) (string, map[string]any) {
		body, _ := v["body"].(map[string]any)
		s, _ := body["text"].(string)
		return s, body
	}
	if v := view("small"); v["stored"] != true || v["status"] != 201.0 || v["content_type"] != "application/json" || v["body_kept"] != true {
		t.Errorf("small: %v", v)
	} else if s, body := text(v); s != bodies["small"] || body["truncated"] != nil {
		t.Errorf("small: body %v, want %q whole", body, bodies["small"])
	}
	s, body := text(view("big"))
	if body["truncated"] != true || body["bytes"] != float64(len(big)) || len(s) > 64<<10 || len(s) < 64<<10-3 || s != big[:len(s)] {
		t.Errorf("big: truncated %v, bytes %v, %d bytes shown; want truncated, %d, the first 64 KiB up to a rune", body["truncated"], body["bytes"], len(s), len(big))
	}
	if s, body := text(view("binary")); body["binary"] != true || s != "" {
		t.Errorf("binary: %v, want binary and no text", body)
	}
	// The request that claimed the key: its canonical document.
	if code, v := adminDo(t, admin, http.MethodGet, "/v1/records/default/create_ticket/small/request", "", ""); code != http.StatusOK || v["kept"] != true {
		t.Errorf("GET small/request: %d %v", code, v)
	} else if s, _ := text(map[string]any{"body": v["document"]}); !strings.Contains(s, `"body":{"answer":"small"}`) {
		t.Errorf("small's request document: %q, want the canonical request, its body {\"answer\":\"small\"}", s)
	}
	if v := view("over"); v["stored"] != true || v["body_kept"] != false || v["body"] != nil {
		t.Errorf("a body over the receipt's bound: %v, want stored, body_kept false, no body", v)
	}
	// An unknown outcome holds no response; no record, a 404.
	if r, err := send(srv.URL, "none", `{}`); err != nil || r.String() != "502 execute" {
		t.Fatalf("none: %s %v, want 502 execute", r, err)
	}
	if v := view("none"); v["stored"] != false || v["body"] != nil {
		t.Errorf("an unknown outcome's response: %v, want stored false", v)
	}
	if code, v := adminDo(t, admin, http.MethodGet, "/v1/records/default/create_ticket/nothing/response", "", ""); code != http.StatusNotFound {
		t.Errorf("GET the response of no record: %d %v, want 404", code, v)
	}
}

// TestAdminRecordByQuery: /v1/record names a record by its query, so that a key or tenant that is
// "." or ".." (which clients remove from a URL's path) can be read and resolved; a resolve that
// cannot be stored as sent is refused whole.
func TestAdminRecordByQuery(t *testing.T) {
	t.Parallel()
	up, calls := unknownUpstream(t)
	srv, _, gw := newGateway(t, openEmbedded, up.URL, gateway.Options{})
	admin := gw.AdminHandler("")
	for _, key := range []string{"..", "."} {
		if r, err := send(srv.URL, key, `{}`); err != nil || r.String() != "502 execute" {
			t.Fatalf("key %q: %s %v, want 502 execute", key, r, err)
		}
	}
	if code, rec := adminDo(t, admin, http.MethodGet, "/v1/record?tenant=default&tool=create_ticket&key=..", "", ""); code != http.StatusOK || rec["idempotency_key"] != ".." || rec["state"] != "outcome_unknown" {
		t.Fatalf("GET /v1/record key ..: %d %v", code, rec)
	}
	for _, bad := range []string{
		`{"outcome":"committed"} {"outcome":"not_committed"}`,
		`{"outcome":"committed","remote_url":"javascript:alert(1)"}`,
		`{"outcome":"committed","remote_url":"/relative"}`,
		`{"outcome":"committed","remote_id":"T-1
X-Injected: 1"}`,
		`{"outcome":"committed","response_status":199}`,
	} {
		if code, v := adminDo(t, admin, http.MethodPost, "/v1/record/resolve?tenant=default&tool=create_ticket&key=..", "", bad); code != http.StatusBadRequest {
			t.Errorf("resolve %s: %d %v, want 400", bad, code, v)
		}
	}
	code, rec := adminDo(t, admin, http.MethodPost, "/v1/record/resolve?tenant=default&tool=create_ticket&key=..", "", `{"outcome":"committed","remote_id":"T-2","remote_url":"https://tickets.example/T-2"}`)
	if code != http.StatusOK || rec["state"] != "committed" || rec["remote_url"] != "https://tickets.example/T-2" || rec["started_at"] == nil {
		t.Fatalf("resolve key .. by query: %d %v, want 200, the committed record with started_at", code, rec)
	}
	if code, _ := adminDo(t, admin, http.MethodPost, "/v1/record/resolve?tenant=default&tool=create_ticket&key=.", "", `{"outcome":"not_committed"}`); code != http.StatusNoContent {
		t.Fatalf("resolve key . as not committed: %d, want 204", code)
	}
	if r, err := send(srv.URL, "..", `{}`); err != nil || r.String() != "200 replay" {
		t.Errorf("a retry of ..: %s %v, want 200 replay", r, err)
	}
	if r, err := send(srv.URL, ".", `{}`); err != nil || r.String() != "502 execute" || calls.Load() != 3 {
		t.Errorf("a retry of .: %s %v (%d upstream calls), want 502 execute, the third call", r, err, calls.Load())
	}
	if code, _ := adminDo(t, admin, http.MethodGet, "/v1/record?tenant=default&tool=create_ticket", "", ""); code != http.StatusBadRequest {
		t.Errorf("GET /v1/record without key: %d, want 400", code)
	}
}
