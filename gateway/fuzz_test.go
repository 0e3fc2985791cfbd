package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemgateway/idemgateway/boltstore"
	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/problem"
	"github.com/idemgateway/idemgateway/routes"
)

// fuzzStatuses are what the counting upstream answers, picked by the fuzzer: committed (2xx,
// 3xx), not committed (4xx, 503) and unknown (500, 502, 504) outcomes.
var fuzzStatuses = []int{201, 200, 302, 400, 409, 503, 500, 502, 504}

// fuzzUpstream is the counting upstream of FuzzHandler. It answers the status the harness asks for in
// X-Fuzz-Status, marks its answers X-From-Upstream, and records every side-effecting call by the
// key the gateway forwards (forward_key: Idempotency-Key). The gateway sets that header to its own
// scoped key (tenant, tool, key) on every execution under a key, so the upstream counts per scope
// exactly as the gateway understood it, whatever form the client's key header had (quoted,
// unquoted, folded); keyless calls carry no forwarded key and are not counted. It reports a
// violation when a key is called again after a call the gateway must never repeat: one answered
// 2xx/3xx (committed) or 500/502/504 (unknown, and every route here blocks on unknown).
type fuzzUpstream struct {
	mu         sync.Mutex
	final      map[string]int // forwarded key -> the status of its committed or unknown call
	violations []string
}

func (u *fuzzUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	// The harness's header is the last one (a fuzzed CR LF may add others before it).
	asked := r.Header.Values("X-Fuzz-Status")
	status := http.StatusCreated
	if n := len(asked); n > 0 {
		if s, err := strconv.Atoi(asked[n-1]); err == nil && slices.Contains(fuzzStatuses, s) {
			status = s
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		u.count(r, status)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-From-Upstream", "1")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"id":"R-%d"}`, status)
}

func (u *fuzzUpstream) count(r *http.Request, status int) {
	keys := r.Header.Values("Idempotency-Key")
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case len(keys) == 0: // a keyless call: each is its own operation
		return
	case len(keys) > 1:
		u.violations = append(u.violations, fmt.Sprintf("%s %s reached the upstream with %d key headers %q", r.Method, r.URL, len(keys), keys))
		return
	}
	if prev, done := u.final[keys[0]]; done {
		u.violations = append(u.violations, fmt.Sprintf("%s %s: forwarded key %q called again after a call answered %d", r.Method, r.URL, keys[0], prev))
	}
	if status < 400 || status == 500 || status == 502 || status == 504 {
		u.final[keys[0]] = status
	}
}

func (u *fuzzUpstream) takeViolations() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	v := u.violations
	u.violations = nil
	return v
}

// fuzzRoutes has one route of each class; every route blocks on an unknown outcome.
const fuzzRoutes = `
upstreams:
  svc: {url: %q, timeout: 5s, forward_key: Idempotency-Key}
defaults: {lock_lease: 5s, max_body_bytes: 4096}
routes:
  - name: create_ticket
    upstream: svc
    method: POST
    path: /v1/tickets
    class: non_idempotent
    on_unknown_outcome: block
    receipt: {remote_id: /id}
  - name: put_item
    upstream: svc
    method: PUT
    path: /v1/items/{id}
    class: idempotent
    on_unknown_outcome: block
    concurrency: wait
    wait_timeout: 1s
    fingerprint: {body: {exclude: [/note]}, query: [mode]}
  - name: get_item
    upstream: svc
    method: GET
    path: /v1/items/{id}
    class: read_only
`

// fuzzInput is one fuzzed request.
type fuzzInput struct {
	method, suffix, key string
	dupKey              bool
	tenant, contentType string
	tenantAbsent        bool
	body                []byte
	status              int
}

// raw is the request as a client sends it on the wire; fuzzed bytes go in as they are, so a CR LF
// in them adds header lines, as it would.
func (in fuzzInput) raw() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s /v1/%s HTTP/1.1\r\nHost: gateway.test\r\n", in.method, in.suffix)
	if in.key != "" {
		fmt.Fprintf(&b, "Idempotency-Key: %s\r\n", in.key)
		if in.dupKey {
			fmt.Fprintf(&b, "Idempotency-Key: %s\r\n", in.key)
		}
	}
	if !in.tenantAbsent {
		fmt.Fprintf(&b, "X-Tenant-ID: %s\r\n", in.tenant)
	}
	if in.contentType != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", in.contentType)
	}
	fmt.Fprintf(&b, "X-Fuzz-Status: %d\r\nContent-Length: %d\r\n\r\n", in.status, len(in.body))
	b.Write(in.body)
	return b.Bytes()
}

