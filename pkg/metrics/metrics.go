// Package metrics exposes the sidecar's Prometheus metrics on a private
// registry: leadership, token, transitions, renew failures, store request
// latency and build information, plus the Go and process collectors.
//
// Every leader_sidecar_* metric carries the constant label lease (the
// election's name, --lease-name), so that sidecars of several elections
// can be told apart on one dashboard. client-go's
// leader_election_master_status{name="<lease>"} gauge (1 on the leader, 0
// elsewhere) is served as client-go serves it, so dashboards and alerts
// written for client-go's leader election work unchanged. Durations are in
// seconds, as the metric names say.
//
// Package election knows nothing of Prometheus: it reports through the
// election.Observer this package implements, and the store latency comes
// from wrapping the backend.Backend.
package metrics

import (
	"net/http"
	"runtime"

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
	renewFailures prometheus.Counter
	anomalies     *prometheus.CounterVec
	storeLatency  *prometheus.HistogramVec
}

// Info describes the election and the build for the metrics' labels.
type Info struct {
	// Lease is the election's name: the lease label of every
	// leader_sidecar_* metric and the name label of
	// leader_election_master_status.
	Lease string
	// Version and Backend label build_info.
	Version string
	Backend string
}

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
			Help:      "Times this candidate started (direction=acquired) or stopped (direction=lost) leading.",
		}, []string{"direction"}),
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
		storeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "store_request_duration_seconds",
			Help:      "Latency of requests to the election store, by operation and result.",
			Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation", "result"}),
	}
	for _, d := range []string{"acquired", "lost"} {
		m.transitions.WithLabelValues(d)
	}
	for _, a := range []election.TokenAnomaly{election.TokenRegressed, election.TokenExhausted} {
		m.anomalies.WithLabelValues(string(a))
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   namespace,
		Name:        "build_info",
		Help:        "Build information; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": info.Version, "goversion": runtime.Version(), "backend": info.Backend},
	})
	buildInfo.Set(1)
	m.own.MustRegister(m.transitions, m.renewFailures, m.anomalies, m.storeLatency, buildInfo)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Status is what the leadership gauges read, at scrape time.
type Status interface {
	Status() election.Status
}

// WatchStatus registers the is_leader, token and client-go's
// leader_election_master_status gauges, evaluated from s on every scrape so
// they follow self-demotion exactly.
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

// LeadershipChanged implements election.Observer.
func (m *Metrics) LeadershipChanged(leading bool, _ int64) {
	if leading {
		m.transitions.WithLabelValues("acquired").Inc()
	} else {
		m.transitions.WithLabelValues("lost").Inc()
	}
}

// RenewFailed implements election.Observer.
func (m *Metrics) RenewFailed(error) { m.renewFailures.Inc() }

var _ election.Observer = (*Metrics)(nil)

// TokenAnomaly implements election.Observer.
func (m *Metrics) TokenAnomaly(a election.TokenAnomaly, _, _ int64) {
	m.anomalies.WithLabelValues(string(a)).Inc()
}
