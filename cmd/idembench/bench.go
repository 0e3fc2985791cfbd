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
)

// bench is the running setup: Redis, the upstream, the bare proxy, the gateway and the floor,
// each on its own loopback listener, and the load generator.
type bench struct {
	cfg   config
	redis *redisServer
	admin *redis.Client // the harness's own Redis client: INFO, FLUSHALL, PING
	trips *roundTrips   // round trips of the gateway's store client

	upstream, bare, gw, floor *server
	bareHandler               http.Handler
	gwHandler                 http.Handler
	closeStore                func()
	floorRedis                *redis.Client // the floor's own client

	load     *loader
	bareKeys *uniqueKeys // keys of the bare proxy's requests (sent so that requests are alike)
	execKeys *uniqueKeys // keys never used before: first executions
	replay   *cycleKeys  // keys of stored receipts; refilled by reset

	floorKeys   *uniqueKeys // first executions on the floor
	floorReplay *cycleKeys  // keys the floor holds; refilled by reset
}

// setup starts Redis, the upstream, the bare proxy, the gateway and the floor. On error, what was
// started is stopped.
func setup(ctx context.Context, cfg config) (*bench, error) {
	b := &bench{cfg: cfg, trips: &roundTrips{}, load: newLoader(cfg.concurrency),
		bareKeys: newKeys("bare"), execKeys: newKeys("exec"), floorKeys: newKeys("floor"), closeStore: func() {}}
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
	if b.upstream, err = serve(newUpstream()); err != nil {
		return err
	}
	upURL, err := url.Parse(b.upstream.url)
	if err != nil {
		return err
	}
	b.bareHandler = newBareProxy(upURL)
	if b.bare, err = serve(b.bareHandler); err != nil {
		return err
	}
	gw, closeStore, err := newGateway(upURL, b.redis.addr, b.trips)
	if err != nil {
		return err
	}
	b.gwHandler, b.closeStore = gw, closeStore
	if b.gw, err = serveGateway(gw); err != nil {
		return err
	}
	b.floorRedis = newRedisClient(b.redis.addr)
	if b.floor, err = serve(newFloor(upURL, b.floorRedis)); err != nil {
		return err
	}
	logf("redis %s, upstream %s, bare proxy %s, gateway %s, floor %s", b.redis.addr, b.upstream.url, b.bare.url, b.gw.url, b.floor.url)
	return nil
}

// close stops everything setup started, the servers first, Redis last.
func (b *bench) close() {
	for _, s := range []*server{b.floor, b.gw, b.bare, b.upstream} {
		if s != nil {
			s.close()
		}
	}
	b.closeStore()
	if b.floorRedis != nil {
		_ = b.floorRedis.Close()
	}
	if b.admin != nil {
		_ = b.admin.Close()
	}
	if b.redis != nil {
		b.redis.stop()
	}
}

func (b *bench) bareTarget(size int) *target {
	return &target{name: "bare proxy", url: b.bare.url + routePath, keys: b.bareKeys, size: size}
}

func (b *bench) execute(size int) *target {
	return &target{name: "gateway execute", url: b.gw.url + routePath, decision: "execute", keys: b.execKeys, size: size}
}

func (b *bench) replayTarget() *target {
	return &target{name: "gateway replay", url: b.gw.url + routePath, decision: "replay", keys: b.replay, size: mediumBody}
}

func (b *bench) floorExecute() *target {
	return &target{name: "floor execute", url: b.floor.url + routePath, decision: "execute", keys: b.floorKeys, size: mediumBody}
}

func (b *bench) floorReplayTarget() *target {
	return &target{name: "floor replay", url: b.floor.url + routePath, decision: "replay", keys: b.floorReplay, size: mediumBody}
}

// reset empties Redis (FLUSHALL, so that memory stays bounded and runs start alike) and, with
// replay, stores the receipts of -replay-keys new keys for the replay runs, through the gateway
// and through the floor.
func (b *bench) reset(ctx context.Context, replay bool) error {
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("flushall: %w", err)
	}
	if !replay {
		return nil
	}
	var err error
	if b.replay, err = b.storeKeys(ctx, b.gw.url); err != nil {
		return err
	}
	b.floorReplay, err = b.storeKeys(ctx, b.floor.url)
	return err
}

// storeKeys executes -replay-keys new keys once each on the server at base, and returns them.
func (b *bench) storeKeys(ctx context.Context, base string) (*cycleKeys, error) {
	fresh := newKeys("replay")
	keys := make([]string, b.cfg.replayKeys)
	for i := range keys {
		keys[i] = fresh.next()
	}
	store := &target{name: "storing the replay receipts", url: base + routePath, decision: "execute",
		keys: &cycleKeys{keys: keys}, size: mediumBody}
	return &cycleKeys{keys: keys}, b.load.count(ctx, store, len(keys), 8)
}

// results is everything measured, per repetition where repeated.
type results struct {
	machine machine
	elapsed time.Duration

	rttP50, rttP99           time.Duration // PING through go-redis, back to back
	pacedRTTP50, pacedRTTP99 time.Duration // PING through go-redis, one every 1/rate seconds

	cmdsExecute, cmdsReplay   map[string]float64 // Redis commands per request, INFO commandstats
	tripsExecute, tripsReplay float64            // round trips per request, client-side count

	allocBare, allocExecute, allocReplay allocResult

	// Per repetition, by run name (see runName): closed-loop req/s, and the CPU time per request
	// of the closed loop in µs, of this process (load generator, upstream and proxy) and of Redis.
	throughput        map[string][]float64
	cpuSelf, cpuRedis map[string][]float64
	// Per repetition, by who ("bare", "execute", "replay", "floor"): open-loop p50 and p99 in µs.
	p50, p99 map[string][]float64
	maxLag   time.Duration // the largest open-loop dispatch lag p99 of all runs

	warnings []string // runs with failed requests

	// othersCPU is the CPU time that other processes of the machine used during the measurements
	// (wall long): load the harness did not make, which skews its figures. Zero outside Linux.
	othersCPU, wall time.Duration
}

