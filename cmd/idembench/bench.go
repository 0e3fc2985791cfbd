package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgateway/idemgateway/internal/pgtest"
)

// bench is the running setup: Redis, the upstream and the load generator in this process, and
// the child process that serves the proxies under test (child.go), each on its own loopback
// listener.
type bench struct {
	cfg     config
	redis   *redisServer
	admin   *redis.Client  // the harness's own Redis client: INFO, FLUSHALL, PING
	dataDir string         // the embedded store's directory, removed by close
	pg      *pgtest.Server // the PostgreSQL of the PostgreSQL-store gateway, stopped by close
	child   *child         // the bare proxy, the gateway on Redis, on the embedded store and on PostgreSQL, the floors

	upstream *server
	// In this process, for the allocation benchmarks only: a bare proxy and a gateway on the same
	// Redis as the child's.
	bareHandler http.Handler
	gwHandler   http.Handler
	closeStore  func()

	load     *loader
	bareKeys *uniqueKeys // keys of the bare proxy's requests (sent so that requests are alike)
	execKeys *uniqueKeys // keys never used before: first executions
	replay   *cycleKeys  // keys of stored receipts; refilled by reset

	embKeys   *uniqueKeys // first executions on the embedded store
	embReplay *cycleKeys  // keys the embedded store holds; refilled by reset

	pgKeys   *uniqueKeys // first executions on the PostgreSQL store
	pgReplay *cycleKeys  // keys the PostgreSQL store holds; refilled by reset

	floorKeys   *uniqueKeys // first executions on the floor
	floorReplay *cycleKeys  // keys the floor holds; refilled by reset

	pgFloorKeys   *uniqueKeys // first executions on the PostgreSQL floor
	pgFloorReplay *cycleKeys  // keys the PostgreSQL floor holds; refilled by reset

	mcpKeys   *uniqueKeys           // MCP tools/calls: first executions, and the bare proxy's
	mcpReplay map[string]*cycleKeys // keys each kind: mcp route holds, by answer; refilled by reset
}

// setup starts Redis, the upstream and the child with the proxies. On error, what was started is
// stopped.
func setup(ctx context.Context, cfg config) (*bench, error) {
	b := &bench{cfg: cfg, load: newLoader(cfg.concurrency), bareKeys: newKeys("bare"), execKeys: newKeys("exec"),
		embKeys: newKeys("embedded"), pgKeys: newKeys("postgres"), floorKeys: newKeys("floor"), pgFloorKeys: newKeys("pgfloor"), mcpKeys: newKeys("mcp"), mcpReplay: map[string]*cycleKeys{},
		closeStore: func() {}}
	if err := b.start(ctx); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *bench) start(ctx context.Context) error {
	logf("starting redis-server")
	var err error
	if b.redis, err = startRedis(ctx); err != nil {
		return err
	}
	b.admin = redis.NewClient(&redis.Options{Addr: b.redis.addr, PoolSize: 2})
	if b.upstream, err = serve(newUpstreamMux()); err != nil {
		return err
	}
	upURL, err := url.Parse(b.upstream.url)
	if err != nil {
		return err
	}
	if b.dataDir, err = os.MkdirTemp(b.cfg.dataDir, "idembench-embedded-"); err != nil {
		return err
	}
	logf("starting PostgreSQL")
	if b.pg, err = pgtest.Launch(); err != nil {
		return err
	}
	if b.child, err = startChild(ctx, childConfig{Upstream: b.upstream.url, Redis: b.redis.addr, DataDir: b.dataDir,
		Postgres: b.pg.URL(), MemProfile: b.cfg.memprofile != ""}); err != nil {
		return err
	}
	b.bareHandler = newBareProxy(upURL)
	gw, closeStore, err := newRedisGateway(upURL, b.redis.addr, nil, false)
	if err != nil {
		return err
	}
	b.gwHandler, b.closeStore = gw, closeStore
	a := b.child.addrs
	logf("redis %s, postgres %s, upstream %s; child process %d: bare proxy %s, gateway %s, embedded-store gateway %s (%s), postgres-store gateway %s, floor %s",
		b.redis.addr, b.pg.Addr(), b.upstream.url, b.child.cmd.Process.Pid, a.Bare, a.Gateway, a.Embedded, b.dataDir, a.Postgres, a.Floor)
	return nil
}

