// Command idemstress measures the bounds of the work per request (docs/security.md#resource-limits)
// on a real gateway process: the peak memory (VmHWM of /proc/<pid>/status) of bin/idemgateway while
// it fingerprints many large bodies at once, and the latency of an unrelated read meanwhile against
// the same read on the idle gateway. It prints a Markdown table (docs/performance.md#bounded-work).
//
// It starts, on 127.0.0.1 only, an upstream that reads each request and answers 201 (a GET 200,
// a few bytes), and for each scenario a fresh gateway process (the -gateway binary, embedded store
// in a new temporary directory, default bounds) so that each peak is the scenario's own. A
// scenario keeps its number of senders busy for -duration, each sending the same kind of body
// under a new idempotency key as soon as its last one is answered, while one reader sends
// GET /v1/items/1 (a read_only route) one after another; the read's median and 90th percentile
// latency are divided by those of the same reads on the idle gateway.
//
// Usage:
//
//	go run ./cmd/idemstress -gateway bin/idemgateway     (or: make stress)
//
// Flags:
//
//	-gateway path  the gateway binary (default bin/idemgateway)
//	-duration d    load time of each scenario (default 6s)
//	-reads n       reads of the idle measure (default 300)
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idemgateway/idemgateway/internal/childproc"
)

func main() {
	bin := flag.String("gateway", "bin/idemgateway", "the gateway binary")
	duration := flag.Duration("duration", 6*time.Second, "load time of each scenario")
	reads := flag.Int("reads", 300, "reads of the idle measure")
	flag.Parse()
	if err := run(*bin, *duration, *reads); err != nil {
		fmt.Fprintln(os.Stderr, "idemstress:", err)
		os.Exit(1)
	}
}

// scenario is one load: senders sending body to path at once.
type scenario struct {
	name    string
	path    string
	senders int
	body    []byte
}

// outcome is what a scenario measured.
type outcome struct {
	hwmKB    int64            // VmHWM of the gateway process
	statuses map[int]int      // answers to the senders, by status
	read     [2]time.Duration // p50 and p90 of the reads under load
	idle     [2]time.Duration // p50 and p90 of the same reads on the idle gateway
	sent     int              // requests answered
}

func run(bin string, duration time.Duration, reads int) error {
	up := &http.Server{Handler: http.HandlerFunc(upstream), ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = up.Serve(ln) }()
	defer up.Close()

	const mib = 1 << 20
	scenarios := []scenario{
		{"16 × 1 MiB JSON (tickets with comments, ~61 000 values)", "/v1/json", 16, ticketBody(mib)},
		{"8 × 1 MiB GraphQL (a mutation of ~6 300 aliased fields, ~82 000 tokens)", "/graphql", 8, graphqlBody(mib)},
		{"16 × 1 MiB JSON array of 10-byte strings (~95 000 values: the most values per byte under the budget)", "/v1/json", 16, stringsBody(mib)},
		{"8 × 690 KB GraphQL query of 99 990 short fields (the most syntax tree per byte under the budget)", "/graphql", 8, fieldsBody(99_990)},
		{"16 × 1 MiB JSON array of 1-byte numbers (~520 000 values: over the budget, 413)", "/v1/json", 16, numbersBody(mib)},
	}
	fmt.Fprintf(os.Stderr, "idemstress: %s/%s, %d CPUs, gateway %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), bin)
	var rows []string
	for _, sc := range scenarios {
		fmt.Fprintf(os.Stderr, "idemstress: %s\n", sc.name)
		o, err := measure(bin, "http://"+ln.Addr().String(), sc, duration, reads)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %s | %.0f MB | %s / %s | %s / %s | %.1f× / %.1f× |",
			sc.name, o.sent, statusText(o.statuses), float64(o.hwmKB)/1024,
			ms(o.idle[0]), ms(o.idle[1]), ms(o.read[0]), ms(o.read[1]),
			ratio(o.read[0], o.idle[0]), ratio(o.read[1], o.idle[1])))
	}
	fmt.Printf("%d CPUs; each scenario %s on a fresh gateway process with the default bounds.\n\n", runtime.NumCPU(), duration)
	fmt.Println("| scenario | answered | statuses | peak RSS (VmHWM) | idle read p50 / p90 | read under load p50 / p90 | ratio p50 / p90 |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
	return nil
}

// upstream answers a GET with a few bytes and anything else, once its body is read, with 201.
func upstream(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, `{"id":"1","title":"x"}`)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"T-1"}`)
}

const routesYAML = `
upstreams:
  up: {url: %q, timeout: 60s}
defaults: {max_body_bytes: 2097152, lock_lease: 60s}
routes:
  - {name: create_json, upstream: up, method: POST, path: /v1/json, class: non_idempotent}
  - {name: create_graphql, upstream: up, method: POST, path: /graphql, class: non_idempotent,
     fingerprint: {body: {format: graphql}}}
  - {name: read_item, upstream: up, method: GET, path: "/v1/items/{id}", class: read_only}
`

// measure runs sc on a fresh gateway process.
func measure(bin, upstreamURL string, sc scenario, duration time.Duration, reads int) (*outcome, error) {
	dir, err := os.MkdirTemp("", "idemstress")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	routes := filepath.Join(dir, "routes.yaml")
	if err := os.WriteFile(routes, []byte(fmt.Sprintf(routesYAML, upstreamURL)), 0o600); err != nil {
		return nil, err
	}
	listen, admin := freeAddr(), freeAddr()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "IDEMGATEWAY_ROUTES="+routes, "IDEMGATEWAY_LISTEN="+listen,
		"IDEMGATEWAY_ADMIN_LISTEN="+admin, "IDEMGATEWAY_DATA_DIR="+filepath.Join(dir, "data"), "IDEMGATEWAY_LOG_LEVEL=error")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childproc.SysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	base := "http://" + listen
	if err := awaitReady("http://"+admin+"/readyz", 30*time.Second); err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 2 * time.Minute}
	read := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Get(base + "/v1/items/1")
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("read: %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	for range 20 { // warm up connections and code paths
		if _, err := read(); err != nil {
			return nil, err
		}
	}
	var idle []time.Duration
	for range reads {
		d, err := read()
		if err != nil {
			return nil, err
		}
		idle = append(idle, d)
	}

	o := &outcome{statuses: map[int]int{}, idle: quantiles(idle)}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		keys atomic.Int64
		errs = make(chan error, sc.senders)
	)
	for range sc.senders {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequest(http.MethodPost, base+sc.path, bytes.NewReader(sc.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "stress-"+strconv.FormatInt(keys.Add(1), 10))
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				o.statuses[resp.StatusCode]++
				o.sent++
				mu.Unlock()
			}
		})
	}
	var loaded []time.Duration
	time.Sleep(200 * time.Millisecond) // the senders' first bodies are on their way
	for ctx.Err() == nil {
		d, err := read()
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, d)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	o.read = quantiles(loaded)
	if o.hwmKB, err = vmHWM(cmd.Process.Pid); err != nil {
		return nil, err
	}
	return o, nil
}

// vmHWM reads the peak resident set size of process pid, in KiB (proc(5)).
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
}

// awaitReady polls url until it answers 200.
func awaitReady(url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %s", url, limit)
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// quantiles returns the median and the 90th percentile of ds.
func quantiles(ds []time.Duration) [2]time.Duration {
	if len(ds) == 0 {
		return [2]time.Duration{}
	}
	slices.Sort(ds)
	return [2]time.Duration{ds[len(ds)/2], ds[len(ds)*9/10]}
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func statusText(m map[int]int) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d×%d", m[s], s))
	}
	return strings.Join(parts, ", ")
}
