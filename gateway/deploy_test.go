package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/idemgateway/idemgateway/gateway"
	"github.com/idemgateway/idemgateway/internal/eventually"
)

const (
	dashboardFile = "../deploy/grafana-dashboard.json"
	alertsFile    = "../deploy/prometheus-alerts.yaml"
)

// metricName matches a series name of ours in PromQL or prose.
var metricName = regexp.MustCompile(`\bidemgateway_[a-zA-Z0-9_]+`)

// TestDeployMetricsAreRegistered: every idemgateway_* series that the example Grafana dashboard
// and the Prometheus alert rules name, in a query or in prose, is one the gateway registers; in
// queries, a histogram is named by its _bucket, _sum or _count series. The registry is gathered
// after requests that execute, replay, conflict, get rejected, leave an outcome unknown, churn
// keys and renew a lease; a name still absent then is checked against the registry itself (a
// series registered but not yet observed).
func TestDeployMetricsAreRegistered(t *testing.T) {
	t.Parallel()
	reg := registryAfterTraffic(t)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]dto.MetricType{}
	for _, f := range families {
		types[f.GetName()] = f.GetType()
	}
	for file, queries := range map[string][]string{dashboardFile: dashboardQueries(t), alertsFile: alertQueries(t)} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		inQueries := map[string]bool{}
		for _, q := range queries {
			for _, name := range metricName.FindAllString(q, -1) {
				inQueries[name] = true
			}
		}
		names := metricName.FindAllString(string(data), -1)
		if len(inQueries) == 0 {
			t.Fatalf("%s queries no idemgateway_* series", file)
		}
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			if err := seriesOf(types, name, inQueries[name]); err != nil {
				t.Errorf("%s: %s: %v", file, name, err)
			}
		}
	}
}

// seriesOf says whether name is a series of a registered family: the family itself or, for a
// histogram or summary, its _bucket, _sum or _count (in a query, only those).
func seriesOf(types map[string]dto.MetricType, name string, inQuery bool) error {
	if typ, ok := types[name]; ok {
		if inQuery && (typ == dto.MetricType_HISTOGRAM || typ == dto.MetricType_SUMMARY) {
			return fmt.Errorf("is a %s: a query names its _bucket, _sum or _count series", typ)
		}
		return nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch typ, found := types[base]; {
		case !found:
		case typ == dto.MetricType_HISTOGRAM, typ == dto.MetricType_SUMMARY && suffix != "_bucket":
			return nil
		default:
			return fmt.Errorf("%s is a %s, it has no %s series", base, typ, suffix)
		}
	}
	// Not gathered after traffic of every decision: a family the gateway does not register, or
	// registers but never observes (a registered name alone proves nothing).
	return errors.New("no such series after traffic of every decision: the gateway does not register it, or never observes it")
}

// registryAfterTraffic returns the registry of a gateway that served one request of each
// decision, and one whose lease was renewed.
func registryAfterTraffic(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := gateway.NewRegistry()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("X-Fail") != "":
			w.WriteHeader(http.StatusBadGateway)
			return
		case r.Header.Get("X-Slow") != "":
			// Held until the lease (150ms, renewed every 50ms) was renewed, however long that
			// takes; the deadline only bounds a hang.
			eventually.Within(hangTimeout, func() bool {
				n, err := gatherValue(reg, "idemgateway_lease_renewals_total", "result", "ok")
				return err != nil || n > 0
			})
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(upstream.Close)
	srv, _, _ := newGateway(t, openEmbedded, upstream.URL, gateway.Options{Metrics: reg}, "{lock_lease: 150ms}")
	send := func(key, body, header string, want int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tickets", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		if header != "" {
			req.Header.Set(header, "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("key %q %s: status %d, want %d", key, header, resp.StatusCode, want)
		}
	}
	send("k1", `{"a":1}`, "", http.StatusCreated)             // execute
	send("k1", `{"a":1}`, "", http.StatusCreated)             // replay
	send("k1", `{"a":2}`, "", http.StatusUnprocessableEntity) // conflict
	send("", `{"a":1}`, "", http.StatusBadRequest)            // rejected: no key
	send("k2", `{"a":3}`, "X-Fail", http.StatusBadGateway)    // execute, outcome unknown
	send("k2", `{"a":3}`, "", http.StatusConflict)            // outcome_unknown
	send("k3", `{"a":1}`, "", http.StatusCreated)             // key churn: k1's effect under a new key
	send("k4", `{"a":4}`, "X-Slow", http.StatusCreated)       // lease renewals
	if n := metricValue(t, reg, "idemgateway_lease_renewals_total", "result", "ok"); n == 0 {
		t.Fatal("the held call's lease was never renewed")
	}
	return reg
}