// runName names a run: who ("bare", "execute", "replay", "floor", "floor-replay") and the body
// size.
func runName(who string, size int) string { return fmt.Sprintf("%s/%d", who, size) }

// measure runs every measurement: the Redis RTT, commands per request, allocations, then -reps
// repetitions of the throughput and latency runs.
func (b *bench) measure(ctx context.Context) (out *results, err error) {
	// What the machine, this process and Redis used from here to the end: the rest is others' load.
	machineStart, machineOK := machineBusy()
	selfStart, redisStart, err := b.cpu(ctx)
	if err != nil {
		return nil, err
	}
	wallStart := time.Now()
	defer func() {
		machineEnd, ok := machineBusy()
		selfEnd, redisEnd, cpuErr := b.cpu(ctx)
		if out == nil || !ok || !machineOK || cpuErr != nil {
			return
		}
		out.othersCPU = (machineEnd - machineStart) - (selfEnd - selfStart) - (redisEnd - redisStart)
		out.wall = time.Since(wallStart)
	}()
	r := &results{throughput: map[string][]float64{}, cpuSelf: map[string][]float64{}, cpuRedis: map[string][]float64{},
		p50: map[string][]float64{}, p99: map[string][]float64{}}
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
	if r.cmdsExecute, r.tripsExecute, err = b.perRequest(ctx, b.execute(mediumBody)); err != nil {
		return nil, err
	}
	if r.cmdsReplay, r.tripsReplay, err = b.perRequest(ctx, b.replayTarget()); err != nil {
		return nil, err
	}
	logf("redis round trips per request: execute %.2f, replay %.2f", r.tripsExecute, r.tripsReplay)

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
		open("bare", b.bareTarget(mediumBody)),
		open("execute", b.execute(mediumBody)),
		open("replay", b.replayTarget()),
		open("floor", b.floorExecute()),
		func() error { return b.reset(ctx, false) },
		closed("bare", b.bareTarget(smallBody)),
		closed("execute", b.execute(smallBody)),
		closed("bare", b.bareTarget(largeBody)),
		closed("execute", b.execute(largeBody)),
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// closedRun runs one closed loop on t and records its throughput and CPU time per request.
func (b *bench) closedRun(ctx context.Context, r *results, rep int, who string, t *target) error {
	self0, redis0, err := b.cpu(ctx)
	if err != nil {
		return err
	}
	run, err := b.load.closedLoop(ctx, t, b.cfg.concurrency, b.cfg.warmup, b.cfg.duration)
	if err != nil {
		return err
	}
	self1, redis1, err := b.cpu(ctx)
	if err != nil {
		return err
	}
	name := runName(who, t.size)
	r.throughput[name] = append(r.throughput[name], run.throughput)
	r.cpuSelf[name] = append(r.cpuSelf[name], micros(self1-self0)/float64(run.requests))
	r.cpuRedis[name] = append(r.cpuRedis[name], micros(redis1-redis0)/float64(run.requests))
	r.warn(rep, "closed loop "+name, run)
	logf("rep %d/%d: closed loop, %s, %d B: %.0f req/s", rep, b.cfg.reps, t.name, t.size, run.throughput)
	return nil
}

// openRun runs one open loop on t and records its p50 and p99.
func (b *bench) openRun(ctx context.Context, r *results, rep int, who string, t *target) error {
	run, err := b.load.openLoop(ctx, t, b.cfg.rate, b.cfg.warmup, b.cfg.latencyDuration)
	if err != nil {
		return err
	}
	p50, p99 := micros(percentile(run.latencies, 50)), micros(percentile(run.latencies, 99))
	r.p50[who] = append(r.p50[who], p50)
	r.p99[who] = append(r.p99[who], p99)
	r.warn(rep, "open loop "+who, run)
	r.maxLag = max(r.maxLag, run.dispatchLag)
	logf("rep %d/%d: open loop at %.0f req/s, %s: p50 %.0f µs, p99 %.0f µs (%d samples, dispatch lag p99 %.0f µs)",
		rep, b.cfg.reps, b.cfg.rate, t.name, p50, p99, len(run.latencies), micros(run.dispatchLag))
	return nil
}

// cpu returns the CPU time used so far by this process and by Redis.
func (b *bench) cpu(ctx context.Context) (self, server time.Duration, err error) {
	server, err = redisCPU(ctx, b.admin)
	return processCPU(), server, err
}

// warn records a run that had failed requests.
func (r *results) warn(rep int, run string, res runResult) {
	if res.failed > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("rep %d, %s: %d failed requests; first: %v", rep, run, res.failed, res.firstErr))
	}
}

// perRequest sends -count requests to t (4 workers) and returns the Redis commands per request
// (INFO commandstats deltas) and the store client's round trips per request.
func (b *bench) perRequest(ctx context.Context, t *target) (map[string]float64, float64, error) {
	if err := b.load.count(ctx, t, 100, 4); err != nil { // warm: scripts loaded, connections open
		return nil, 0, err
	}
	before, err := commandStats(ctx, b.admin)
	if err != nil {
		return nil, 0, err
	}
	trips0 := b.trips.n.Load()
	if err := b.load.count(ctx, t, b.cfg.count, 4); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", t.name, err)
	}
	trips1 := b.trips.n.Load()
	after, err := commandStats(ctx, b.admin)
	if err != nil {
		return nil, 0, err
	}
	return commandDelta(before, after, b.cfg.count), float64(trips1-trips0) / float64(b.cfg.count), nil
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