// close stops everything setup started: the child first, Redis last.
func (b *bench) close() {
	if b.child != nil {
		b.child.stop()
	}
	if b.dataDir != "" {
		_ = os.RemoveAll(b.dataDir)
	}
	if b.pg != nil {
		b.pg.Close()
	}
	if b.upstream != nil {
		b.upstream.close()
	}
	b.closeStore()
	if b.admin != nil {
		_ = b.admin.Close()
	}
	if b.redis != nil {
		b.redis.stop()
	}
}

func (b *bench) bareTarget(size int) *target {
	return &target{name: "bare proxy", url: b.child.addrs.Bare + routePath, keys: b.bareKeys, size: size}
}

func (b *bench) execute(size int) *target {
	return &target{name: "gateway execute", url: b.child.addrs.Gateway + routePath, decision: "execute", keys: b.execKeys, size: size}
}

func (b *bench) replayTarget() *target {
	return &target{name: "gateway replay", url: b.child.addrs.Gateway + routePath, decision: "replay", keys: b.replay, size: mediumBody}
}

// pipelinedExecute and pipelinedReplay are execute and replay through the gateway whose Redis store
// auto-pipelines (redisstore.Options.AutoPipeline); it replays the same receipts, on the same Redis.
func (b *bench) pipelinedExecute() *target {
	return &target{name: "auto-pipelined gateway execute", url: b.child.addrs.Pipelined + routePath, decision: "execute", keys: b.execKeys, size: mediumBody}
}

func (b *bench) pipelinedReplay() *target {
	return &target{name: "auto-pipelined gateway replay", url: b.child.addrs.Pipelined + routePath, decision: "replay", keys: b.replay, size: mediumBody}
}

func (b *bench) embeddedExecute() *target {
	return &target{name: "embedded-store execute", url: b.child.addrs.Embedded + routePath, decision: "execute", keys: b.embKeys, size: mediumBody}
}

func (b *bench) postgresExecute() *target {
	return &target{name: "postgres-store execute", url: b.child.addrs.Postgres + routePath, decision: "execute", keys: b.pgKeys, size: mediumBody}
}

func (b *bench) postgresReplay() *target {
	return &target{name: "postgres-store replay", url: b.child.addrs.Postgres + routePath, decision: "replay", keys: b.pgReplay, size: mediumBody}
}

func (b *bench) embeddedReplay() *target {
	return &target{name: "embedded-store replay", url: b.child.addrs.Embedded + routePath, decision: "replay", keys: b.embReplay, size: mediumBody}
}

func (b *bench) floorExecute() *target {
	return &target{name: "floor execute", url: b.child.addrs.Floor + routePath, decision: "execute", keys: b.floorKeys, size: mediumBody}
}

func (b *bench) floorReplayTarget() *target {
	return &target{name: "floor replay", url: b.child.addrs.Floor + routePath, decision: "replay", keys: b.floorReplay, size: mediumBody}
}

func (b *bench) postgresFloorExecute() *target {
	return &target{name: "PostgreSQL floor execute", url: b.child.addrs.FloorPG + routePath, decision: "execute", keys: b.pgFloorKeys, size: mediumBody}
}

func (b *bench) postgresFloorReplay() *target {
	return &target{name: "PostgreSQL floor replay", url: b.child.addrs.FloorPG + routePath, decision: "replay", keys: b.pgFloorReplay, size: mediumBody}
}

// mcpTarget is who ("bare", "execute" or "replay") of a tools/call of the MCP server answering
// as a says: through the bare proxy, or a kind: mcp route of the gateway on Redis.
func (b *bench) mcpTarget(who string, a mcpAnswer) *target {
	t := &target{name: "MCP gateway " + who + " (" + a.name + ")", url: b.child.addrs.Gateway + a.path, decision: who,
		keys: b.mcpKeys, size: mediumBody, mcp: true, keyArg: a.keyArg}
	switch who {
	case "bare":
		t.name, t.url, t.decision = "MCP bare proxy ("+a.name+")", b.child.addrs.Bare+a.path, ""
	case "replay":
		t.keys = b.mcpReplay[a.name]
	}
	return t
}

