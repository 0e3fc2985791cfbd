package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// budget is one bound of the performance budget (docs/performance.md).
type budget struct {
	op    string // ">=", "<=" or "=="
	limit float64
}

func atLeast(x float64) budget { return budget{">=", x} }
func atMost(x float64) budget  { return budget{"<=", x} }
func exactly(x float64) budget { return budget{"==", x} }

// verdict says whether v meets the budget: "met" or "not met". Exactly is met within 0.005 (the
// table's rounding); NaN never meets a budget.
func (b budget) verdict(v float64) string {
	var ok bool
	switch b.op {
	case ">=":
		ok = v >= b.limit
	case "<=":
		ok = v <= b.limit
	case "==":
		ok = math.Abs(v-b.limit) < 0.005
	}
	if ok {
		return "met"
	}
	return "not met"
}

func (b budget) String() string {
	sym := map[string]string{">=": "≥", "<=": "≤", "==": "="}[b.op]
	return fmt.Sprintf("%s %g", sym, b.limit)
}

// table is a Markdown table of rows: measure, median, repetitions, budget, verdict.
type table struct {
	rows [][5]string
}

// add adds a measured row: its median, the repetitions (when more than one), and, when b is not
// nil, the budget and verdict.
func (t *table) add(name, format string, reps []float64, b *budget) {
	m := median(reps)
	row := [5]string{name, fmt.Sprintf(format, m), "", "", ""}
	if len(reps) > 1 {
		vals := make([]string, len(reps))
		for i, v := range reps {
			vals[i] = fmt.Sprintf(format, v)
		}
		row[2] = strings.Join(vals, ", ")
	}
	if b != nil {
		row[3], row[4] = b.String(), "**"+b.verdict(m)+"**"
	}
	t.rows = append(t.rows, row)
}

func (t *table) write(w io.Writer) {
	fmt.Fprintln(w, "| Measure | Median | Repetitions | Budget | Verdict |")
	fmt.Fprintln(w, "|---|--:|--:|---|---|")
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3], r[4])
	}
}

func ptr(b budget) *budget { return &b }

