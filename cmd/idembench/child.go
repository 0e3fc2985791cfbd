package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/idemgateway/idemgateway/internal/childproc"
)

// The proxies under test (the bare proxy, the gateway on Redis, on the embedded store and on
// PostgreSQL, and the floors) run in a child process: this same program, started with childEnv
// set. The load generator and the upstream stay in the harness, so the child's CPU time over a
// run is the CPU time of the proxy under test alone, and comparable between the gateway and the
// bare proxy.

// childEnv carries the child's childConfig, as JSON; its presence makes the program the child.
const childEnv = "IDEMBENCH_CHILD"

// childConfig is what the harness tells its child.
type childConfig struct {
	Upstream string `json:"upstream"` // the upstream's base URL
	Redis    string `json:"redis"`    // host:port of the harness's redis-server
	DataDir  string `json:"data_dir"` // directory of the embedded store's file
	Postgres string `json:"postgres"` // connection URL of the harness's PostgreSQL
	// MemProfile makes the child record every allocation (runtime.MemProfileRate = 1), for
	// -memprofile.
	MemProfile bool `json:"mem_profile"`
}

// childAddrs is the one line, JSON, that the child writes on its stdout once it serves: the base
// URL of each proxy and of its control listener.
type childAddrs struct {
	Bare     string `json:"bare"`
	Gateway  string `json:"gateway"`  // on Redis
	Embedded string `json:"embedded"` // on the embedded store (boltstore)
	Postgres string `json:"postgres"` // on the PostgreSQL store (pgstore)
	// Pipelined is a gateway on the same Redis whose store auto-pipelines (-redis-only runs).
	Pipelined string `json:"pipelined"`
	Floor     string `json:"floor"`          // the floor on Redis
	FloorPG   string `json:"floor_postgres"` // the floor on PostgreSQL
	Control   string `json:"control"`        // GET /stats, and /debug/pprof/profile and /debug/pprof/allocs
}

// childStats is what the control listener's /stats answers.
type childStats struct {
	CPU   time.Duration `json:"cpu_ns"` // CPU time (user + system) the child has used so far
	Trips int64         `json:"trips"`  // round trips of the Redis gateway's store client so far
}

// serveChild is the child's main: it serves the proxies until its stdin is closed (the harness
// closes it, or exits), then shuts them down. It returns the exit code.
func serveChild(env string) int {
	if err := runChild(env, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "idembench child:", err)
		return 1
	}
	return 0
}

func runChild(env string, stdin io.Reader, stdout io.Writer) error {
	var cfg childConfig
	if err := json.Unmarshal([]byte(env), &cfg); err != nil {
		return fmt.Errorf("%s: %w", childEnv, err)
	}
	if cfg.MemProfile {
		runtime.MemProfileRate = 1 // every allocation, so that counts per request are exact
	}
	up, err := url.Parse(cfg.Upstream)
	if err != nil {
		return err
	}
	trips := &roundTrips{}
	gw, closeRedis, err := newRedisGateway(up, cfg.Redis, trips, false)
	if err != nil {
		return err
	}
	defer closeRedis()
	pipelined, closePipelined, err := newRedisGateway(up, cfg.Redis, nil, true)
	if err != nil {
		return err
	}
	defer closePipelined()
	emb, closeBolt, err := newEmbeddedGateway(up, cfg.DataDir)
	if err != nil {
		return err
	}
	defer closeBolt()
	pg, closePG, err := newPostgresGateway(up, cfg.Postgres)
	if err != nil {
		return err
	}
	defer closePG()
	floorRedis := newRedisClient(cfg.Redis)
	defer floorRedis.Close()
	floorPG, closeFloorPG, err := newPostgresFloorOn(cfg.Postgres)
	if err != nil {
		return err
	}
	defer closeFloorPG()

	control := http.NewServeMux()
	control.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(childStats{CPU: processCPU(), Trips: trips.n.Load()})
	})
	control.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	control.Handle("GET /debug/pprof/allocs", pprof.Handler("allocs"))

	var addrs childAddrs
	for _, s := range []struct {
		h   http.Handler
		url *string
		gw  bool // served as cmd/idemgateway serves the gateway (serveGateway)
	}{
		{newBareProxy(up), &addrs.Bare, false}, {gw, &addrs.Gateway, true}, {emb, &addrs.Embedded, true}, {pg, &addrs.Postgres, true},
		{pipelined, &addrs.Pipelined, true}, {newFloor(up, redisFloor{floorRedis}), &addrs.Floor, false},
		{newFloor(up, floorPG), &addrs.FloorPG, false}, {control, &addrs.Control, false},
	} {
		serveIt := serve
		if s.gw {
			serveIt = serveGateway
		}
		srv, err := serveIt(s.h)
		if err != nil {
			return err
		}
		defer srv.close()
		*s.url = srv.url
	}
	if err := json.NewEncoder(stdout).Encode(addrs); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, stdin) // until the harness closes it or exits
	return nil
}

// child is the harness's handle on its child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer // closing it stops the child
	addrs childAddrs
	done  chan struct{} // closed once cmd has been waited for
}

// startChild starts the child with cfg and waits until it serves.
func startChild(ctx context.Context, cfg childConfig) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	env, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.Command(self), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(env))
	c.cmd.Stderr = os.Stderr
	c.cmd.SysProcAttr = childproc.SysProcAttr()
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	c.stdin = stdin
	line := make(chan error, 1)
	go func() {
		b, err := bufio.NewReader(stdout).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(b, &c.addrs)
		}
		line <- err
		_, _ = io.Copy(io.Discard, stdout)
		_ = c.cmd.Wait()
		close(c.done)
	}()
	select {
	case err = <-line:
	case <-time.After(30 * time.Second):
		err = errors.New("not serving after 30s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("child process: %w", err)
	}
	return c, nil
}

// stop closes the child's stdin, which makes it shut down, and kills it if it has not exited
// after 10 s.
func (c *child) stop() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// stats asks the child for its CPU time and round trips so far.
func (c *child) stats(ctx context.Context) (childStats, error) {
	var s childStats
	body, err := c.get(ctx, "/stats")
	if err == nil {
		err = json.Unmarshal(body, &s)
	}
	if err != nil {
		return s, fmt.Errorf("child stats: %w", err)
	}
	return s, nil
}

// cpuProfile writes a CPU profile of the child, over the next d rounded to whole seconds (at least
// one), to file.
func (c *child) cpuProfile(ctx context.Context, d time.Duration, file string) error {
	seconds := max(int(d.Round(time.Second)/time.Second), 1)
	return c.save(ctx, "/debug/pprof/profile?seconds="+strconv.Itoa(seconds), file)
}

// allocProfile writes the child's allocation profile (cumulative since it started, after a
// garbage collection) to file.
func (c *child) allocProfile(ctx context.Context, file string) error {
	return c.save(ctx, "/debug/pprof/allocs?gc=1", file)
}

func (c *child) save(ctx context.Context, path, file string) error {
	body, err := c.get(ctx, path)
	if err != nil {
		return fmt.Errorf("child profile: %w", err)
	}
	return os.WriteFile(file, body, 0o644)
}

// get fetches path from the child's control listener.
func (c *child) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.addrs.Control+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}