// reset empties Redis (FLUSHALL, so that memory stays bounded and runs start alike) and, with
// replay, stores the receipts of -replay-keys new keys for the replay runs, through the gateway,
// and (not with -mcp) the embedded-store and PostgreSQL-store gateways and both floors, and each
// kind: mcp route (not with -redis-only). The embedded store is not emptied: its file grows over
// the run, as a gateway's does over its records' TTL.
func (b *bench) reset(ctx context.Context, replay bool) error {
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("flushall: %w", err)
	}
	if !replay {
		return nil
	}
	var err error
	if b.replay, err = b.storeKeys(ctx, b.child.addrs.Gateway+routePath, false, false); err != nil {
		return err
	}
	if !b.cfg.mcpOnly {
		if b.embReplay, err = b.storeKeys(ctx, b.child.addrs.Embedded+routePath, false, false); err != nil {
			return err
		}
		if b.pgReplay, err = b.storeKeys(ctx, b.child.addrs.Postgres+routePath, false, false); err != nil {
			return err
		}
		if b.floorReplay, err = b.storeKeys(ctx, b.child.addrs.Floor+routePath, false, false); err != nil {
			return err
		}
		if b.pgFloorReplay, err = b.storeKeys(ctx, b.child.addrs.FloorPG+routePath, false, false); err != nil {
			return err
		}
	}
	if !b.cfg.redisOnly {
		for _, a := range append(mcpAnswers, mcpArgAnswer) {
			if b.mcpReplay[a.name], err = b.storeKeys(ctx, b.child.addrs.Gateway+a.path, true, a.keyArg); err != nil {
				return err
			}
		}
	}
	return nil
}

// storeKeys executes -replay-keys new keys once each at url (tools/calls with mcp, their key an
// argument with keyArg), and returns them.
func (b *bench) storeKeys(ctx context.Context, url string, mcp, keyArg bool) (*cycleKeys, error) {
	fresh := newKeys("replay")
	keys := make([]string, b.cfg.replayKeys)
	for i := range keys {
		keys[i] = fresh.next()
	}
	store := &target{name: "storing the replay receipts", url: url, decision: "execute",
		keys: &cycleKeys{keys: keys}, size: mediumBody, mcp: mcp, keyArg: keyArg}
	return &cycleKeys{keys: keys}, b.load.count(ctx, store, len(keys), 8)
}

// results is everything measured, per repetition where repeated.
type results struct {
	machine machine
	elapsed time.Duration
	dataDir string // where the embedded store's file was

	rttP50, rttP99           time.Duration // PING through go-redis, back to back
	pacedRTTP50, pacedRTTP99 time.Duration // PING through go-redis, one every 1/rate seconds

	cmdsExecute, cmdsReplay   map[string]float64 // Redis commands per request, INFO commandstats
	tripsExecute, tripsReplay float64            // round trips per request, client-side count
	// Round trips per MCP tools/call (JSON answers) executed and replayed; not with -redis-only.
	tripsMCPExecute, tripsMCPReplay float64

	allocBare, allocExecute, allocReplay allocResult

	// Per repetition, by run name (see runName): closed-loop req/s, and the CPU time per request
	// of the closed loop in µs: of the child process (the proxy under test, with the embedded store
	// when it is the one under test), of this process (the load generator and the upstream), and
	// of Redis.
	throughput                                  map[string][]float64
	cpuProxy, cpuHarness, cpuRedis, cpuPostgres map[string][]float64
	// Per repetition, by who ("bare", "execute", "replay", "floor", "embedded", "embedded-replay",
	// "postgres", "postgres-replay"): open-loop p50, p90 and p99 in µs.
	p50, p90, p99 map[string][]float64
	maxLag        time.Duration // the largest open-loop dispatch lag p99 of all runs

	// What the store keeps per key, in bytes, of a 1 KiB execution's record: Redis's MEMORY
	// USAGE and PostgreSQL's table, TOAST and indexes (pg_total_relation_size) per row, measured
	// once the replay receipts are stored; 0 when not measured.
	bytesRedis, bytesPostgres float64

	warnings []string // runs with failed requests

	// othersCPU is the CPU time that other processes of the machine used during the measurements
	// (wall long): load the harness did not make, which skews its figures. Zero outside Linux.
	othersCPU, wall time.Duration
}

// runName names a run: who ("bare", "execute", "replay", "floor", "floor-replay", "embedded",
// "embedded-replay", "pipelined", "pipelined-replay", or an MCP run's mcpName) and the body size.
func runName(who string, size int) string { return fmt.Sprintf("%s/%d", who, size) }

