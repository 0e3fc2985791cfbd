package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// TestHeaderFaults: each fault header, alone or with others, on every create endpoint: the status
// (or the broken connection), what the answer holds, and whether the effect happened.
func TestHeaderFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range slices.Concat(succeedingHeaderFaults, failingHeaderFaults) {
		for i, cr := range creates {
			t.Run(tc.name+"/"+cr.endpoint, func(t *testing.T) {
				t.Parallel()
				s, srv := newTestSandbox(t)
				start := time.Now()
				resp, body, err := trySend(newClient(), srv.URL, cr.req.with(tc.header))
				elapsed := time.Since(start)
				switch {
				case tc.wantStatus == 0:
					if err == nil {
						t.Fatalf("got %d %s, want the connection broken", resp.StatusCode, body)
					}
				case err != nil:
					t.Fatal(err)
				case tc.wantStatus == -1 && resp.StatusCode >= 300, tc.wantStatus > 0 && resp.StatusCode != tc.wantStatus:
					t.Fatalf("status = %d, want %d; body %.300s", resp.StatusCode, tc.wantStatus, body)
				}
				if tc.check != nil {
					tc.check(t, i, resp, body, elapsed)
				}
				var want int64
				if tc.wantEffect {
					want = 1
				}
				if st := s.snapshot(); st.Total != want || st.ByEndpoint[cr.endpoint] != want {
					t.Errorf("effects = %d %v, want %d", st.Total, st.ByEndpoint, want)
				}
			})
		}
	}
}

// headerFault is a case of TestHeaderFaults: the fault headers of a create request, and what the
// sandbox must answer.
type headerFault struct {
	name       string
	header     map[string]string
	wantStatus int // 0: the connection breaks without a response; -1: a success
	wantEffect bool
	check      func(t *testing.T, cr int, resp *http.Response, body []byte, elapsed time.Duration)
}

// paddingBytes is the padding the body bytes case asks for, 5 MiB.
const paddingBytes = 5 << 20

// succeedingHeaderFaults are the faults under which the call succeeds, and how its answer changes.
var succeedingHeaderFaults = []headerFault{
	{
		name: "none", wantStatus: -1, wantEffect: true,
		check: func(t *testing.T, _ int, resp *http.Response, body []byte, _ time.Duration) {
			if c := resp.Header.Get("Set-Cookie"); c != "" {
				t.Errorf("Set-Cookie = %q without asking", c)
			}
			if strings.Contains(string(body), "sandbox_padding") {
				t.Error("padding without asking")
			}
		},
	},
	{
		name: "set cookie", header: map[string]string{headerSetCookie: "1"}, wantStatus: -1, wantEffect: true,
		check: func(t *testing.T, _ int, resp *http.Response, _ []byte, _ time.Duration) {
			cookies := resp.Cookies()
			if len(cookies) != 1 || cookies[0].Name != "sandbox_session" || cookies[0].Value == "" || !cookies[0].HttpOnly {
				t.Errorf("cookies = %v, want one HttpOnly sandbox_session", cookies)
			}
		},
	},
	{
		name: "body bytes", header: map[string]string{headerBodyBytes: fmt.Sprint(paddingBytes)}, wantStatus: -1, wantEffect: true,
		check: func(t *testing.T, cr int, resp *http.Response, body []byte, _ time.Duration) {
			if resp.ContentLength != int64(len(body)) || len(body) <= paddingBytes {
				t.Errorf("Content-Length %d, body %d bytes, want equal and above %d", resp.ContentLength, len(body), paddingBytes)
			}
			v := decode(t, body)
			if got, _ := v["sandbox_padding"].(string); len(got) != paddingBytes || strings.Trim(got, "x") != "" {
				t.Errorf("sandbox_padding is %d bytes, want %d", len(got), paddingBytes)
			}
			if at(v, creates[cr].idPath...) == nil {
				t.Errorf("padded response lost %v", creates[cr].idPath)
			}
		},
	},
	{
		name: "delay", header: map[string]string{headerDelay: "100ms"}, wantStatus: -1, wantEffect: true,
		check: func(t *testing.T, _ int, _ *http.Response, _ []byte, elapsed time.Duration) {
			if elapsed < 100*time.Millisecond {
				t.Errorf("answered after %v, want at least 100ms", elapsed)
			}
		},
	},
	{
		name: "success status 202", header: map[string]string{headerSuccessStatus: "202"}, wantStatus: 202, wantEffect: true,
		check: func(t *testing.T, _ int, _ *http.Response, body []byte, _ time.Duration) {
			decode(t, body) // the endpoint's own answer, under another status
		},
	},
	{
		name: "success status 204", header: map[string]string{headerSuccessStatus: "204"}, wantStatus: 204, wantEffect: true,
		check: func(t *testing.T, _ int, _ *http.Response, body []byte, _ time.Duration) {
			if len(body) != 0 {
				t.Errorf("a 204 with a body: %q", body)
			}
		},
	},
	{
		name: "gzip, accepted", header: map[string]string{headerGzip: "1", "Accept-Encoding": "br;q=1, gzip;q=0.5"}, wantStatus: -1, wantEffect: true,
		check: func(t *testing.T, _ int, resp *http.Response, body []byte, _ time.Duration) {
			if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" {
				t.Fatalf("Content-Encoding %q, Vary %q; want gzip, Accept-Encoding", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
			}
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			decode(t, plain)
		},
	},
	{
		name: "gzip, not accepted", header: map[string]string{headerGzip: "1", "Accept-Encoding": "identity, gzip;q=0"}, wantStatus: -1, wantEffect: true,
		check: func(t *testing.T, _ int, resp *http.Response, body []byte, _ time.Duration) {
			if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Vary") != "Accept-Encoding" {
				t.Errorf("Content-Encoding %q, Vary %q; want none, Accept-Encoding", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
			}
			decode(t, body)
		},
	},
	{
		name: "all success faults at once", header: map[string]string{headerSetCookie: "true", headerBodyBytes: "1", headerDelay: "1ms"},
		wantStatus: -1, wantEffect: true,
		check: func(t *testing.T, _ int, resp *http.Response, body []byte, _ time.Duration) {
			if len(resp.Cookies()) != 1 || at(decode(t, body), "sandbox_padding") != "x" {
				t.Errorf("want a cookie and one byte of padding: %v %s", resp.Cookies(), body)
			}
		},
	},
}