// alertRules is the standard shape of a Prometheus rules file.
type alertRules struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// readAlertRules decodes deploy/prometheus-alerts.yaml strictly (an unknown field is an error).
func readAlertRules(t *testing.T) *alertRules {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	rules := new(alertRules)
	if err := dec.Decode(rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return rules
}

func alertQueries(t *testing.T) []string {
	var exprs []string
	for _, g := range readAlertRules(t).Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// TestDeployAlertRules: deploy/prometheus-alerts.yaml decodes strictly into rule groups of
// alerts, each with an expression, a duration in for, a severity and a summary; alert names are
// unique. Where promtool is installed, it checks the rules too (PromQL syntax).
func TestDeployAlertRules(t *testing.T) {
	t.Parallel()
	rules := readAlertRules(t)
	if len(rules.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	seen := map[string]bool{}
	for i, g := range rules.Groups {
		if g.Name == "" || seen["group "+g.Name] || len(g.Rules) == 0 {
			t.Errorf("groups[%d] %q: needs a unique name and rules", i, g.Name)
		}
		seen["group "+g.Name] = true
		for j, r := range g.Rules {
			at := fmt.Sprintf("groups[%d].rules[%d] %q", i, j, r.Alert)
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("%s: needs a unique alert name", at)
			}
			seen[r.Alert] = true
			if !balanced(r.Expr) {
				t.Errorf("%s: expr %q is empty or unbalanced", at, r.Expr)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", at, r.For, err)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: labels.severity %q, want critical, warning or info", at, s)
			}
			if strings.TrimSpace(r.Annotations["summary"]) == "" {
				t.Errorf("%s: no annotations.summary", at)
			}
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules: %v\n%s", err, out)
		}
	}
}

// balanced reports whether a query is not empty and its brackets pair up: a cheap syntax check
// where promtool is not installed.
func balanced(q string) bool {
	return strings.TrimSpace(q) != "" && strings.Count(q, "(") == strings.Count(q, ")") &&
		strings.Count(q, "{") == strings.Count(q, "}") && strings.Count(q, "[") == strings.Count(q, "]")
}

// dashboard is what the tests read of a Grafana dashboard.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dash := new(dashboard)
	if err := json.Unmarshal(data, dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return dash
}

func dashboardQueries(t *testing.T) []string {
	var exprs []string
	for _, p := range readDashboard(t).Panels {
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	return exprs
}

// TestDeployDashboard: deploy/grafana-dashboard.json is a Grafana dashboard whose panels each have
// a unique id, a title, a place on the 24-column grid and, but for rows, Prometheus queries of
// idemgateway_* series.
func TestDeployDashboard(t *testing.T) {
	t.Parallel()
	dash := readDashboard(t)
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels")
	}
	ids := map[int]bool{}
	for i, p := range dash.Panels {
		if ids[p.ID] || p.Title == "" || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panels[%d] %q: needs a unique id, a title and a place on the grid", i, p.Title)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panels[%d] %q: no queries", i, p.Title)
		}
		for _, q := range p.Targets {
			if q.RefID == "" || !balanced(q.Expr) || !metricName.MatchString(q.Expr) {
				t.Errorf("panels[%d] %q: query %q has no refId, is unbalanced, or names no idemgateway_* series", i, p.Title, q.Expr)
			}
		}
	}
}
