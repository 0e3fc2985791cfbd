// Command idembench measures what the idempotency gateway costs over a bare reverse proxy, on one
// machine, and prints the result as a Markdown table against its performance budget
// (docs/performance.md).
//
// It starts, on 127.0.0.1 only, a redis-server on a free port (--save "", --appendonly no; stopped
// at the end; redis-server must be on PATH), and in its own process an upstream that reads the
// request and answers 201 with a JSON body of the request's size (1 KiB unless a measure names
// another size). In a child process (this program again, child.go), so that the CPU time of the
// proxy under test is measured apart from the load generator's and the upstream's, it serves:
//
//   - the baseline: a bare httputil.ReverseProxy to the upstream with the gateway's transport
//     (gateway.NewTransport);
//   - the gateway (gateway.New, the contract's create_ticket route in front of the upstream) on
//     the Redis store;
//   - the same gateway on the embedded store (boltstore, as cmd/idemgateway opens it), its file in
//     a new directory under -data-dir, removed at the end;
//   - the same gateway on the PostgreSQL store (pgstore, as cmd/idemgateway opens it), on a
//     PostgreSQL of its own (internal/pgtest);
//   - a reference "floor": the bare proxy plus the contract's Redis round trips and nothing else
//     (one SET … NX GET to claim or replay, one SET to commit; see floor.go), which shows the best
//     R1 and R2 that any gateway on this Redis could reach on this machine;
//   - the same floor on that PostgreSQL: the bare proxy plus the statements the PostgreSQL store
//     sends (a read, an insert and an update with the answer, each its own round trip and the last
//     two commits), on a table of the key, the request body and the answer alone, which shows
//     what those statements leave of R1 and R2 on this machine;
//
// and drives them over HTTP from its own load generator: a closed loop (-concurrency workers, each
// sending its next request when the previous one is answered) for throughput, and an open loop
// (-rate requests per second, whatever the answers) for latency. Every "execute" request carries
// a key never used before; "replay" requests cycle over -replay-keys keys whose receipts were
// stored first. Bodies differ per key, as separate operations of an agent would.
//
// It prints, with -reps repetitions and their medians (ratios are taken per repetition, the
// gateway's run against the bare proxy's run of the same repetition, then the median of those):
//
//   - R1 = gateway first-execution throughput ÷ bare proxy throughput (1 KiB);
//   - R2 = gateway replay throughput ÷ bare proxy throughput (1 KiB);
//   - R3 = gateway execute p99 − bare proxy p99 at -rate, in µs and in Redis round trips (the
//     median of sequential PINGs through go-redis);
//   - Redis commands per request, execute and replay, from INFO commandstats deltas (commands that
//     the scripts run included), and round trips per request counted by a go-redis hook on the
//     store's client;
//   - allocations per request from testing.Benchmark of the gateway's and the bare proxy's
//     ServeHTTP (httptest.NewRecorder, real upstream and Redis), gateway minus bare proxy;
//   - R1 for 256 B and 64 KiB request and response bodies, and 64 KiB R1 ÷ 256 B R1;
//   - R1 and R2 of the gateway on the embedded store (budget: R1 ≥ 0.4);
//   - the budget of the Redis store's work (docs/performance.md#redis-work-per-execution): Redis
//     commands inside the scripts per first execution (≤ 6), Redis CPU per first execution ÷ per
//     replay (≤ 1.6), and the gateway process's CPU per first execution ÷ the bare proxy's per
//     request (≤ 1.35);
//   - MCP tool calls (mcp.go, docs/performance.md#mcp-tool-calls): a tools/call of a real go-sdk
//     MCP server (stateless, answering with JSON on one path and an SSE stream on another, in the
//     harness's process) through the bare proxy and through a kind: mcp route of the gateway,
//     executed and replayed, and the budget that an MCP replay costs no more than an HTTP replay
//     (throughput and the gateway process's CPU per request, MCP replay ÷ HTTP replay in the same
//     repetition);
//
// with the machine it ran on, each budget marked met or not met, and the CPU time per request in
// each throughput run of the proxies' process (getrusage in the child) and of Redis (INFO cpu),
// with their ratios to the bare proxy's process in the same repetition, and of the harness's own
// process (load generator and upstream). Progress goes to stderr and the table to
// stdout. With the defaults a run takes four to five minutes (-mcp: two).
//
// Usage:
//
//	go run ./cmd/idembench [flags]     (or: make bench)
//
// Flags:
//
//	-duration d          measured window of each closed-loop (throughput) run (default 3s)
//	-warmup d            warm-up before each run's window, not measured (default 500ms)
//	-concurrency n       closed-loop workers (default 32)
//	-rate r              open-loop rate, requests per second (default 500)
//	-latency-duration d  measured window of each open-loop (latency) run (default 4s)
//	-reps n              repetitions of every run (default 3)
//	-replay-keys n       stored receipts the replay runs cycle over (default 1000)
//	-count n             requests over which Redis commands per request are counted (default 2000)
//	-cpuprofile file     after the table, profile one more closed-loop run of -profile into file
//	-memprofile file     write the allocation profile (cumulative over the process) after that run;
//	                     it records every allocation (runtime.MemProfileRate = 1), which slows
//	                     everything: use it with -profile-only and apart from -cpuprofile
//	-profile what        the run -cpuprofile and -memprofile profile: execute, replay, bare,
//	                     embedded or embedded-replay (default execute)
//	-profile-size n      body size of the profiled run of execute or bare: 256, 1024 or 65536
//	                     (default 1024; replay is always 1024)
//	-profile-only        skip the table: only the profiled run (needs -cpuprofile or -memprofile)
//	-data-dir dir        where the embedded store's directory is made (default: the system's
//	                     temporary directory); the embedded store's figures are its disk's fsync
//	-redis-only          only the rows of the Redis store's work: commands per request,
//	                     and the closed loops of the bare proxy, execute and replay at 1 KiB, with
//	                     their CPU per request (no allocations, latency, floor, embedded store or
//	                     other sizes); about a fifth of the time
//	-mcp                 only the rows of MCP tool calls: the closed loops of the bare
//	                     proxy, execute and replay at 1 KiB, over HTTP and as tools/calls with JSON
//	                     and SSE answers, with their CPU per request, and Redis round trips per
//	                     request; about half the time
//
// The profiles are the child's: the proxies only, without the load generator and the upstream.
// Read one with, for example, go tool pprof -top -nodecount=40 idembench cpu.prof, and the
// gateway's handler alone with -focus='gateway\.\(\*Gateway\)\.ServeHTTP'. docs/performance.md holds a measured table and the
// analysis.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config holds the flags.
type config struct {
	duration        time.Duration
	warmup          time.Duration
	concurrency     int
	rate            float64
	latencyDuration time.Duration
	reps            int
	replayKeys      int
	count           int
	cpuprofile      string
	memprofile      string
	profile         string
	profileSize     int
	profileOnly     bool
	dataDir         string
	redisOnly       bool
	mcpOnly         bool
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("idembench", flag.ContinueOnError)
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measured window of each closed-loop (throughput) run")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "warm-up before each run's window, not measured")
	fs.IntVar(&c.concurrency, "concurrency", 32, "closed-loop workers")
	fs.Float64Var(&c.rate, "rate", 500, "open-loop rate, requests per second")
	fs.DurationVar(&c.latencyDuration, "latency-duration", 4*time.Second, "measured window of each open-loop (latency) run")
	fs.IntVar(&c.reps, "reps", 3, "repetitions of every run")
	fs.IntVar(&c.replayKeys, "replay-keys", 1000, "stored receipts the replay runs cycle over")
	fs.IntVar(&c.count, "count", 2000, "requests over which Redis commands per request are counted")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "after the table, profile one more closed-loop run of -profile into `file`")
	fs.StringVar(&c.memprofile, "memprofile", "", "write the allocation profile (every allocation, cumulative over the process) to `file` after the profiled run")
	fs.StringVar(&c.profile, "profile", "execute", "the run -cpuprofile and -memprofile profile: execute, replay, bare, embedded, embedded-replay, postgres, postgres-replay or mcp-replay (a tools/call with JSON answers)")
	fs.IntVar(&c.profileSize, "profile-size", mediumBody, "body size in bytes of the profiled run of execute or bare: 256, 1024 or 65536 (replay: 1024)")
	fs.BoolVar(&c.profileOnly, "profile-only", false, "skip the table: only the profiled run")
	fs.BoolVar(&c.redisOnly, "redis-only", false, "measure only the Redis store's work: commands per request, and closed loops of the bare proxy, execute and replay at 1 KiB, on the plain and on the auto-pipelined Redis store")
	fs.BoolVar(&c.mcpOnly, "mcp", false, "measure only MCP tool calls: closed loops of the bare proxy, execute and replay at 1 KiB, over HTTP and as tools/calls with JSON and SSE answers")
	fs.StringVar(&c.dataDir, "data-dir", "", "directory in which the embedded store's directory is made (default: the system's temporary directory); its disk's fsync is measured")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if c.duration <= 0 || c.warmup < 0 || c.latencyDuration <= 0 {
		problems = append(problems, errors.New("-duration and -latency-duration must be positive, -warmup not negative"))
	}
	if c.concurrency < 1 || c.reps < 1 || c.replayKeys < 1 || c.count < 1 {
		problems = append(problems, errors.New("-concurrency, -reps, -replay-keys and -count must be at least 1"))
	}
	if c.rate <= 0 || time.Duration(float64(time.Second)/c.rate) <= 0 {
		problems = append(problems, errors.New("-rate must be positive and at most 1e9"))
	}
	switch c.profile {
	case "execute", "replay", "bare", "embedded", "embedded-replay", "postgres", "postgres-replay", "mcp-replay":
	default:
		problems = append(problems, fmt.Errorf("-profile %q: want execute, replay, bare, embedded, embedded-replay, postgres, postgres-replay or mcp-replay", c.profile))
	}
	switch c.profileSize {
	case smallBody, mediumBody, largeBody:
	default:
		problems = append(problems, fmt.Errorf("-profile-size %d: want %d, %d or %d", c.profileSize, smallBody, mediumBody, largeBody))
	}
	if c.redisOnly && c.mcpOnly {
		problems = append(problems, errors.New("-redis-only and -mcp exclude each other"))
	}
	if c.profileOnly && c.cpuprofile == "" && c.memprofile == "" {
		problems = append(problems, errors.New("-profile-only needs -cpuprofile or -memprofile"))
	}
	return c, errors.Join(problems...)
}

