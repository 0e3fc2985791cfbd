package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/childproc"
)

// redisServer is a redis-server process the harness started: in memory only (--save "",
// --appendonly no), on a free 127.0.0.1 port, its log in a temporary directory.
type redisServer struct {
	cmd    *exec.Cmd
	dir    string
	addr   string
	exited chan struct{} // closed once cmd has been waited for
}

// startRedis starts redis-server and waits until it answers PING. It retries with another port
// when the server exits at once (another process may take the port between probe and bind).
func startRedis(ctx context.Context) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (Debian package redis-server; make redis-server installs it): %w", err)
	}
	dir, err := os.MkdirTemp("", "idembench-redis-")
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		var s *redisServer
		if s, err = tryRedis(ctx, bin, dir); err == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

func tryRedis(ctx context.Context, bin, dir string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &redisServer{dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "redis.log", "--daemonize", "no")
	s.cmd.SysProcAttr = childproc.SysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	client := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: time.Second})
	defer client.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if client.Ping(ctx).Err() == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redis-server exited at start: %s", s.logTail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server not ready after 15s: %s", s.logTail())
		}
	}
}

// stop ends the server (SIGTERM, then SIGKILL after 5 s) and removes its directory.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	_ = os.RemoveAll(s.dir)
}

func (s *redisServer) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-5, 0):], "\n")
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// roundTrips is a go-redis hook that counts the round trips a client makes on the request path:
// one per command sent alone (a script's EVALSHA, and its EVAL fallback, are one each), one per
// pipeline, of the commands sent for an HTTP request (their context carries the server's
// http.ServerContextKey, which the gateway's store calls keep). The store's background work, its
// safety check every 5 s and the retries of pending settles, is not a request's: counted, it made
// an execute's 2 round trips read 2.0025 on a window of 2000 requests.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(ctx)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(ctx)
		return next(ctx, cmds)
	}
}

func (h *roundTrips) count(ctx context.Context) {
	if ctx.Value(http.ServerContextKey) != nil {
		h.n.Add(1)
	}
}

// commandStats reads INFO commandstats: the calls of each command since the server started, by
// lower-case name ("evalsha", "hset", …). Commands that scripts run are counted too.
func commandStats(ctx context.Context, c *redis.Client) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return parseCommandStats(info)
}

// parseCommandStats parses the lines "cmdstat_<name>:calls=<n>,usec=…" of INFO commandstats.
func parseCommandStats(info string) (map[string]int64, error) {
	stats := make(map[string]int64)
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats: %q: %w", line, err)
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	if len(stats) == 0 {
		return nil, errors.New("INFO commandstats: no cmdstat_ line")
	}
	return stats, nil
}

// commandDelta is the calls of each command between two snapshots of commandStats, divided by
// requests, without the harness's own INFO; commands with no call are left out.
func commandDelta(before, after map[string]int64, requests int) map[string]float64 {
	out := make(map[string]float64)
	for name, n := range after {
		if d := n - before[name]; d > 0 && name != "info" {
			out[name] = float64(d) / float64(requests)
		}
	}
	return out
}

// sortedNames returns the keys of the maps, sorted, without duplicates.
func sortedNames(ms ...map[string]float64) []string {
	var names []string
	for _, m := range ms {
		for name := range m {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// measureRTT times n PINGs on c, one every interval (back to back when interval is 0), and returns
// their median and p99: the loopback round trip of one Redis command through go-redis, the unit of
// R3. Back to back, both ends stay awake; paced like the open loop, each PING also pays for waking
// the idle client and server, as the gateway's round trips do in the open-loop runs.
func measureRTT(ctx context.Context, c *redis.Client, n int, interval time.Duration) (p50, p99 time.Duration, err error) {
	samples := make([]time.Duration, 0, n)
	next := time.Now()
	for range n {
		if err := sleep(ctx, time.Until(next)); err != nil {
			return 0, 0, err
		}
		next = next.Add(interval)
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return 0, 0, err
		}
		samples = append(samples, time.Since(start))
	}
	slices.Sort(samples)
	return percentile(samples, 50), percentile(samples, 99), nil
}

// redisCPU reads INFO cpu: the CPU time (used_cpu_user + used_cpu_sys) the server has used so far.
func redisCPU(ctx context.Context, c *redis.Client) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.Lines(info) {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_user" || name == "used_cpu_sys" {
			s, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu: %q: %w", line, err)
			}
			total += s
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}
