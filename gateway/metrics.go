package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the gateway's Prometheus series, namespace idemgateway. Labels take few values:
// tool (the routes file's names), decision, outcome, op, result. A front end registers its own
// (mcpfront: idemgateway_mcp_*).
type metrics struct {
	decisions     *prometheus.CounterVec   // idemgateway_decisions_total{tool,decision}
	upstream      *prometheus.HistogramVec // idemgateway_upstream_duration_seconds{tool,outcome}
	store         *prometheus.HistogramVec // idemgateway_store_duration_seconds{op,result}
	inFlight      *prometheus.GaugeVec     // idemgateway_upstream_in_flight{tool}
	leaseRenewals *prometheus.CounterVec   // idemgateway_lease_renewals_total{tool,result}
	unknown       *prometheus.CounterVec   // idemgateway_outcome_unknown_records_total{tool}
	keyChurn      *prometheus.CounterVec   // idemgateway_key_churn_total{tool}
	wakeups       *prometheus.CounterVec   // idemgateway_wait_wakeups_total{cause}
	pending       *prometheus.GaugeVec     // idemgateway_receipts_pending{op}
	parses        *prometheus.CounterVec   // idemgateway_body_parses_total{result}
	parseBytes    prometheus.Gauge         // idemgateway_body_parse_bytes
	parseBudget   prometheus.Gauge         // idemgateway_body_parse_budget_bytes
	storeSafe     prometheus.GaugeFunc     // idemgateway_store_safe
}

// Outcome labels of idemgateway_upstream_duration_seconds.
const (
	outcomeCommitted    = "committed"
	outcomeNotCommitted = "not_committed"
	outcomeUnknown      = "unknown"
	outcomePassThrough  = "pass_through" // read_only routes and keyless calls: nothing to settle
)

// newMetrics builds the series and registers them on reg; safe is the store's verdict that
// idemgateway_store_safe reads at each scrape.
func newMetrics(reg prometheus.Registerer, safe func() error) *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgateway", Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "idemgateway", Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idemgateway", Name: name, Help: help, Buckets: buckets}, labels)
	}
	m := &metrics{
		decisions: counter("decisions_total",
			"Decisions on side-effecting routes: execute, replay, conflict, in_progress, outcome_unknown, rejected.",
			"tool", "decision"),
		upstream: histogram("upstream_duration_seconds",
			"Time from the upstream request to its response headers or failure, by outcome.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "tool", "outcome"),
		store: histogram("store_duration_seconds",
			"Store calls by operation; result is ok, refused (fencing: stale owner) or error.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}, "op", "result"),
		inFlight: gauge("upstream_in_flight", "Upstream calls under way.", "tool"),
		leaseRenewals: counter("lease_renewals_total",
			"Lease renewals while upstream calls run; result is ok, lost (another owner holds the key) or error.",
			"tool", "result"),
		unknown: counter("outcome_unknown_records_total",
			"Records left outcome_unknown: the upstream may or may not have acted; an operator or reconciliation must settle them.",
			"tool"),
		keyChurn: counter("key_churn_total",
			"Executions of an effect (tenant, tool, fingerprint) that executed under another key within a minute: a client minting a new key per retry (counted per gateway process).",
			"tool"),
		wakeups: counter("wait_wakeups_total",
			"Waiting duplicates (concurrency: wait) woken by a settle of this process (settle), by the store's settle notice (notice, which may come before this process's own settle), or whose wait ended on the safety poll (poll, once per wait): polls on a shared Redis mean its notices are not arriving.",
			"cause"),
		pending: gauge("receipts_pending",
			"Settle writes the store failed, retried in the background until it takes them or their records expire: commit (a receipt answered with Idempotency-Receipt: pending), release, mark_unknown (release also counts claims whose reply was lost).",
			"op"),
		parses: counter("body_parses_total",
			"Body parses by result: small (not gated), admitted, waited, overloaded (answered 503) or too_complex (over IDEMGATEWAY_MAX_BODY_VALUES, answered 413).",
			"result"),
		parseBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idemgateway", Name: "body_parse_bytes",
			Help: "Memory bound (bytes) of the gated body parses under way, against idemgateway_body_parse_budget_bytes."}),
		parseBudget: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "idemgateway", Name: "body_parse_budget_bytes",
			Help: "The budget (bytes) of the gated body parses under way (Options.MaxInflightBytes; the idemgateway command's IDEMGATEWAY_MAX_INFLIGHT_BYTES)."}),
		storeSafe: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "idemgateway", Name: "store_safe",
			Help: "1 while the store is fit to keep records; 0 while its safety check finds it unfit (an evicting Redis policy, scripts refused, unreachable: keyed requests get 503) or refusing writes (out of memory: only replays work). The reason is logged at each change and served by /readyz."},
			func() float64 {
				if safe() != nil {
					return 0
				}
				return 1
			}),
	}
	reg.MustRegister(m.decisions, m.upstream, m.store, m.inFlight, m.leaseRenewals, m.unknown, m.keyChurn, m.wakeups, m.pending,
		m.parses, m.parseBytes, m.parseBudget, m.storeSafe)
	return m
}

// NewRegistry returns a Prometheus registry with the Go runtime and process collectors, for
// Options.Metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