// variant is the same operation as in, by contract, written differently: the key quoted as an
// RFC 8941 sf-string (or unquoted), the default tenant named (or left out), the JSON body
// re-indented.
func (in fuzzInput) variant(status int) fuzzInput {
	v := in
	v.status = status
	switch {
	case strings.HasPrefix(in.key, `"`) && strings.HasSuffix(in.key, `"`) && len(in.key) >= 2 &&
		!strings.ContainsAny(in.key[1:len(in.key)-1], `"\,`) && !strings.HasPrefix(in.key[1:], `"`):
		v.key = in.key[1 : len(in.key)-1]
	case in.key != "" && !strings.HasPrefix(in.key, `"`):
		v.key = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(in.key) + `"`
	}
	switch {
	case in.tenantAbsent:
		v.tenantAbsent, v.tenant = false, routes.DefaultTenant
	case in.tenant == routes.DefaultTenant:
		v.tenantAbsent = true
	}
	var indented bytes.Buffer
	if json.Valid(in.body) && json.Indent(&indented, in.body, "", "  ") == nil {
		v.body = indented.Bytes()
	}
	return v
}

// fuzzResult is what the harness keeps of one answer.
type fuzzResult struct {
	status   int
	decision string
	failure  string // a 5xx the gateway made itself
}