// measure runs every measurement: the Redis RTT, commands per request, allocations, then -reps
// repetitions of the throughput and latency runs.
func (b *bench) measure(ctx context.Context) (out *results, err error) {
	// What the machine, the harness's processes and Redis used from here to the end: the rest is
	// others' load.
	machineStart, machineOK := machineBusy()
	start, err := b.cpu(ctx)
	if err != nil {
		return nil, err
	}
	wallStart := time.Now()
	defer func() {
		machineEnd, ok := machineBusy()
		end, cpuErr := b.cpu(ctx)
		if out == nil || !ok || !machineOK || cpuErr != nil {
			return
		}
		out.othersCPU = (machineEnd - machineStart) - (end.total() - start.total())
		out.wall = time.Since(wallStart)
	}()
	r := &results{throughput: map[string][]float64{}, cpuProxy: map[string][]float64{}, cpuHarness: map[string][]float64{},
		cpuRedis: map[string][]float64{}, cpuPostgres: map[string][]float64{}, p50: map[string][]float64{}, p90: map[string][]float64{}, p99: map[string][]float64{}}
	if r.rttP50, r.rttP99, err = measureRTT(ctx, b.admin, 2000, 0); err != nil {
		return nil, fmt.Errorf("redis rtt: %w", err)
	}
	interval := time.Duration(float64(time.Second) / b.cfg.rate)
	if r.pacedRTTP50, r.pacedRTTP99, err = measureRTT(ctx, b.admin, int(time.Second/interval)+1, interval); err != nil {
		return nil, fmt.Errorf("redis rtt: %w", err)
	}
	logf("redis PING round trip: back to back p50 %.0f µs, p99 %.0f µs; at %.0f/s p50 %.0f µs, p99 %.0f µs",
		micros(r.rttP50), micros(r.rttP99), b.cfg.rate, micros(r.pacedRTTP50), micros(r.pacedRTTP99))

	// Storing the replay receipts also loads the scripts and warms every pool.
	if err := b.reset(ctx, true); err != nil {
		return nil, err
	}
	if !b.cfg.mcpOnly {
		if r.bytesRedis, r.bytesPostgres, err = b.storedBytes(ctx); err != nil {
			return nil, err
		}
		logf("bytes per stored key: Redis %.0f, PostgreSQL %.0f", r.bytesRedis, r.bytesPostgres)
	}
	if r.cmdsExecute, r.tripsExecute, err = b.perRequest(ctx, b.execute(mediumBody)); err != nil {
		return nil, err
	}
	if r.cmdsReplay, r.tripsReplay, err = b.perRequest(ctx, b.replayTarget()); err != nil {
		return nil, err
	}
	logf("redis round trips per request: execute %.2f, replay %.2f", r.tripsExecute, r.tripsReplay)
	if !b.cfg.redisOnly {
		if _, r.tripsMCPExecute, err = b.perRequest(ctx, b.mcpTarget("execute", mcpAnswers[0])); err != nil {
			return nil, err
		}
		if _, r.tripsMCPReplay, err = b.perRequest(ctx, b.mcpTarget("replay", mcpAnswers[0])); err != nil {
			return nil, err
		}
		logf("redis round trips per MCP tools/call: execute %.2f, replay %.2f", r.tripsMCPExecute, r.tripsMCPReplay)
	}

	if b.cfg.redisOnly || b.cfg.mcpOnly {
		// Only the closed loops of the bare proxy, execute and replay at 1 KiB; with -mcp, and
		// those of the MCP tools/calls.
		for rep := 1; rep <= b.cfg.reps; rep++ {
			if err := b.reset(ctx, true); err != nil { // before the targets: the replay keys are new
				return nil, err
			}
			runs := []closedRunSpec{{"bare", b.bareTarget(mediumBody)}, {"execute", b.execute(mediumBody)}, {"replay", b.replayTarget()}}
			if b.cfg.redisOnly {
				runs = append(runs, closedRunSpec{"pipelined", b.pipelinedExecute()}, closedRunSpec{"pipelined-replay", b.pipelinedReplay()})
			}
			if b.cfg.mcpOnly {
				runs = append(runs, b.mcpRuns()...)
			}
			for _, run := range runs {
				if err := b.closedRun(ctx, r, rep, run.who, run.t); err != nil {
					return nil, err
				}
			}
		}
		return r, b.admin.FlushAll(ctx).Err()
	}

	logf("allocations: testing.Benchmark of ServeHTTP (about 1 s each)")
	if r.allocBare, err = benchHandler(b.bareHandler, b.bareKeys, mediumBody, ""); err != nil {
		return nil, fmt.Errorf("allocations, bare proxy: %w", err)
	}
	if r.allocExecute, err = benchHandler(b.gwHandler, b.execKeys, mediumBody, "execute"); err != nil {
		return nil, fmt.Errorf("allocations, gateway execute: %w", err)
	}
	if r.allocReplay, err = benchHandler(b.gwHandler, b.replay, mediumBody, "replay"); err != nil {
		return nil, fmt.Errorf("allocations, gateway replay: %w", err)
	}
	logf("allocs/op: bare %d, execute %d, replay %d", r.allocBare.allocs, r.allocExecute.allocs, r.allocReplay.allocs)

	for rep := 1; rep <= b.cfg.reps; rep++ {
		if err := b.repetition(ctx, r, rep); err != nil {
			return nil, err
		}
	}
	return r, b.admin.FlushAll(ctx).Err()
}

