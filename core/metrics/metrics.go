// Package metrics defines the host's Prometheus metrics on one registry.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the host's instruments.
type Metrics struct {
	Reg         *prometheus.Registry
	Submitted   prometheus.Counter
	Finished    *prometheus.CounterVec // status, reason
	StageTime   *prometheus.HistogramVec
	TurnOverhd  prometheus.Histogram
	Turns       prometheus.Counter
	HTTP        *prometheus.CounterVec // route, code
	PluginCalls *prometheus.HistogramVec
	// PluginRetries counts calls retried on a restarted plugin process.
	PluginRetries *prometheus.CounterVec
	// Retries counts samples run again after an infrastructure failure.
	Retries *prometheus.CounterVec // reason
}

// New registers every metric; gauges that read live state are added with
// GaugeFunc by their owners.
func New() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Reg:       r,
		Submitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "prorl_rollouts_submitted_total", Help: "Rollouts accepted."}),
		Finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prorl_rollouts_finished_total", Help: "Rollouts finished, by status and failure reason."},
			[]string{"status", "reason"}),
		StageTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prorl_stage_seconds", Help: "Time inside each pipeline stage.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12)}, []string{"stage"}),
		TurnOverhd: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "prorl_turn_overhead_seconds", Help: "Host time per turn outside backend and plugin calls.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
		Turns: prometheus.NewCounter(prometheus.CounterOpts{Name: "prorl_turns_total", Help: "LLM turns generated."}),
		HTTP: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prorl_http_requests_total", Help: "API requests by route and status code."},
			[]string{"route", "code"}),
		PluginCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prorl_plugin_call_seconds", Help: "Plugin RPC latency.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"plugin", "method"}),
		PluginRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prorl_plugin_call_retries_total", Help: "Plugin calls retried on a restarted process after a crash."},
			[]string{"plugin", "method"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prorl_rollout_retries_total", Help: "Samples run again as a new attempt after an infrastructure failure, by the reason of the attempt that failed."},
			[]string{"reason"}),
	}
	r.MustRegister(m.Submitted, m.Finished, m.StageTime, m.TurnOverhd, m.Turns, m.HTTP, m.PluginCalls, m.PluginRetries, m.Retries)
	return m
}

// Gauge registers a gauge read from live state at scrape time.
func (m *Metrics) Gauge(name, help string, labels prometheus.Labels, f func() float64) {
	m.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f))
}

// Counter registers a counter read from live state at scrape time.
func (m *Metrics) Counter(name, help string, labels prometheus.Labels, f func() float64) {
	m.Reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f))
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Reg, promhttp.HandlerOpts{})
}