// FuzzHandler drives the whole handler with fuzzed methods, paths, key headers (quoted, folded,
// duplicated, odd bytes), tenants, content types and bodies, against a counting upstream. Each
// input is sent as a client would send it (parsed by http.ReadRequest, like the server does; an
// input the server would refuse is skipped), then retried twice at once, then sent once more
// written differently but meaning the same operation (variant). It asserts:
//   - no panic;
//   - no 5xx made by the gateway itself: a 5xx is either the upstream's own (X-From-Upstream) or a
//     problem of type upstream-failed or upstream-timeout;
//   - never a second upstream call for a scope after a committed or unknown one (fuzzUpstream);
//   - among the four sends of one keyed operation, at most one executes and commits.
//
// The gateway and its embedded store are built once per fuzz process, so records persist across
// inputs: a later input may replay or conflict with an earlier one's key.
func FuzzHandler(f *testing.F) {
	up := &fuzzUpstream{final: map[string]int{}}
	upstream := httptest.NewServer(up)
	f.Cleanup(upstream.Close)
	cfg, err := routes.Parse("routes.yaml", []byte(fmt.Sprintf(fuzzRoutes, upstream.URL)), nil)
	if err != nil {
		f.Fatal(err)
	}
	store, err := boltstore.Open(f.TempDir(), boltstore.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = store.Close() })
	gw, err := gateway.New(cfg, store, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}

	for _, s := range []struct {
		method, suffix, key string
		dupKey              bool
		tenant, ct, body    string
		status              uint8
	}{
		{"POST", "tickets", "k-1", false, "acme", "application/json", `{"title":"disk full","priority":1}`, 0},
		{"POST", "tickets", `"k-quoted"`, false, "", "application/json", `{"title":"a"}`, 0},
		{"POST", "tickets", `"with,comma"`, false, "default", "application/json", `{}`, 1},
		{"POST", "tickets", "a,b", false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", "dup", true, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", "unknown-1", false, "acme", "application/json", `{"n":1}`, 6},
		{"POST", "tickets", "released-1", false, "acme", "application/json", `{"n":1}`, 5},
		{"POST", "tickets", "redirect", false, "acme", "application/json", `{"n":1}`, 2},
		{"POST", "tickets", "big-number", false, "acme", "application/json", `{"n":9007199254740993,"m":1.0e0}`, 0},
		{"POST", "tickets", "dup-member", false, "acme", "application/json", `{"a":1,"a":2}`, 0},
		{"POST", "tickets", "not-json", false, "acme", "application/json", `{"a":`, 0},
		{"POST", "tickets", "form", false, "acme", "application/x-www-form-urlencoded", "a=1&a=2&b=%zz", 0},
		{"POST", "tickets", "bytes", false, "acme", "application/octet-stream", "\x00\xff\xfe", 0},
		{"POST", "tickets", "empty-body", false, "acme", "", "", 0},
		{"POST", "tickets", strings.Repeat("k", 255), false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", strings.Repeat("k", 256), false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", "caf\xc3\xa9", false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", `"bad\q"`, false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", `"x";p=1`, false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", "   ", false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", "inject\r\nIdempotency-Key: other", false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets?dry_run=1&x=%zz", "q-1", false, "acme", "application/json", `{}`, 0},
		{"POST", "tickets", "k-tenant", false, "acme/eu%2F..", "application/json", `{}`, 0},
		{"POST", "tickets", "k-tenant", false, "acme\r\nX-Tenant-ID: evil", "application/json", `{}`, 0},
		{"PUT", "items/42?mode=full", "p-1", false, "acme", "application/json", `{"v":1,"note":"x"}`, 0},
		{"PUT", "items/a%2Fb", "p-2", false, "acme", "application/json", `{"v":1}`, 1},
		{"PUT", "items/42", "", false, "acme", "application/json", `{"v":1}`, 0},
		{"PUT", "items/%2e%2e", "p-3", false, "acme", "application/json", `{}`, 0},
		{"PUT", "items/../tickets", "p-4", false, "acme", "application/json", `{}`, 0},
		{"GET", "items/42", "g-1", false, "acme", "", "", 0},
		{"HEAD", "items/42", "", false, "acme", "", "", 0},
		{"DELETE", "tickets", "d-1", false, "acme", "", "", 0},
		{"PATCH", "nothing/here", "n-1", false, "acme", "", "", 0},
		{"BREW", "tickets", "b-1", false, "acme", "", "", 0},
		{"POST", "tickets", "big-body", false, "acme", "application/json", `{"pad":"` + strings.Repeat("x", 5000) + `"}`, 0},
	} {
		f.Add(s.method, s.suffix, s.key, s.dupKey, s.tenant, s.ct, []byte(s.body), s.status)
	}

	f.Fuzz(func(t *testing.T, method, suffix, key string, dupKey bool, tenant, contentType string, body []byte, status uint8) {
		in := fuzzInput{
			method: method, suffix: suffix, key: key, dupKey: dupKey,
			tenant: tenant, tenantAbsent: tenant == "", contentType: contentType, body: body,
			status: fuzzStatuses[int(status)%len(fuzzStatuses)],
		}
		next := func(i int) int { return fuzzStatuses[(int(status)+i)%len(fuzzStatuses)] }
		first, ok := serveFuzz(gw, in)
		if !ok {
			return // the server would have refused the request before the gateway saw it
		}
		results := []fuzzResult{first}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 2 {
			retry := in
			retry.status = next(1 + i)
			wg.Go(func() {
				r, ok := serveFuzz(gw, retry)
				if !ok {
					return
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			})
		}
		wg.Wait()
		if r, ok := serveFuzz(gw, in.variant(next(3))); ok {
			results = append(results, r)
		}
		for _, r := range results {
			if r.failure != "" {
				t.Fatal(r.failure)
			}
		}

		if v := up.takeViolations(); len(v) > 0 {
			t.Fatalf("upstream side effects repeated:\n%s\ninput %q", strings.Join(v, "\n"), in.raw())
		}
		if in.key != "" {
			committed := 0
			for _, r := range results {
				if r.decision == gateway.DecisionExecute && r.status < 400 {
					committed++
				}
			}
			if committed > 1 {
				t.Fatalf("one operation executed and committed %d times: %+v\ninput %q\nvariant %q", committed, results, in.raw(), in.variant(next(3)).raw())
			}
		}
	})
}

// serveFuzz parses in as the server would and serves it; ok is false when the server would have
// refused it (400) before any handler ran. res.failure describes a 5xx the gateway made itself.
func serveFuzz(gw http.Handler, in fuzzInput) (res fuzzResult, ok bool) {
	raw := in.raw()
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return res, false
	}
	if req.Host == "" || len(req.Header.Values("Host")) > 1 {
		return res, false
	}
	req.RemoteAddr = "192.0.2.1:1234"
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	res = fuzzResult{status: resp.StatusCode, decision: resp.Header.Get("Idempotency-Decision")}
	if resp.StatusCode < 500 || resp.Header.Get("X-From-Upstream") == "1" {
		return res, true
	}
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &p)
	switch strings.TrimPrefix(p.Type, problem.TypePrefix) {
	case "upstream-failed", "upstream-timeout":
		return res, true
	}
	res.failure = fmt.Sprintf("the gateway answered %d %s itself:\n%s\ninput %q", resp.StatusCode, resp.Header.Get("Content-Type"), body, raw)
	return res, true
}
