package mcpfront

import "github.com/prometheus/client_golang/prometheus"

// metrics are the front end's Prometheus series, namespace idemgateway, besides the pipeline's
// (decisions, upstream durations), which count its guarded calls under their tools' names.
type metrics struct {
	messages  *prometheus.CounterVec // idemgateway_mcp_messages_total{route,method}
	cancels   *prometheus.CounterVec // idemgateway_mcp_cancels_absorbed_total{route}
	toolLists *prometheus.CounterVec // idemgateway_mcp_tool_list_refreshes_total{route,result}
}

// newMetrics builds the series and registers them on reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idemgateway", Name: name, Help: help}, labels)
	}
	m := &metrics{
		messages: counter("mcp_messages_total",
			"JSON-RPC messages POSTed to kind: mcp routes, by method (the MCP methods of methodLabels, else other; batch, response, invalid).",
			"route", "method"),
		cancels: counter("mcp_cancels_absorbed_total",
			"notifications/cancelled of guarded tool calls in flight answered 202 and not forwarded (cancel: finish).",
			"route"),
		toolLists: counter("mcp_tool_list_refreshes_total",
			"Tool lists of kind: mcp routes read by the gateway's own MCP client (discover_tools) or from tools/list answers passing through (learned); result is ok or error.",
			"route", "result"),
	}
	reg.MustRegister(m.messages, m.cancels, m.toolLists)
	return m
}