// writeReport prints the results as Markdown.
func writeReport(w io.Writer, cfg config, r *results) {
	m := r.machine
	fmt.Fprintf(w, "### idembench: gateway vs bare reverse proxy\n\n")
	fmt.Fprintf(w, "Machine: %s, %d cores (GOMAXPROCS %d), %s, %s", m.cpu, m.cores, m.procs, m.os, m.goVersion)
	if m.kernel != "" {
		fmt.Fprintf(w, ", Linux %s", m.kernel)
	}
	fmt.Fprintf(w, ", Redis %s. Everything (load generator, upstream, proxies, Redis) on this machine, over loopback; "+
		"the proxies under test in a process of their own, the embedded store's file in %s (%s).\n\n", m.redisV, r.dataDir, cmp.Or(fsType(r.dataDir), "filesystem unknown"))
	openLoop := fmt.Sprintf("open loop %.0f req/s for %s", cfg.rate, cfg.latencyDuration)
	switch {
	case cfg.redisOnly:
		openLoop = "-redis-only: the bare proxy, execute and replay closed loops alone"
	case cfg.mcpOnly:
		openLoop = "-mcp: the bare proxy, execute and replay closed loops alone, over HTTP and as MCP tools/calls"
	}
	fmt.Fprintf(w, "Settings: closed loop %d workers, %s measured after %s warm-up; %s; "+
		"%d repetitions, medians (ratios per repetition, then the median); 1 KiB request and response bodies unless noted; "+
		"run took %s.\n\n",
		cfg.concurrency, cfg.duration, cfg.warmup, openLoop, cfg.reps, r.elapsed.Round(time.Second))

	if r.wall > 0 {
		share := 100 * r.othersCPU.Seconds() / (r.wall.Seconds() * float64(m.cores))
		fmt.Fprintf(w, "Other processes used %.0f%% of the machine's CPU during the measurements (/proc/stat, less the harness, its proxies' process and Redis)", max(share, 0))
		if share > 5 {
			fmt.Fprint(w, ": **the machine was not quiet; throughputs and latencies are low and noisy**")
		}
		fmt.Fprint(w, ".\n\n")
	}

	th := func(who string, size int) []float64 { return r.throughput[runName(who, size)] }
	if cfg.redisOnly || cfg.mcpOnly {
		var t table
		t.add("Bare proxy throughput (req/s)", "%.0f", th("bare", mediumBody), nil)
		t.add("Gateway execute throughput (req/s)", "%.0f", th("execute", mediumBody), nil)
		t.add("Gateway replay throughput (req/s)", "%.0f", th("replay", mediumBody), nil)
		t.add("**R1** = execute ÷ bare", "%.2f", ratios(th("execute", mediumBody), th("bare", mediumBody)), ptr(atLeast(0.80)))
		t.add("**R2** = replay ÷ bare", "%.2f", ratios(th("replay", mediumBody), th("bare", mediumBody)), ptr(atLeast(1.3)))
		t.add("Redis round trips per execute (request path)", "%.2f", []float64{r.tripsExecute}, ptr(atMost(2)))
		t.add("Redis round trips per replay", "%.2f", []float64{r.tripsReplay}, ptr(exactly(1)))
		if cfg.redisOnly {
			redisWork(&t, r)
		} else {
			mcpRows(&t, r)
		}
		t.write(w)
		if cfg.mcpOnly {
			writeMCPNote(w)
		}
		writeCPU(w, m, r)
		writeCommands(w, cfg, r)
		writeWarnings(w, r)
		return
	}
	r1 := ratios(th("execute", mediumBody), th("bare", mediumBody))
	r2 := ratios(th("replay", mediumBody), th("bare", mediumBody))
	r1Small := ratios(th("execute", smallBody), th("bare", smallBody))
	r1Large := ratios(th("execute", largeBody), th("bare", largeBody))
	// R3 is counted in round trips of a PING paced like the open loop (see measureRTT); the
	// back-to-back round trip is shown beside it.
	rtt, hotRTT := micros(r.pacedRTTP50), micros(r.rttP50)
	diff := func(a, b []float64, unit float64) []float64 {
		out := make([]float64, min(len(a), len(b)))
		for i := range out {
			out[i] = (a[i] - b[i]) / unit
		}
		return out
	}
	r3 := diff(r.p99["execute"], r.p99["bare"], 1)

	var t table
	t.add("Bare proxy throughput (req/s)", "%.0f", th("bare", mediumBody), nil)
	t.add("Gateway execute throughput (req/s)", "%.0f", th("execute", mediumBody), nil)
	t.add("Gateway replay throughput (req/s)", "%.0f", th("replay", mediumBody), nil)
	t.add("**R1** = execute ÷ bare", "%.2f", r1, ptr(atLeast(0.80)))
	t.add("**R2** = replay ÷ bare", "%.2f", r2, ptr(atLeast(1.3)))
	t.add("Floor execute throughput (req/s): bare proxy + claim and commit round trips only", "%.0f", th("floor", mediumBody), nil)
	t.add("Floor replay throughput (req/s): one round trip, answer from Redis", "%.0f", th("floor-replay", mediumBody), nil)
	t.add("R1 of the floor (reference: the best R1 on this machine)", "%.2f", ratios(th("floor", mediumBody), th("bare", mediumBody)), nil)
	t.add("R2 of the floor (reference: the best R2 on this machine)", "%.2f", ratios(th("floor-replay", mediumBody), th("bare", mediumBody)), nil)
	t.add("Embedded store: gateway execute throughput (req/s)", "%.0f", th("embedded", mediumBody), nil)
	t.add("Embedded store: gateway replay throughput (req/s)", "%.0f", th("embedded-replay", mediumBody), nil)
	t.add("**R1 on the embedded store** = execute ÷ bare", "%.2f", ratios(th("embedded", mediumBody), th("bare", mediumBody)), ptr(atLeast(0.4)))
	t.add("R2 on the embedded store = replay ÷ bare", "%.2f", ratios(th("embedded-replay", mediumBody), th("bare", mediumBody)), nil)
	t.add("PostgreSQL store: gateway execute throughput (req/s)", "%.0f", th("postgres", mediumBody), nil)
	t.add("PostgreSQL store: gateway replay throughput (req/s)", "%.0f", th("postgres-replay", mediumBody), nil)
	t.add("**R1 on the PostgreSQL store** = execute ÷ bare", "%.2f", ratios(th("postgres", mediumBody), th("bare", mediumBody)), ptr(atLeast(0.25)))
	t.add("**R2 on the PostgreSQL store** = replay ÷ bare", "%.2f", ratios(th("postgres-replay", mediumBody), th("bare", mediumBody)), ptr(atLeast(0.8)))
	t.add("PostgreSQL floor execute throughput (req/s): bare proxy + the store's three statements only", "%.0f", th("postgres-floor", mediumBody), nil)
	t.add("PostgreSQL floor replay throughput (req/s): one SELECT, answer from PostgreSQL", "%.0f", th("postgres-floor-replay", mediumBody), nil)
	t.add("R1 of the PostgreSQL floor (reference: the best R1 on PostgreSQL with these statements)", "%.2f", ratios(th("postgres-floor", mediumBody), th("bare", mediumBody)), nil)
	t.add("R2 of the PostgreSQL floor (reference)", "%.2f", ratios(th("postgres-floor-replay", mediumBody), th("bare", mediumBody)), nil)
	for _, who := range []string{"bare", "execute", "replay", "floor", "embedded"} {
		label := map[string]string{"bare": "Bare proxy", "execute": "Gateway execute", "replay": "Gateway replay", "floor": "Floor execute",
			"embedded": "Embedded-store execute"}[who]
		t.add(fmt.Sprintf("%s p50 / p99 at %.0f req/s (µs)", label, cfg.rate), "%.0f", r.p50[who], nil)
		t.rows[len(t.rows)-1][1] += fmt.Sprintf(" / %.0f", median(r.p99[who]))
		t.rows[len(t.rows)-1][2] = pairs(r.p50[who], r.p99[who])
	}
	t.add("**R3** = execute p99 − bare p99 (µs)", "%.0f", r3, nil)
	t.add(fmt.Sprintf("**R3** in Redis round trips: PING at %.0f/s, p50 %.0f µs (p99 %.0f µs)", cfg.rate, rtt, micros(r.pacedRTTP99)),
		"%.1f", diff(r.p99["execute"], r.p99["bare"], rtt), ptr(atMost(3)))
	t.add(fmt.Sprintf("R3 in back-to-back PING round trips, p50 %.0f µs (p99 %.0f µs)", hotRTT, micros(r.rttP99)),
		"%.1f", diff(r.p99["execute"], r.p99["bare"], hotRTT), nil)
	t.add("R3 of the floor, in paced round trips (reference)", "%.1f", diff(r.p99["floor"], r.p99["bare"], rtt), nil)
	t.add("p50 difference: execute − bare, in paced round trips", "%.1f", diff(r.p50["execute"], r.p50["bare"], rtt), nil)
	t.add("p50 difference: floor − bare, in paced round trips (reference)", "%.1f", diff(r.p50["floor"], r.p50["bare"], rtt), nil)
	t.add("Redis round trips per execute (request path)", "%.2f", []float64{r.tripsExecute}, ptr(atMost(2)))
	t.add("Redis round trips per replay", "%.2f", []float64{r.tripsReplay}, ptr(exactly(1)))
	t.add(fmt.Sprintf("Allocations per request: bare proxy (%d B)", r.allocBare.bytes), "%.0f", []float64{float64(r.allocBare.allocs)}, nil)
	t.add(fmt.Sprintf("Allocations per request: gateway execute (%d B)", r.allocExecute.bytes), "%.0f", []float64{float64(r.allocExecute.allocs)}, nil)
	t.add(fmt.Sprintf("Allocations per request: gateway replay (%d B)", r.allocReplay.bytes), "%.0f", []float64{float64(r.allocReplay.allocs)}, nil)
	t.add("**Extra allocations** per execute (gateway − bare)", "%.0f", []float64{float64(r.allocExecute.allocs - r.allocBare.allocs)}, ptr(atMost(40)))
	t.add("**Extra allocations** per replay (gateway − bare)", "%.0f", []float64{float64(r.allocReplay.allocs - r.allocBare.allocs)}, ptr(atMost(40)))
	t.add("Bare proxy throughput, 256 B (req/s)", "%.0f", th("bare", smallBody), nil)
	t.add("Gateway execute throughput, 256 B (req/s)", "%.0f", th("execute", smallBody), nil)
	t.add("Bare proxy throughput, 64 KiB (req/s)", "%.0f", th("bare", largeBody), nil)
	t.add("Gateway execute throughput, 64 KiB (req/s)", "%.0f", th("execute", largeBody), nil)
	t.add("R1, 256 B", "%.2f", r1Small, nil)
	t.add("R1, 64 KiB", "%.2f", r1Large, nil)
	t.add("**R1 64 KiB ÷ R1 256 B**", "%.2f", ratios(r1Large, r1Small), ptr(atLeast(0.75)))
	mcpRows(&t, r)
	t.write(w)
	writeMCPNote(w)

	writeStores(w, cfg, r)
	writeCPU(w, m, r)
	writeCommands(w, cfg, r)
	fmt.Fprintf(w, "\nOpen-loop latencies run from each request's send; the sends were at most %.0f µs (p99, worst run) behind schedule.\n",
		micros(r.maxLag))
	fmt.Fprintf(w, "\nAllocation benchmarks (testing.Benchmark of ServeHTTP into httptest.NewRecorder, real upstream and Redis; "+
		"ns/op is one request at a time): bare %d ns/op, execute %d ns/op, replay %d ns/op.\n",
		r.allocBare.nsPerOp, r.allocExecute.nsPerOp, r.allocReplay.nsPerOp)
	writeWarnings(w, r)
}