// failingHeaderFaults are the faults under which the call fails, before acting or after.
var failingHeaderFaults = []headerFault{
	{
		name: "status 503 before acting", header: map[string]string{headerStatus: "503"}, wantStatus: 503,
		check: func(t *testing.T, _ int, resp *http.Response, body []byte, _ time.Duration) {
			wantProblem(t, resp, body, 503, false)
			if got := resp.Header.Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After = %q, want 1", got)
			}
		},
	},
	{
		name: "status 409 before acting", header: map[string]string{headerStatus: "409"}, wantStatus: 409,
		check: func(t *testing.T, _ int, resp *http.Response, body []byte, _ time.Duration) {
			wantProblem(t, resp, body, 409, false)
			if got := resp.Header.Get("Retry-After"); got != "" {
				t.Errorf("Retry-After = %q on a 409", got)
			}
		},
	},
	{
		name: "500 after commit", header: map[string]string{headerFailAfterCommit: "500"}, wantStatus: 500, wantEffect: true,
		check: func(t *testing.T, _ int, resp *http.Response, body []byte, _ time.Duration) {
			wantProblem(t, resp, body, 500, true)
		},
	},
	{
		name: "504 after commit", header: map[string]string{headerFailAfterCommit: "504"}, wantStatus: 504, wantEffect: true,
	},
	{
		name: "drop after commit", header: map[string]string{headerFailAfterCommit: "drop"}, wantStatus: 0, wantEffect: true,
	},
	{
		name: "delay then status", header: map[string]string{headerDelay: "50ms", headerStatus: "429"}, wantStatus: 429,
		check: func(t *testing.T, _ int, resp *http.Response, body []byte, elapsed time.Duration) {
			wantProblem(t, resp, body, 429, false)
			if elapsed < 50*time.Millisecond {
				t.Errorf("answered after %v, want at least 50ms", elapsed)
			}
		},
	},
	{
		name: "status wins over after commit", header: map[string]string{headerStatus: "503", headerFailAfterCommit: "drop"}, wantStatus: 503,
	},
}

func TestInvalidFaultHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct{ header, value string }{
		{headerDelay, "soon"},
		{headerDelay, "-1s"},
		{headerStatus, "abc"},
		{headerStatus, "200"},
		{headerStatus, "600"},
		{headerFailAfterCommit, "later"},
		{headerFailAfterCommit, "201"},
		{headerSetCookie, "maybe"},
		{headerBodyBytes, "-1"},
		{headerBodyBytes, "1e3"},
		{headerBodyBytes, fmt.Sprint(maxPadBytes + 1)},
		{headerSuccessStatus, "404"},
		{headerSuccessStatus, "ok"},
		{headerGzip, "maybe"},
	}
	for _, tc := range tests {
		t.Run(tc.header+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			s, srv := newTestSandbox(t)
			resp, body := send(t, srv.Client(), srv.URL, creates[0].req.with(map[string]string{tc.header: tc.value}))
			wantProblem(t, resp, body, 400, false)
			if !strings.Contains(string(body), tc.header) {
				t.Errorf("detail does not name %s: %s", tc.header, body)
			}
			if st := s.snapshot(); st.Total != 0 {
				t.Errorf("effects = %d, want 0", st.Total)
			}
		})
	}
}

