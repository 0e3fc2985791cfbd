package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgateway/idemgateway/internal/eventually"
)

// Gateway is a running cmd/idemgateway.
type Gateway struct {
	*process
	Proxy string // "http://127.0.0.1:PORT"
	Admin string // "http://127.0.0.1:PORT"
	// AdminToken is sent as the bearer token of the admin API by Record and adminDo: the
	// gateway's IDEMGATEWAY_ADMIN_TOKEN, "" when it has none.
	AdminToken string
}

// StartGateway starts the gateway on free loopback ports with the routes file and the extra
// environment (the store's settings), and waits until its /readyz answers 200.
func StartGateway(t *testing.T, routesFile string, extraEnv []string) *Gateway {
	t.Helper()
	cmd := exec.Command(bin.gateway, "serve", "-routes", routesFile, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0")
	cmd.Env = gatewayEnv(extraEnv)
	g := &Gateway{}
	g.process = startProcess(t, "idemgateway", cmd, func(line string) bool {
		var l struct{ Msg, Proxy, Admin string }
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "listening" || l.Proxy == "" || l.Admin == "" {
			return false
		}
		g.Proxy, g.Admin = "http://"+l.Proxy, "http://"+l.Admin
		return true
	})
	g.waitReady(t)
	return g
}

// gatewayEnv is this process's environment without IDEMGATEWAY_* and OTEL_* variables, plus
// fixed logging and tracing settings, plus extra. A -race binary sleeps a second before it exits
// (GORACE atexit_sleep_ms, so that late reports get out); 100 ms is enough for one process and
// saves a second per gateway.
func gatewayEnv(extra []string) []string {
	var env []string
	gorace := "atexit_sleep_ms=100"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "IDEMGATEWAY_"), strings.HasPrefix(kv, "OTEL_"):
		case strings.HasPrefix(kv, "GORACE="):
			gorace += " " + strings.TrimPrefix(kv, "GORACE=") // the caller's options win
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "GORACE="+gorace,
		"IDEMGATEWAY_LOG_FORMAT=json", "IDEMGATEWAY_LOG_LEVEL=info", "OTEL_TRACES_EXPORTER=none")
	return append(env, extra...)
}

// waitReady polls GET /readyz until it answers 200.
func (g *Gateway) waitReady(t *testing.T) {
	t.Helper()
	eventually.True(t, "the gateway's /readyz to answer 200", func() bool {
		resp, err := http.Get(g.Admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Send makes one request to the gateway's proxy listener. It is safe to call from any goroutine.
func (g *Gateway) Send(req Request) (Response, error) {
	method, path := req.Method, req.Path
	if method == "" {
		method = http.MethodPost
	}
	if path == "" {
		path = PathTickets
	}
	ctx := req.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
		if req.Chunked {
			body = io.MultiReader(body) // hides the length: the client sends it chunked
		}
	}
	hr, err := http.NewRequestWithContext(ctx, method, g.Proxy+path, body)
	if err != nil {
		return Response{}, err
	}
	if req.Body != "" {
		ct := req.ContentType
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
	}
	switch {
	case req.Keys != nil:
		hr.Header["Idempotency-Key"] = req.Keys
	case !req.NoKey:
		hr.Header["Idempotency-Key"] = []string{req.Key}
	}
	for name, value := range req.Header {
		hr.Header.Set(name, value)
	}
	resp, err := Client.Do(hr)
	if err != nil {
		return Response{}, err
	}
	return readResponse(resp)
}

// readResponse reads and closes resp's body, and decodes a problem.
func readResponse(resp *http.Response) (Response, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("reading the response body: %w", err)
	}
	r := Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/problem+json" {
		r.Problem = new(problem)
		if err := json.Unmarshal(b, r.Problem); err != nil {
			return r, fmt.Errorf("problem body: %w: %q", err, b)
		}
	}
	return r, nil
}

// do is send that fails the test on a transport error.
func (g *Gateway) do(t *testing.T, req Request) Response {
	t.Helper()
	r, err := g.Send(req)
	if err != nil {
		t.Fatalf("%s %s (key %q): %v", req.Method, req.Path, req.Key, err)
	}
	return r
}

// recordPath is the admin API path of a record, its segments URL-escaped.
func recordPath(tenant, tool, key string) string {
	return "/v1/records/" + url.PathEscape(tenant) + "/" + url.PathEscape(tool) + "/" + url.PathEscape(key)
}

// Record reads a Record through the admin API; found is false on 404.
func (g *Gateway) Record(t *testing.T, tenant, tool, key string) (rec Receipt, found bool) {
	t.Helper()
	status, b := g.adminDo(t, http.MethodGet, recordPath(tenant, tool, key), "")
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		return Receipt{}, false
	default:
		t.Fatalf("admin GET %s: %d %s", recordPath(tenant, tool, key), status, b)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("admin GET record: %v: %s", err, b)
	}
	return rec, true
}

// mustRecord reads a record of the default tenant that must exist.
func (g *Gateway) mustRecord(t *testing.T, tool, key string) Receipt {
	t.Helper()
	rec, found := g.Record(t, "default", tool, key)
	if !found {
		t.Fatalf("no record for tool %s, key %q", tool, key)
	}
	return rec
}

// waitState polls the record of the default tenant until its state is state.
func (g *Gateway) waitState(t *testing.T, tool, key, state string) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("record %s/%s to be %s", tool, key, state), func() bool {
		rec, found := g.Record(t, "default", tool, key)
		return found && rec.State == state
	})
}

// adminDo sends a request to the admin API and returns status and body.
func (g *Gateway) adminDo(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.Admin+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+g.AdminToken)
	}
	resp, err := Client.Do(req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// metric reads the value of one series from the gateway's /metrics, e.g.
// metric(t, `idemgateway_lease_renewals_total{result="ok",tool="create_ticket_lease"}`); 0 when
// the series is absent.
func (g *Gateway) metric(t *testing.T, series string) float64 {
	t.Helper()
	v, err := g.metricValue(series)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// metricValue is metric for a goroutine other than the test's.
func (g *Gateway) metricValue(series string) (float64, error) {
	m, err := g.Metrics()
	return m[series], err
}

// Metrics reads the gateway's /metrics as "name{labels}" → value.
func (g *Gateway) Metrics() (map[string]float64, error) {
	resp, err := Client.Get(g.Admin + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	m := map[string]float64{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, nil
}

// SumMetric adds the series of m (Metrics) named name whose labels contain label (all when label
// is "").
func SumMetric(m map[string]float64, name, label string) float64 {
	var sum float64
	for series, v := range m {
		if (series == name || strings.HasPrefix(series, name+"{")) && strings.Contains(series, label) {
			sum += v
		}
	}
	return sum
}

// waitMetric polls the gateway's /metrics until series is at least min.
func (g *Gateway) waitMetric(t *testing.T, series string, min float64) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%s >= %v", series, min), func() bool {
		return g.metric(t, series) >= min
	})
}