func main() {
	if env, ok := os.LookupEnv(childEnv); ok {
		os.Exit(serveChild(env))
	}
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idembench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "idembench:", err)
		os.Exit(1)
	}
}

// run sets everything up, measures, prints the table, profiles if asked, and tears down.
func run(ctx context.Context, cfg config) error {
	b, err := setup(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.close()
	if !cfg.profileOnly {
		start := time.Now()
		res, err := b.measure(ctx)
		if err != nil {
			return err
		}
		res.elapsed = time.Since(start)
		res.machine, res.dataDir = b.machine(ctx), b.dataDir
		writeReport(os.Stdout, cfg, res)
	}
	if cfg.cpuprofile != "" || cfg.memprofile != "" {
		return b.profile(ctx)
	}
	return nil
}

// profile runs one more closed loop of cfg.profile while the child records a CPU profile of its
// measured window, then fetches the child's allocation profile.
func (b *bench) profile(ctx context.Context) error {
	t := b.execute(b.cfg.profileSize)
	switch b.cfg.profile {
	case "replay", "embedded-replay", "postgres-replay", "mcp-replay":
		if err := b.reset(ctx, true); err != nil {
			return err
		}
		switch b.cfg.profile {
		case "replay":
			t = b.replayTarget()
		case "embedded-replay":
			t = b.embeddedReplay()
		case "postgres-replay":
			t = b.postgresReplay()
		default:
			t = b.mcpTarget("replay", mcpAnswers[0])
		}
	case "bare":
		t = b.bareTarget(b.cfg.profileSize)
	case "embedded":
		t = b.embeddedExecute()
	case "postgres":
		t = b.postgresExecute()
	default:
		if err := b.reset(ctx, false); err != nil {
			return err
		}
	}
	profiled := make(chan error, 1)
	if b.cfg.cpuprofile != "" {
		go func() {
			if err := sleep(ctx, b.cfg.warmup); err != nil {
				profiled <- err
				return
			}
			profiled <- b.child.cpuProfile(ctx, b.cfg.duration, b.cfg.cpuprofile)
		}()
	} else {
		profiled <- nil
	}
	res, err := b.load.closedLoop(ctx, t, b.cfg.concurrency, b.cfg.warmup, b.cfg.duration)
	if perr := <-profiled; err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	logf("profiled run: %s, closed loop, %d workers, %d B: %.0f req/s, %d requests in all, warm-up included (%d failed)",
		t.name, b.cfg.concurrency, t.size, res.throughput, res.requests, res.failed)
	if b.cfg.memprofile != "" {
		return b.child.allocProfile(ctx, b.cfg.memprofile)
	}
	return nil
}

// logf prints a progress line on stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "idembench: "+format+"\n", args...)
}