// redisWork adds the rows of the Redis store's budget
// (docs/performance.md#redis-work-per-execution): the Redis commands inside the scripts per first
// execution, Redis's CPU per first execution against a replay's, and the gateway process's CPU per
// first execution against the bare proxy's per request, each within one repetition.
func redisWork(t *table, r *results) {
	var inside, all float64
	for name, n := range r.cmdsExecute {
		all += n
		if name != "evalsha" && name != "eval" {
			inside += n
		}
	}
	t.add("Redis commands per execute, EVALSHA included", "%.2f", []float64{all}, nil)
	// 7: the route blocks unknown outcomes, so its claim keeps the record for unknown_ttl and the
	// commit sets the receipt's ttl (a PEXPIRE); 6 where the commit keeps the claim's expiry.
	t.add("**Redis commands inside the scripts** per execute", "%.2f", []float64{inside}, ptr(atMost(7)))
	t.add("Bare proxy process CPU per request (µs)", "%.0f", at1KiB(r.cpuProxy, "bare"), nil)
	cpuRows(t, r, "", "execute", "replay")
	// The same gateway with IDEMGATEWAY_REDIS_AUTO_PIPELINE, in the same repetitions.
	t.add("Auto-pipelined: execute ÷ bare throughput", "%.2f", ratios(at1KiB(r.throughput, "pipelined"), at1KiB(r.throughput, "bare")), nil)
	cpuRows(t, r, "Auto-pipelined: ", "pipelined", "pipelined-replay")
	t.add("Auto-pipelined: Redis CPU per execute ÷ the plain store's", "%.2f", ratios(at1KiB(r.cpuRedis, "pipelined"), at1KiB(r.cpuRedis, "execute")), nil)
}

