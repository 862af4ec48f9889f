package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/apphealth"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// appHealthConfig gates candidacy on the app's own health endpoint; url
// "" means no gate.
type appHealthConfig struct {
	url      string
	period   time.Duration
	failures int
	timeout  time.Duration
}

func (c *appHealthConfig) add(fs *pflag.FlagSet) {
	fs.StringVar(&c.url, "app-health-url", "", "the app's own health endpoint on loopback, e.g. http://127.0.0.1:8080/healthz: while it fails, this replica neither leads nor contends (default: no check)")
	docDefault(fs, "app-health-url", "none")
	docMeaning(fs, "app-health-url", "the app's own health endpoint on loopback, e.g. `http://127.0.0.1:8080/healthz`: while it fails, this replica neither leads nor contends (see [Leadership that follows the app](app-health.md))")
	fs.DurationVar(&c.period, "app-health-period", apphealth.DefaultPeriod, "time between two checks of --app-health-url")
	fs.IntVar(&c.failures, "app-health-failures", apphealth.DefaultThreshold, "checks in a row that must fail before the app counts as unhealthy, and succeed before it counts as healthy again")
	fs.DurationVar(&c.timeout, "app-health-timeout", apphealth.DefaultTimeout, "timeout of one check of --app-health-url")
}

// check checks the gate, if there is one. The URL must be http(s) on
// loopback (the app next to the sidecar) and must not be one of the
// sidecar's own listeners: gating on the Pod's own readiness would
// deadlock with leader-only readiness, where only the leader is Ready.
func (c *appHealthConfig) check(sidecarAddresses ...string) error {
	if c.url == "" {
		return nil
	}
	u, err := url.Parse(c.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--app-health-url: must be an http:// or https:// URL such as http://127.0.0.1:8080/healthz, got %q", c.url)
	}
	if err := checkFullIPv4("--app-health-url", u.Hostname()); err != nil {
		return err
	}
	if !httpapi.IsLoopbackHost(u.Hostname()) {
		return fmt.Errorf("--app-health-url: must name a loopback host (127.0.0.0/8, [::1] or localhost): the app next to this sidecar, got %q", u.Hostname())
	}
	port := map[string]int{"http": 80, "https": 443}[strings.ToLower(u.Scheme)]
	if u.Port() != "" {
		// url.Parse leaves digits only; the number is what is dialled.
		if port, err = strconv.Atoi(u.Port()); err != nil || port < 1 || port > 65535 {
			return fmt.Errorf("--app-health-url: port %q is not a port number from 1 to 65535", u.Port())
		}
	}
	for _, addr := range sidecarAddresses {
		if _, p, err := net.SplitHostPort(addr); err == nil {
			if n, err := strconv.Atoi(p); err == nil && n == port {
				return fmt.Errorf("--app-health-url: port %d is this sidecar's own listener (%s): give the app's health endpoint, never the sidecar's or the Pod's readiness", port, addr)
			}
		}
	}
	switch {
	case c.period <= 0:
		return fmt.Errorf("--app-health-period: must be greater than 0, got %v", c.period)
	case c.failures < 1:
		return fmt.Errorf("--app-health-failures: must be at least 1, got %d", c.failures)
	case c.timeout <= 0:
		return fmt.Errorf("--app-health-timeout: must be greater than 0, got %v", c.timeout)
	}
	return nil
}

// appGate takes the elector out of the election while the app is
// unhealthy and back once it is healthy again (see package apphealth for
// the hysteresis). Until the app's first successful check the replica
// does not contend.
type appGate struct {
	monitor *apphealth.Monitor
	healthy atomic.Bool
}

// newAppGate builds the gate and sits the elector out until the first
// healthy verdict. events, if it records AppUnhealthy, is told when a
// leader steps down for this reason.
func newAppGate(cfg appHealthConfig, elector *election.Elector, events any, release time.Duration, log *slog.Logger) (*appGate, error) {
	g := &appGate{}
	recorder, _ := events.(interface{ AppUnhealthy(int64, error) })
	onChange := func(healthy bool, cause error) {
		g.healthy.Store(healthy)
		if healthy {
			log.Info("the app is healthy: contending", "url", cfg.url)
			elector.Rejoin()
			return
		}
		was := elector.Status()
		log.Warn("the app is unhealthy: sitting out of the election", "url", cfg.url, "err", cause, "wasLeader", was.Leader)
		ctx, cancel := context.WithTimeout(context.Background(), release)
		defer cancel()
		if _, err := elector.SitOut(ctx, fmt.Sprintf("the app is unhealthy: %v", cause)); err != nil {
			log.Warn("could not release the lease; standbys will wait for it to expire", "err", err)
		}
		if was.Leader && recorder != nil {
			recorder.AppUnhealthy(was.Token, cause)
		}
	}
	m, err := apphealth.New(apphealth.Config{URL: cfg.url, Period: cfg.period, Threshold: cfg.failures,
		Timeout: cfg.timeout, OnChange: onChange})
	if err != nil {
		return nil, err
	}
	g.monitor = m
	// Not a candidate before the app has answered once; nothing is held
	// yet, so this writes nothing.
	if _, err := elector.SitOut(context.Background(), "the app has not passed its health check yet"); err != nil {
		return nil, err
	}
	return g, nil
}

// Healthy is the gate's current verdict.
func (g *appGate) Healthy() bool { return g.healthy.Load() }

// run checks the app until ctx ends.
func (g *appGate) run(ctx context.Context) { g.monitor.Run(ctx) }