// repetition runs every throughput and latency run once, into r.
func (b *bench) repetition(ctx context.Context, r *results, rep int) error {
	if err := b.reset(ctx, true); err != nil {
		return err
	}
	closed := func(who string, t *target) func() error {
		return func() error { return b.closedRun(ctx, r, rep, who, t) }
	}
	open := func(who string, t *target) func() error {
		return func() error { return b.openRun(ctx, r, rep, who, t) }
	}
	steps := []func() error{
		closed("bare", b.bareTarget(mediumBody)),
		closed("execute", b.execute(mediumBody)),
		closed("replay", b.replayTarget()),
		closed("floor", b.floorExecute()),
		closed("floor-replay", b.floorReplayTarget()),
		closed("embedded", b.embeddedExecute()),
		closed("embedded-replay", b.embeddedReplay()),
		closed("postgres", b.postgresExecute()),
		closed("postgres-replay", b.postgresReplay()),
		closed("postgres-floor", b.postgresFloorExecute()),
		closed("postgres-floor-replay", b.postgresFloorReplay()),
	}
	for _, run := range b.mcpRuns() {
		steps = append(steps, closed(run.who, run.t))
	}
	steps = append(steps,
		open("bare", b.bareTarget(mediumBody)),
		open("execute", b.execute(mediumBody)),
		open("replay", b.replayTarget()),
		open("floor", b.floorExecute()),
		open("embedded", b.embeddedExecute()),
		open("embedded-replay", b.embeddedReplay()),
		open("postgres", b.postgresExecute()),
		open("postgres-replay", b.postgresReplay()),
		func() error { return b.reset(ctx, false) },
		closed("bare", b.bareTarget(smallBody)),
		closed("execute", b.execute(smallBody)),
		closed("bare", b.bareTarget(largeBody)),
		closed("execute", b.execute(largeBody)),
	)
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// closedRunSpec is a closed loop to run: who (runName) and its target.
type closedRunSpec struct {
	who string
	t   *target
}

// mcpRuns are the closed loops of MCP tools/calls: for each answer, the bare proxy, execute and
// replay; and the replay whose key is an argument.
func (b *bench) mcpRuns() []closedRunSpec {
	var runs []closedRunSpec
	for _, a := range mcpAnswers {
		for _, who := range []string{"bare", "execute", "replay"} {
			runs = append(runs, closedRunSpec{mcpName(who, a.name), b.mcpTarget(who, a)})
		}
	}
	return append(runs, closedRunSpec{mcpName("replay", mcpArgAnswer.name), b.mcpTarget("replay", mcpArgAnswer)})
}

// closedRun runs one closed loop on t and records its throughput and CPU time per request.
func (b *bench) closedRun(ctx context.Context, r *results, rep int, who string, t *target) error {
	c0, err := b.cpu(ctx)
	if err != nil {
		return err
	}
	run, err := b.load.closedLoop(ctx, t, b.cfg.concurrency, b.cfg.warmup, b.cfg.duration)
	if err != nil {
		return err
	}
	c1, err := b.cpu(ctx)
	if err != nil {
		return err
	}
	name := runName(who, t.size)
	perRequest := func(d time.Duration) float64 { return micros(d) / float64(run.requests) }
	r.throughput[name] = append(r.throughput[name], run.throughput)
	r.cpuProxy[name] = append(r.cpuProxy[name], perRequest(c1.proxy-c0.proxy))
	r.cpuHarness[name] = append(r.cpuHarness[name], perRequest(c1.harness-c0.harness))
	r.cpuRedis[name] = append(r.cpuRedis[name], perRequest(c1.redis-c0.redis))
	r.cpuPostgres[name] = append(r.cpuPostgres[name], perRequest(c1.postgres-c0.postgres))
	r.warn(rep, "closed loop "+name, run)
	logf("rep %d/%d: closed loop, %s, %d B: %.0f req/s", rep, b.cfg.reps, t.name, t.size, run.throughput)
	return nil
}

// openRun runs one open loop on t and records its p50, p90 and p99.
func (b *bench) openRun(ctx context.Context, r *results, rep int, who string, t *target) error {
	run, err := b.load.openLoop(ctx, t, b.cfg.rate, b.cfg.warmup, b.cfg.latencyDuration)
	if err != nil {
		return err
	}
	p50, p99 := micros(percentile(run.latencies, 50)), micros(percentile(run.latencies, 99))
	r.p50[who] = append(r.p50[who], p50)
	r.p90[who] = append(r.p90[who], micros(percentile(run.latencies, 90)))
	r.p99[who] = append(r.p99[who], p99)
	r.warn(rep, "open loop "+who, run)
	r.maxLag = max(r.maxLag, run.dispatchLag)
	logf("rep %d/%d: open loop at %.0f req/s, %s: p50 %.0f µs, p99 %.0f µs (%d samples, dispatch lag p99 %.0f µs)",
		rep, b.cfg.reps, b.cfg.rate, t.name, p50, p99, len(run.latencies), micros(run.dispatchLag))
	return nil
}

// cpuTimes is the CPU time used so far by each process of the benchmark.
type cpuTimes struct {
	proxy    time.Duration // the child: the proxies under test
	harness  time.Duration // this process: the load generator and the upstream
	redis    time.Duration
	postgres time.Duration // the postmaster and its backends (processTreeCPU)
}

func (c cpuTimes) total() time.Duration { return c.proxy + c.harness + c.redis + c.postgres }

// cpu returns the CPU time used so far by the child, this process, Redis and PostgreSQL.
func (b *bench) cpu(ctx context.Context) (cpuTimes, error) {
	st, err := b.child.stats(ctx)
	if err != nil {
		return cpuTimes{}, err
	}
	server, err := redisCPU(ctx, b.admin)
	return cpuTimes{proxy: st.CPU, harness: processCPU(), redis: server, postgres: processTreeCPU(b.pg.Pid())}, err
}

// warn records a run that had failed requests.
func (r *results) warn(rep int, run string, res runResult) {
	if res.failed > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("rep %d, %s: %d failed requests; first: %v", rep, run, res.failed, res.firstErr))
	}
}