// cpuRows adds, for the gateway whose runs are execute and replay, its Redis CPU per execute and
// per replay and their ratio, and its process CPU per execute and its ratio to the bare proxy's,
// with the Redis store's budgets; labels start with prefix.
func cpuRows(t *table, r *results, prefix, execute, replay string) {
	t.add(prefix+"Redis CPU per execute (µs)", "%.1f", at1KiB(r.cpuRedis, execute), nil)
	t.add(prefix+"Redis CPU per replay (µs)", "%.1f", at1KiB(r.cpuRedis, replay), nil)
	t.add(prefix+"**Redis CPU per execute ÷ per replay**", "%.2f", ratios(at1KiB(r.cpuRedis, execute), at1KiB(r.cpuRedis, replay)), ptr(atMost(1.6)))
	t.add(prefix+"Gateway process CPU per execute (µs)", "%.0f", at1KiB(r.cpuProxy, execute), nil)
	t.add(prefix+"**Gateway CPU per execute ÷ bare proxy's**", "%.2f", ratios(at1KiB(r.cpuProxy, execute), at1KiB(r.cpuProxy, "bare")), ptr(atMost(1.35)))
}

// at1KiB returns m's values of who's run at 1 KiB (runName).
func at1KiB(m map[string][]float64, who string) []float64 { return m[runName(who, mediumBody)] }

