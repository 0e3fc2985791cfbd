package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the gateway's Prometheus series, namespace idemgateway. Labels take few values:
// tool (the routes file's names), decision, outcome, op, result.
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

	mcpMessages  *prometheus.CounterVec // idemgateway_mcp_messages_total{route,method}
	mcpCancels   *prometheus.CounterVec // idemgateway_mcp_cancels_absorbed_total{route}
	mcpToolLists *prometheus.CounterVec // idemgateway_mcp_tool_list_refreshes_total{route,result}
}

// Outcome labels of idemgateway_upstream_duration_seconds.
const (
	outcomeCommitted    = "committed"
	outcomeNotCommitted = "not_committed"
	outcomeUnknown      = "unknown"
	outcomePassThrough  = "pass_through" // read_only routes and keyless calls: nothing to settle
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "idemgateway", Name: "decisions_total",
			Help: "Decisions on side-effecting routes: execute, replay, conflict, in_progress, outcome_unknown, rejected.",
		}, []string{"tool", "decision"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "idemgateway", Name: "upstream_duration_seconds",
			Help:    "Time from the upstream request to its response headers or failure, by outcome.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"tool", "outcome"}),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "idemgateway", Name: "store_duration_seconds",
			Help:    "Store calls by operation; result is ok, refused (fencing: stale owner) or error.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op", "result"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "idemgateway", Name: "upstream_in_flight",
			Help: "Upstream calls under way.",
		}, []string{"tool"}),
		leaseRenewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "idemgateway", Name: "lease_renewals_total",
			Help: "Lease renewals while upstream calls run; result is ok, lost (another owner holds the key) or error.",
		}, []string{"tool", "result"}),
	}
	m.unknown = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "idemgateway", Name: "outcome_unknown_records_total",
		Help: "Records left outcome_unknown: the upstream may or may not have acted; an operator or reconciliation must settle them.",
	}, []string{"tool"})
	m.keyChurn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "idemgateway", Name: "key_churn_total",
		Help: "Executions of an effect (tenant, tool, fingerprint) that executed under another key within a minute: a client minting a new key per retry (counted per gateway process).",
	}, []string{"tool"})
	m.wakeups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "idemgateway", Name: "wait_wakeups_total",
		Help: "Waiting duplicates (concurrency: wait) woken by a settle of this process (settle), by the store's settle notice (notice), or whose wait ended on the safety poll (poll): polls on a shared Redis mean its notices are not arriving.",
	}, []string{"cause"})
	m.pending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "idemgateway", Name: "receipts_pending",
		Help: "Settle writes the store failed, retried in the background until it takes them or their records expire: commit (a receipt answered with Idempotency-Receipt: pending), release, mark_unknown (release also counts claims whose reply was lost).",
	}, []string{"op"})
	m.mcpMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "idemgateway", Name: "mcp_messages_total",
		Help: "JSON-RPC messages POSTed to kind: mcp routes, by method (the MCP methods of mcpMethodLabels, else other; batch, response, invalid).",
	}, []string{"route", "method"})
	m.mcpCancels = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "idemgateway", Name: "mcp_cancels_absorbed_total",
		Help: "notifications/cancelled of guarded tool calls in flight answered 202 and not forwarded (cancel: finish).",
	}, []string{"route"})
	m.mcpToolLists = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "idemgateway", Name: "mcp_tool_list_refreshes_total",
		Help: "Tool lists of kind: mcp routes read by the gateway's own MCP client (discover_tools) or from tools/list answers passing through (learned); result is ok or error.",
	}, []string{"route", "result"})
	reg.MustRegister(m.mcpMessages, m.mcpCancels, m.mcpToolLists)
	reg.MustRegister(m.decisions, m.upstream, m.store, m.inFlight, m.leaseRenewals, m.unknown, m.keyChurn, m.wakeups, m.pending)
	return m
}

// NewRegistry returns a Prometheus registry with the Go runtime and process collectors, for
// Options.Metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