// perRequest sends -count requests to t (4 workers) and returns the Redis commands per request
// (INFO commandstats deltas) and the round trips per request of the child's Redis gateway.
func (b *bench) perRequest(ctx context.Context, t *target) (map[string]float64, float64, error) {
	if err := b.load.count(ctx, t, 100, 4); err != nil { // warm: scripts loaded, connections open
		return nil, 0, err
	}
	before, err := commandStats(ctx, b.admin)
	if err != nil {
		return nil, 0, err
	}
	st0, err := b.child.stats(ctx)
	if err != nil {
		return nil, 0, err
	}
	if err := b.load.count(ctx, t, b.cfg.count, 4); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", t.name, err)
	}
	st1, err := b.child.stats(ctx)
	if err != nil {
		return nil, 0, err
	}
	after, err := commandStats(ctx, b.admin)
	if err != nil {
		return nil, 0, err
	}
	return commandDelta(before, after, b.cfg.count), float64(st1.Trips-st0.Trips) / float64(b.cfg.count), nil
}

// machine describes where the benchmark ran.
type machine struct {
	cpu            string
	cores, procs   int
	goVersion, os  string
	kernel, redisV string
}

func (b *bench) machine(ctx context.Context) machine {
	m := machine{cpu: cpuModel(), cores: runtime.NumCPU(), procs: runtime.GOMAXPROCS(0),
		goVersion: runtime.Version(), os: runtime.GOOS + "/" + runtime.GOARCH}
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(k))
	}
	if info, err := b.admin.Info(ctx, "server").Result(); err == nil {
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.redisV = v
			}
		}
	}
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or the architecture elsewhere.
func cpuModel() string {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.Lines(string(info)) {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				return strings.TrimSpace(value)
			}
		}
	}
	return runtime.GOARCH
}