// mcpRows adds the rows of MCP tool calls (docs/performance.md#mcp-tool-calls): for each form of
// answer, the throughputs of the bare proxy, execute and replay of a tools/call, their ratios to
// the bare proxy's, and the budget that a replay of a tools/call costs no more than an HTTP replay,
// in throughput and in the gateway process's CPU per request, each ratio within one repetition;
// then a replay whose key is an argument against one whose key is in params._meta (no budget:
// two closed loops run one after the other differ by more than the two replays do; the budget is
// gateway BenchmarkReplay's interleaved pair mcp-arg÷mcp), and the Redis round trips per
// tools/call.
func mcpRows(t *table, r *results) {
	for _, a := range mcpAnswers {
		label := map[string]string{"json": "JSON answers", "sse": "SSE answers"}[a.name]
		bare, execute, replay := mcpName("bare", a.name), mcpName("execute", a.name), mcpName("replay", a.name)
		t.add("MCP tools/call, "+label+": bare proxy throughput (req/s)", "%.0f", at1KiB(r.throughput, bare), nil)
		t.add("MCP tools/call, "+label+": gateway execute throughput (req/s)", "%.0f", at1KiB(r.throughput, execute), nil)
		t.add("MCP tools/call, "+label+": gateway replay throughput (req/s)", "%.0f", at1KiB(r.throughput, replay), nil)
		t.add("MCP R1, "+label+" = execute ÷ bare proxy's tools/call", "%.2f", ratios(at1KiB(r.throughput, execute), at1KiB(r.throughput, bare)), nil)
		t.add("MCP R2, "+label+" = replay ÷ bare proxy's tools/call", "%.2f", ratios(at1KiB(r.throughput, replay), at1KiB(r.throughput, bare)), nil)
		t.add("**MCP replay ÷ HTTP replay**, "+label+": throughput", "%.2f",
			ratios(at1KiB(r.throughput, replay), at1KiB(r.throughput, "replay")), ptr(atLeast(1)))
		t.add("**MCP replay ÷ HTTP replay**, "+label+": gateway process CPU per request", "%.2f",
			ratios(at1KiB(r.cpuProxy, replay), at1KiB(r.cpuProxy, "replay")), ptr(atMost(1)))
	}
	argReplay, metaReplay := mcpName("replay", mcpArgAnswer.name), mcpName("replay", "json")
	t.add("MCP replay, key argument ÷ key in _meta, JSON answers: throughput", "%.2f",
		ratios(at1KiB(r.throughput, argReplay), at1KiB(r.throughput, metaReplay)), nil)
	t.add("MCP replay, key argument ÷ key in _meta, JSON answers: gateway process CPU per request", "%.2f",
		ratios(at1KiB(r.cpuProxy, argReplay), at1KiB(r.cpuProxy, metaReplay)), nil)
	t.add("Redis round trips per MCP execute (JSON answers)", "%.2f", []float64{r.tripsMCPExecute}, ptr(atMost(2)))
	t.add("Redis round trips per MCP replay (JSON answers)", "%.2f", []float64{r.tripsMCPReplay}, ptr(exactly(1)))
}

// writeMCPNote says what the MCP rows measured.
func writeMCPNote(w io.Writer) {
	fmt.Fprintf(w, "\nMCP rows: a tools/call of %d B (key in params._meta, a new JSON-RPC id per request, Mcp-Protocol-Version %s) "+
		"to a stateless go-sdk MCP server in the harness's process, whose result is about as large; the bare proxy's "+
		"tools/calls reach the same server. Clients accept both answers, as go-sdk's does, so a replay is application/json "+
		"whichever form the execution's answer had.\n", mediumBody, mcpVersion)
}