// TestFaultsSkipRejectedRequests: a request the API rejects has no effect, so there is nothing to
// fail after, and no cookie or padding on the error.
func TestFaultsSkipRejectedRequests(t *testing.T) {
	t.Parallel()
	s, srv := newTestSandbox(t)
	rejected := []struct {
		req        request
		wantStatus int
	}{
		{request{path: "/rest/api/3/issue", body: `{"fields":{}}`}, 400},
		{request{path: "/graphql", body: `{"query":"{ viewer { id } }"}`}, 200},
	}
	for _, rj := range rejected {
		for _, h := range []map[string]string{
			{headerFailAfterCommit: "drop"},
			{headerFailAfterCommit: "500"},
			{headerSetCookie: "1", headerBodyBytes: "100"},
		} {
			resp, body, err := trySend(newClient(), srv.URL, rj.req.with(h))
			if err != nil {
				t.Fatalf("%s %v: %v", rj.req.path, h, err)
			}
			if resp.StatusCode != rj.wantStatus || len(resp.Cookies()) != 0 || strings.Contains(string(body), "sandbox_padding") {
				t.Errorf("%s %v: got %d %v %s, want the API's plain %d", rj.req.path, h, resp.StatusCode, resp.Cookies(), body, rj.wantStatus)
			}
		}
	}
	if st := s.snapshot(); st.Total != 0 {
		t.Errorf("effects = %d, want 0", st.Total)
	}
}

// TestDelayCanceled: the client gives up during the delay; the side effect must not happen, not
// even later.
func TestDelayCanceled(t *testing.T) {
	t.Parallel()
	for _, cr := range creates {
		t.Run(cr.endpoint, func(t *testing.T) {
			t.Parallel()
			s, srv := newTestSandbox(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			rq := cr.req.with(map[string]string{headerDelay: "30s"})
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+rq.path, strings.NewReader(rq.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range rq.header {
				req.Header.Set(k, v)
			}
			done := make(chan error, 1)
			go func() {
				resp, err := newClient().Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			// The client goes away once its request is in the handler, whatever the machine's pace.
			eventually.True(t, "the request in the handler", func() bool { return s.snapshot().InFlight == 1 })
			start := time.Now()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want the client's cancellation", err)
			}
			// Close waits for the handler: it must notice the cancellation instead of sleeping on.
			srv.Close()
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the handler ran %v after its client went away", d)
			}
			if st := s.snapshot(); st.Total != 0 || st.Requests.Total != 1 {
				t.Errorf("stats = %+v, want 1 request and no effect", st)
			}
		})
	}
}

func TestFaultsOnRead(t *testing.T) {
	t.Parallel()
	_, srv := newTestSandbox(t)
	send(t, srv.Client(), srv.URL, creates[0].req)
	get := request{method: "GET", path: "/rest/api/3/issue/OPS-1"}

	resp, body := send(t, srv.Client(), srv.URL, get.with(map[string]string{headerStatus: "502"}))
	wantProblem(t, resp, body, 502, false)
	if _, _, err := trySend(newClient(), srv.URL, get.with(map[string]string{headerFailAfterCommit: "drop"})); err == nil {
		t.Error("drop on a read: got a response")
	}
	resp, _ = send(t, srv.Client(), srv.URL, get.with(map[string]string{headerSetCookie: "1"}))
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Errorf("set cookie on a read: %d %v", resp.StatusCode, resp.Cookies())
	}
}

// TestScript503Once is the field case of an upstream that answers 503 once, then recovers, for a
// client that cannot set headers.
func TestScript503Once(t *testing.T) {
	t.Parallel()
	s, srv := newTestSandbox(t)
	if resp, body := setScript(t, srv.URL, `{"fail_next":[{"status":503}]}`); resp.StatusCode != 200 {
		t.Fatalf("script: %d %s", resp.StatusCode, body)
	}
	resp, body := send(t, srv.Client(), srv.URL, creates[3].req)
	wantProblem(t, resp, body, 503, false)
	if resp, body := send(t, srv.Client(), srv.URL, creates[3].req); resp.StatusCode != 200 {
		t.Fatalf("retry: %d %s", resp.StatusCode, body)
	}
	if st := s.snapshot(); st.Total != 1 || st.Requests.Total != 2 {
		t.Errorf("stats = %+v, want 2 attempts and 1 effect", st)
	}
}

// scriptStep is one request of a scripted test.
type scriptStep struct {
	create     int               // index in creates
	header     map[string]string // the request's own fault headers
	wantStatus int               // 0: connection broken
}

func TestScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		script      string
		steps       []scriptStep
		wantEffects int64
	}{
		{
			name:   "scripted faults replace headers, then headers apply again",
			script: `{"fail_next":[{"status":503},{}]}`,
			steps: []scriptStep{
				{0, nil, 503},
				{0, map[string]string{headerStatus: "500"}, 201},
				{0, map[string]string{headerStatus: "502"}, 502},
			},
			wantEffects: 1,
		},
		{
			name:   "a fault for an endpoint waits for it",
			script: `{"fail_next":[{"endpoint":"zendesk.create_ticket","status":503},{"status":429}]}`,
			steps: []scriptStep{
				{0, nil, 429},
				{1, nil, 503},
				{1, nil, 201},
				{0, nil, 201},
			},
			wantEffects: 2,
		},
		{
			name:   "after-commit faults as number and string",
			script: `{"fail_next":[{"fail_after_commit":500},{"fail_after_commit":"502"},{"fail_after_commit":"drop","delay":"10ms"}]}`,
			steps: []scriptStep{
				{2, nil, 500},
				{3, nil, 502},
				{4, nil, 0},
				{4, nil, 201},
			},
			wantEffects: 4,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, srv := newTestSandbox(t)
			if resp, body := setScript(t, srv.URL, tc.script); resp.StatusCode != 200 {
				t.Fatalf("script: %d %s", resp.StatusCode, body)
			}
			for i, step := range tc.steps {
				resp, body, err := trySend(newClient(), srv.URL, creates[step.create].req.with(step.header))
				switch {
				case step.wantStatus == 0 && err == nil:
					t.Fatalf("step %d: got %d, want the connection broken", i, resp.StatusCode)
				case step.wantStatus == 0:
				case err != nil:
					t.Fatalf("step %d: %v", i, err)
				case resp.StatusCode != step.wantStatus:
					t.Fatalf("step %d: status %d, want %d; %s", i, resp.StatusCode, step.wantStatus, body)
				}
			}
			if st := s.snapshot(); st.Total != tc.wantEffects {
				t.Errorf("effects = %d, want %d", st.Total, tc.wantEffects)
			}
			if left := getScript(t, srv.URL); len(left) != 0 {
				t.Errorf("faults left: %v", left)
			}
		})
	}
}

func TestScriptAdmin(t *testing.T) {
	t.Parallel()
	_, srv := newTestSandbox(t)
	const valid = `{"fail_next":[{"endpoint":"jira.create_issue","delay":"1.5s","status":503},{},{"fail_after_commit":"drop","set_cookie":true,"body_bytes":10}]}`
	resp, body := setScript(t, srv.URL, valid)
	if resp.StatusCode != 200 {
		t.Fatalf("script: %d %s", resp.StatusCode, body)
	}
	want := `{"fail_next":[{"endpoint":"jira.create_issue","delay":"1.5s","status":503},{},{"fail_after_commit":"drop","set_cookie":true,"body_bytes":10}]}`
	if string(body) != want {
		t.Errorf("POST answered %s, want %s", body, want)
	}

	for _, bad := range []string{
		`{"fail_next":[{"stat":503}]}`,
		`{"fail_next":[{"status":200}]}`,
		`{"fail_next":[{"status":"503"}]}`,
		`{"fail_next":[{"delay":"soon"}]}`,
		`{"fail_next":[{"fail_after_commit":"later"}]}`,
		`{"fail_next":[{"fail_after_commit":true}]}`,
		`{"fail_next":[{"body_bytes":-1}]}`,
		`{"fail_next":[{"endpoint":"jira.delete_issue"}]}`,
		`{"fail_next":`,
	} {
		resp, body := setScript(t, srv.URL, bad)
		wantProblem(t, resp, body, 400, false)
	}
	if got := getScript(t, srv.URL); len(got) != 3 {
		t.Errorf("invalid scripts changed the queue: %v", got)
	}

	send(t, http.DefaultClient, srv.URL, request{path: "/_sandbox/reset"})
	if got := getScript(t, srv.URL); len(got) != 0 {
		t.Errorf("reset left the queue %v", got)
	}
}

// TestScriptConcurrent: every scripted fault is taken by exactly one request.
func TestScriptConcurrent(t *testing.T) {
	t.Parallel()
	const faults, requests = 10, 50
	s, srv := newTestSandbox(t)
	setScript(t, srv.URL, `{"fail_next":[`+strings.TrimSuffix(strings.Repeat(`{"status":503},`, faults), ",")+`]}`)

	var mu sync.Mutex
	byStatus := make(map[int]int)
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			resp, _, err := trySend(srv.Client(), srv.URL, creates[4].req)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			byStatus[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if byStatus[503] != faults || byStatus[201] != requests-faults {
		t.Errorf("statuses = %v, want %d × 503 and %d × 201", byStatus, faults, requests-faults)
	}
	if st := s.snapshot(); st.Total != requests-faults {
		t.Errorf("effects = %d, want %d", st.Total, requests-faults)
	}
}
