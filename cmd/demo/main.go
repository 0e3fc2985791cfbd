// Command demo runs the main job of idemgateway end to end: it starts the bundled sandbox upstream
// and the gateway (on the embedded store, in a temporary directory), then plays an agent that
// creates a Jira issue, times out and retries, reuses its key for another issue, and fires ten
// concurrent duplicates. Then an MCP agent (go-sdk client) calls the sandbox's MCP tools through the
// gateway's kind: mcp route (mcp.go): a retry, a retry from a new session, a key reused, a slow
// tool it gives up on. It prints each decision and the sandbox's side-effect count.
//
//	demo -bin bin [-routes examples/routes.yaml]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding the idemgateway and sandbox binaries")
	routesFile := flag.String("routes", "examples/routes.yaml", "routes file written for a sandbox at http://127.0.0.1:9000")
	flag.Parse()
	if err := run(*bin, *routesFile); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(bin, routesFile string) error {
	dir, err := os.MkdirTemp("", "idemgateway-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	sandbox, sandboxURL, err := start(exec.Command(filepath.Join(bin, "sandbox"), "-listen", "127.0.0.1:0"),
		regexp.MustCompile(`sandbox listening on (http://\S+)`))
	if err != nil {
		return fmt.Errorf("starting the sandbox: %w", err)
	}
	defer stop(sandbox)

	routes, err := os.ReadFile(routesFile)
	if err != nil {
		return err
	}
	routesPath := filepath.Join(dir, "routes.yaml")
	if err := os.WriteFile(routesPath, bytes.ReplaceAll(routes, []byte("http://127.0.0.1:9000"), []byte(sandboxURL)), 0o600); err != nil {
		return err
	}
	gw := exec.Command(filepath.Join(bin, "idemgateway"), "serve", "-routes", routesPath, "-data-dir", filepath.Join(dir, "data"),
		"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0")
	gw.Env = append(os.Environ(), "IDEMGATEWAY_LOG_FORMAT=json", "IDEMGATEWAY_LOG_LEVEL=info", "OTEL_TRACES_EXPORTER=none")
	gateway, proxyAddr, err := start(gw, regexp.MustCompile(`"msg":"listening","proxy":"([^"]+)"`))
	if err != nil {
		return fmt.Errorf("starting the gateway: %w", err)
	}
	defer stop(gateway)

	a := &agent{gateway: "http://" + proxyAddr, sandbox: sandboxURL}
	fmt.Printf("sandbox upstream at %s; gateway at %s (embedded store in %s)\n\n", sandboxURL, a.gateway, dir)
	fmt.Printf("%-58s %-6s %-16s %s\n", "agent does", "status", "decision", "side effects upstream")
	if err := a.scenario(); err != nil {
		return err
	}
	return a.mcpScenario()
}

// start runs cmd and waits until a line of its output matches ready; it returns the first group.
func start(cmd *exec.Cmd, ready *regexp.Regexp) (*exec.Cmd, string, error) {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil && found != nil {
				found <- m[1]
				found = nil
			} else if strings.Contains(sc.Text(), `"level":"ERROR"`) {
				fmt.Fprintln(os.Stderr, sc.Text())
			}
		}
	}()
	select {
	case addr := <-found:
		return cmd, addr, nil
	case <-time.After(15 * time.Second):
		stop(cmd)
		return nil, "", errors.New("not ready after 15s")
	}
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
	}
}

type agent struct {
	gateway, sandbox string
}

const issue = `{"fields":{"project":{"key":"OPS"},"summary":"Checkout is down in eu-west-1","issuetype":{"name":"Incident"},"description":"Raised by the on-call agent"}}`

func (a *agent) scenario() error {
	// 1. The first call executes.
	a.step("create the incident issue with key inc-1", a.create("inc-1", issue, nil, 0))
	// 2. The model times out while the upstream is still working, and retries.
	a.step("new issue inc-2; upstream slow (2s), agent gives up at 0.5s", a.create("inc-2", issue, map[string]string{"X-Sandbox-Delay": "2s"}, 500*time.Millisecond))
	a.step("agent retries at once", a.create("inc-2", issue, nil, 0))
	time.Sleep(2 * time.Second)
	a.step("agent retries after 2s", a.create("inc-2", issue, nil, 0))
	// 3. The same key for another issue is refused.
	other := strings.Replace(issue, "Checkout is down", "Payments are down", 1)
	a.step("key inc-1 reused for a different summary", a.create("inc-1", other, nil, 0))
	// 4. A queue redelivers one job to ten workers at once.
	var wg sync.WaitGroup
	results := make([]result, 10)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = a.create("inc-3", issue, nil, 0) }()
	}
	wg.Wait()
	count := map[string]int{}
	for _, r := range results {
		count[fmt.Sprintf("%d %s", r.status, r.decision)]++
	}
	var parts []string
	for k, n := range count {
		parts = append(parts, fmt.Sprintf("%d× %s", n, k))
	}
	slices.Sort(parts) // map order varies; the counts are what vary between runs
	fmt.Printf("%-58s %-23s %d\n", "ten workers send key inc-3 at once", strings.Join(parts, ", "), a.effects())
	a.step("one more retry of inc-3", a.create("inc-3", issue, nil, 0))
	fmt.Println("\nThree issues were asked for three times or more; the sandbox created each exactly once.")
	return nil
}

type result struct {
	status   int
	decision string
	err      error
}

func (a *agent) create(key, body string, headers map[string]string, timeout time.Duration) result {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.gateway+"/rest/api/3/issue", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Actor-ID", "demo-agent")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return result{status: resp.StatusCode, decision: resp.Header.Get("Idempotency-Decision")}
}

func (a *agent) step(what string, r result) {
	if r.err != nil {
		fmt.Printf("%-58s %-23s %d\n", what, "(agent gave up)", a.effects())
		return
	}
	fmt.Printf("%-58s %-6d %-16s %d\n", what, r.status, r.decision, a.effects())
}

// effects is the sandbox's count of side effects performed so far.
func (a *agent) effects() int {
	resp, err := http.Get(a.sandbox + "/_sandbox/stats")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var stats struct {
		Total int `json:"total"`
	}
	if json.NewDecoder(resp.Body).Decode(&stats) != nil {
		return -1
	}
	return stats.Total
}