// writeCommands prints the Redis commands per request, execute and replay.
func writeCommands(w io.Writer, cfg config, r *results) {
	fmt.Fprintf(w, "\nRedis commands per request (INFO commandstats deltas over %d requests; the commands a script runs are counted too, "+
		"so only EVALSHA and EVAL are round trips):\n\n", cfg.count)
	fmt.Fprintln(w, "| Command | per execute | per replay |")
	fmt.Fprintln(w, "|---|--:|--:|")
	for _, name := range sortedNames(r.cmdsExecute, r.cmdsReplay) {
		fmt.Fprintf(w, "| %s | %.2f | %.2f |\n", strings.ToUpper(name), r.cmdsExecute[name], r.cmdsReplay[name])
	}
}

// writeWarnings lists the runs that had failed requests.
func writeWarnings(w io.Writer, r *results) {
	if len(r.warnings) > 0 {
		fmt.Fprintln(w, "\n**Failed requests** (the runs below are suspect):")
		for _, s := range r.warnings {
			fmt.Fprintln(w, "- "+s)
		}
	}
}

// pairs formats per-repetition p50 / p99 pairs.
func pairs(p50, p99 []float64) string {
	out := make([]string, min(len(p50), len(p99)))
	for i := range out {
		out[i] = fmt.Sprintf("%.0f / %.0f", p50[i], p99[i])
	}
	return strings.Join(out, ", ")
}

// writeCPU prints the CPU time per request of each closed-loop run, of the proxy's process and of
// Redis, with their ratios to the bare proxy's of the same repetition and body size.
func writeCPU(w io.Writer, m machine, r *results) {
	fmt.Fprintf(w, "\nCPU time per request in the closed-loop runs, µs (medians; ratios per repetition against the bare proxy's "+
		"process in the same repetition, at the same body size (an MCP run: the bare proxy's tools/calls with the same form of "+
		"answer); the proxy's process holds the embedded store when it is the one under test; the harness's, the MCP server; "+
		"%d cores give %.0f µs of CPU per second):\n\n", m.cores, float64(m.cores)*1e6)
	fmt.Fprintln(w, "| Run | proxy process | ÷ bare | Redis | proxy + Redis | ÷ bare | harness: load generator and upstream |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|")
	type cpuRun struct {
		label, who string
		size       int
		base       string // who of the run it is divided by: "bare" unless set
	}
	runs := []cpuRun{
		{"bare proxy, 1 KiB", "bare", mediumBody, ""}, {"gateway execute, 1 KiB", "execute", mediumBody, ""},
		{"gateway replay, 1 KiB", "replay", mediumBody, ""},
		{"auto-pipelined gateway: execute, 1 KiB", "pipelined", mediumBody, ""}, {"auto-pipelined gateway: replay, 1 KiB", "pipelined-replay", mediumBody, ""},
		{"embedded store: execute, 1 KiB", "embedded", mediumBody, ""}, {"embedded store: replay, 1 KiB", "embedded-replay", mediumBody, ""},
		{"postgres store: execute, 1 KiB", "postgres", mediumBody, ""}, {"postgres store: replay, 1 KiB", "postgres-replay", mediumBody, ""},
		{"floor execute, 1 KiB", "floor", mediumBody, ""}, {"floor replay, 1 KiB", "floor-replay", mediumBody, ""},
		{"PostgreSQL floor execute, 1 KiB", "postgres-floor", mediumBody, ""}, {"PostgreSQL floor replay, 1 KiB", "postgres-floor-replay", mediumBody, ""},
		{"bare proxy, 256 B", "bare", smallBody, ""}, {"gateway execute, 256 B", "execute", smallBody, ""},
		{"bare proxy, 64 KiB", "bare", largeBody, ""}, {"gateway execute, 64 KiB", "execute", largeBody, ""},
	}
	// MCP tools/calls, divided by the bare proxy's tools/calls with the same form of answer.
	for _, a := range mcpAnswers {
		for _, who := range []string{"bare", "execute", "replay"} {
			label := map[string]string{"bare": "bare proxy", "execute": "gateway execute", "replay": "gateway replay"}[who]
			runs = append(runs, cpuRun{fmt.Sprintf("MCP tools/call, %s answers: %s", strings.ToUpper(a.name), label),
				mcpName(who, a.name), mediumBody, mcpName("bare", a.name)})
		}
	}
	for _, run := range runs {
		name, bare := runName(run.who, run.size), runName(cmp.Or(run.base, "bare"), run.size)
		proxy, server := r.cpuProxy[name], r.cpuRedis[name]
		if len(proxy) == 0 {
			continue // not run (-redis-only, -mcp)
		}
		both := make([]float64, min(len(proxy), len(server)))
		for i := range both {
			both[i] = proxy[i] + server[i]
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f |\n", run.label, median(proxy), median(ratios(proxy, r.cpuProxy[bare])),
			median(server), median(both), median(ratios(both, r.cpuProxy[bare])), median(r.cpuHarness[name]))
	}
}

