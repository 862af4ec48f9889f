// Package metrics exposes the sidecar's Prometheus metrics on a private
// registry: leadership, token, terms begun and ended by reason, the gap
// between terms, the term's start and last renewal, renew failures, store
// request latency and build information, plus the Go and process
// collectors. docs/operations.md#metrics lists them; promtool check
// metrics passes on a real sidecar's /metrics (e2e/alerts).
//
// Every leader_sidecar_* metric carries the constant label lease (the
// election's name, --lease-name), so that sidecars of several elections
// can be told apart on one dashboard. client-go's
// leader_election_master_status{name="<lease>"} gauge (1 on the leader, 0
// elsewhere) is served as client-go serves it, so dashboards and alerts
// written for client-go's leader election work unchanged. Durations are in
// seconds, as the metric names say.
//
// In shard mode (WatchShards) the lease label is the group's name and
// leader_election_master_status has one series per shard,
// name="<group>-shard-<i>", 0 unless this replica claims that shard, on
// every replica from its start: summed by name over the replicas it is 1
// for a shard held once.
//
// Package election knows nothing of Prometheus: it reports through the
// election.Observer this package implements, and the store latency comes
// from wrapping the backend.Backend.
package metrics

import (
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

const namespace = "leader_sidecar"

// Metrics holds the registry and the collectors the sidecar updates.
type Metrics struct {
	registry *prometheus.Registry
	// own registers the leader_sidecar_* metrics, each labelled lease.
	own           prometheus.Registerer
	lease         string
	transitions   *prometheus.CounterVec
	termGap       prometheus.Histogram
	renewFailures prometheus.Counter
	anomalies     *prometheus.CounterVec
	leaseBounded  prometheus.Counter
	storeLatency  *prometheus.HistogramVec
}

// Info describes the election and the build for the metrics' labels.
type Info struct {
	// Lease is the election's name: the lease label of every
	// leader_sidecar_* metric and the name label of
	// leader_election_master_status.
	Lease string
	// Version, Backend and Identity (this candidate's, unique per process
	// start) label build_info, the one info metric.
	Version  string
	Backend  string
	Identity string
}

// Reasons a term begins (acquired) or ends (the election.TermEndReasons):
// the reason label of leadership_transitions_total.
const acquired = "acquired"

// New registers every metric on a new private registry.
func New(info Info) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		lease:    info.Lease,
		own:      prometheus.WrapRegistererWith(prometheus.Labels{"lease": info.Lease}, reg),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "leadership_transitions_total",
			Help: "Terms of this candidate begun (reason=acquired) and ended, by why: lost (renew deadline passed, " +
				"another holder, store lost), released (on request, app unhealthy, shutdown), handed_off, " +
				"stopped (shutdown without release).",
		}, []string{"reason"}),
		termGap: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "term_gap_seconds",
			Help: "At each term this candidate begins, the time from when it first saw the record it took over " +
				"(the previous term's last renewal, release or hand-off, or the record missing) to its own successful write.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 20, 30, 45, 60, 120, 300},
		}),
		renewFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "renew_failures_total",
			Help:      "Failed attempts to renew the lease while leading.",
		}),
		anomalies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "token_anomalies_total",
			Help: "Fencing-token problems found in the store: token-regressed (a record's token below one seen " +
				"before), token-exhausted (no token left for a new term; the record needs a reset).",
		}, []string{"anomaly"}),
		leaseBounded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "record_lease_bounded_total",
			Help: "Records found declaring a longer lease than this candidate trusts, once per holder and token: " +
				"each is waited out as if it declared the bound.",
		}),
		storeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "store_request_duration_seconds",
			Help:      "Latency of requests to the election store, by operation and result.",
			Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation", "result"}),
	}
	m.transitions.WithLabelValues(acquired)
	for _, r := range election.TermEndReasons {
		m.transitions.WithLabelValues(string(r))
	}
	for _, a := range []election.TokenAnomaly{election.TokenRegressed, election.TokenExhausted} {
		m.anomalies.WithLabelValues(string(a))
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   namespace,
		Name:        "build_info",
		Help:        "Build and candidate information (version, Go version, backend, this candidate's identity); the value is always 1.",
		ConstLabels: prometheus.Labels{"version": info.Version, "goversion": runtime.Version(), "backend": info.Backend, "identity": info.Identity},
	})
	buildInfo.Set(1)
	m.own.MustRegister(m.transitions, m.termGap, m.renewFailures, m.anomalies, m.leaseBounded, m.storeLatency, buildInfo)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Status is what the leadership gauges read, at scrape time.
type Status interface {
	Status() election.Status
}

// WatchStatus registers the is_leader, token, term start and last renewal
// gauges and client-go's leader_election_master_status, evaluated from s on
// every scrape so they follow self-demotion exactly.
func (m *Metrics) WatchStatus(s Status) {
	leading := func() float64 {
		if s.Status().Leader {
			return 1
		}
		return 0
	}
	m.own.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "is_leader",
			Help:      "1 while this candidate claims leadership, else 0.",
		}, leading),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "token",
			Help:      "Fencing token of the current term while leading, else 0.",
		}, func() float64 { return float64(s.Status().Token) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "term_start_timestamp_seconds",
			Help:      "Unix time when this candidate's current or last term began; 0 before its first.",
		}, func() float64 { return unixSeconds(s.Status().TermStarted) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "last_renewal_timestamp_seconds",
			Help: "Unix time when this candidate's last successful acquisition or renewal began (its claim counts " +
				"from then); 0 before its first.",
		}, func() float64 { return unixSeconds(s.Status().LastRenewal) }),
	)
	// Named, labelled and explained as Kubernetes components register
	// client-go's tools/leaderelection metric (component-base).
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. " +
			"'name' is the string used to identify the lease. Please make sure to group by name.",
		ConstLabels: prometheus.Labels{"name": m.lease},
	}, leading))
}

// WatchAppHealth registers the app_healthy gauge, read from healthy on
// every scrape: the verdict of the sidecar's check of its app.
func (m *Metrics) WatchAppHealth(healthy func() bool) {
	m.own.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace,
		Name:      "app_healthy",
		Help:      "1 while the app passes its health check (--app-health-url), else 0: an unhealthy app's replica neither leads nor contends.",
	}, func() float64 {
		if healthy() {
			return 1
		}
		return 0
	}))
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// unixSeconds is t as Unix seconds with a fraction, 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// LeadershipChanged implements election.Observer; the terms are counted by
// TermStarted and TermEnded, which follow it.
func (m *Metrics) LeadershipChanged(bool, int64) {}

// TermStarted implements election.TermObserver.
func (m *Metrics) TermStarted(t election.TermStart) {
	m.transitions.WithLabelValues(acquired).Inc()
	if t.HasGap {
		m.termGap.Observe(t.Gap.Seconds())
	}
}

// TermEnded implements election.TermObserver.
func (m *Metrics) TermEnded(t election.TermEnd) {
	m.transitions.WithLabelValues(string(t.Reason)).Inc()
}

// RenewFailed implements election.Observer.
func (m *Metrics) RenewFailed(error) { m.renewFailures.Inc() }

var _ election.TermObserver = (*Metrics)(nil)

var _ election.LeaseBoundObserver = (*Metrics)(nil)

// LeaseDurationBounded implements election.LeaseBoundObserver.
func (m *Metrics) LeaseDurationBounded(string, time.Duration, time.Duration) { m.leaseBounded.Inc() }

// TokenAnomaly implements election.Observer.
func (m *Metrics) TokenAnomaly(a election.TokenAnomaly, _, _ int64) {
	m.anomalies.WithLabelValues(string(a)).Inc()
}