// writeStores prints what a call costs on each store (docs/performance.md#per-store), 1 KiB
// request and answer: throughput against the bare proxy's, the gateway process's CPU per call
// against the bare proxy's, the store's own CPU per call where it runs apart (Redis; PostgreSQL's
// postmaster and backends), the bytes the store keeps per key, the allocations per call (measured
// in-process on the Redis store only), and the service time at -rate beside the bare proxy's;
// medians of the repetitions, each ratio within one repetition.
func writeStores(w io.Writer, cfg config, r *results) {
	fmt.Fprintf(w, "\nPer store, 1 KiB request and answer (medians; ratios within each repetition; allocations measured on the Redis store; "+
		"the embedded store's CPU is the gateway's own):\n\n")
	fmt.Fprintf(w, "| Store, call | throughput ÷ bare | gateway CPU (µs) | ÷ bare | store CPU (µs) | bytes per key | allocations | p50 / p90 / p99 at %.0f req/s (µs) |\n", cfg.rate)
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	bare := at1KiB(r.cpuProxy, "bare")
	fmt.Fprintf(w, "| bare proxy | 1.00 | %.0f | 1.00 | – | – | %d | %s |\n", median(bare), r.allocBare.allocs, latency(r, "bare"))
	type row struct {
		label, who string
		storeCPU   map[string][]float64 // nil: none apart
		bytes      float64
		allocs     int64
	}
	for _, c := range []row{
		{"Redis, execute", "execute", r.cpuRedis, r.bytesRedis, r.allocExecute.allocs},
		{"Redis, replay", "replay", r.cpuRedis, 0, r.allocReplay.allocs},
		{"embedded, execute", "embedded", nil, 0, 0},
		{"embedded, replay", "embedded-replay", nil, 0, 0},
		{"PostgreSQL, execute", "postgres", r.cpuPostgres, r.bytesPostgres, 0},
		{"PostgreSQL, replay", "postgres-replay", r.cpuPostgres, 0, 0},
		{"PostgreSQL floor, execute (reference)", "postgres-floor", r.cpuPostgres, 0, 0},
		{"PostgreSQL floor, replay (reference)", "postgres-floor-replay", r.cpuPostgres, 0, 0},
	} {
		storeCPU, bytes, allocs := "–", "", ""
		if c.storeCPU != nil {
			storeCPU = fmt.Sprintf("%.0f", median(at1KiB(c.storeCPU, c.who)))
		}
		if c.bytes > 0 {
			bytes = fmt.Sprintf("%.0f", c.bytes)
		}
		if c.allocs > 0 {
			allocs = fmt.Sprintf("%d", c.allocs)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.0f | %.2f | %s | %s | %s | %s |\n", c.label,
			median(ratios(at1KiB(r.throughput, c.who), at1KiB(r.throughput, "bare"))), median(at1KiB(r.cpuProxy, c.who)),
			median(ratios(at1KiB(r.cpuProxy, c.who), bare)), storeCPU, bytes, allocs, latency(r, c.who))
	}
}

// latency formats who's open-loop p50 / p90 / p99, medians of the repetitions; "" when not run.
func latency(r *results, who string) string {
	if len(r.p50[who]) == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f", median(r.p50[who]), median(r.p90[who]), median(r.p99[who]))
}
