// Package apphealth watches the application's own health endpoint, so
// leadership can follow the application: a replica whose app is unhealthy
// should neither lead nor contend.
//
// A Monitor checks one URL every Period and reports a verdict, healthy or
// unhealthy, with hysteresis:
//
//   - it starts unhealthy (nothing is known yet) and turns healthy at the
//     first successful check, so a sidecar that starts next to a healthy
//     app contends at once;
//   - from then on the verdict flips only after Threshold checks in a row
//     disagree with it: Threshold failures to turn unhealthy, Threshold
//     successes to turn healthy again, so an app that flaps does not move
//     leadership back and forth.
//
// A check succeeds when the answer's status is 200-399, as a Kubernetes
// httpGet probe judges it; a refused connection, a timeout (Timeout) or
// any other status is a failure. OnChange is called on its goroutine with
// each new verdict, in order, never twice in a row with the same value.
package apphealth

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultPeriod    = 2 * time.Second
	DefaultThreshold = 3
	DefaultTimeout   = time.Second
)

// Config configures a Monitor. Zero values take the defaults.
type Config struct {
	// URL is the app's health endpoint, e.g. http://127.0.0.1:8080/healthz.
	// Required when Check is nil.
	URL string
	// Period is the time between the starts of two checks.
	Period time.Duration
	// Threshold is how many checks in a row must disagree with the
	// verdict before it flips.
	Threshold int
	// Timeout bounds one check.
	Timeout time.Duration
	// Check replaces the HTTP check (tests, or a check of another kind).
	// It returns nil when the app is healthy.
	Check func(ctx context.Context) error
	// OnChange receives each new verdict and the error of the check that
	// decided it (nil when healthy). It must not block for long.
	OnChange func(healthy bool, err error)
}

// Monitor checks the app's health; see the package doc.
type Monitor struct {
	cfg Config

	mu          sync.Mutex
	healthy     bool
	everHealthy bool  // a check has succeeded
	lastErr     error // of the last failed check, nil once healthy
}

// New validates cfg and returns a Monitor that is not yet running.
func New(cfg Config) (*Monitor, error) {
	if cfg.Period == 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.Period < 0:
		return nil, fmt.Errorf("apphealth: period must be positive, not %v", cfg.Period)
	case cfg.Threshold < 0:
		return nil, fmt.Errorf("apphealth: threshold must be at least 1, not %d", cfg.Threshold)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("apphealth: timeout must be positive, not %v", cfg.Timeout)
	case cfg.Check == nil && cfg.URL == "":
		return nil, fmt.Errorf("apphealth: a URL is required")
	}
	if cfg.Check == nil {
		check, err := httpCheck(cfg.URL)
		if err != nil {
			return nil, err
		}
		cfg.Check = check
	}
	return &Monitor{cfg: cfg}, nil
}

// Healthy returns the current verdict and, when unhealthy, the error of
// the last failed check (nil before the first check).
func (m *Monitor) Healthy() (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.healthy, m.lastErr
}

// Run checks until ctx ends: the first check at once, then one every
// Period (a check that outlasts the period delays the next one).
func (m *Monitor) Run(ctx context.Context) {
	disagree := 0
	for {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
		err := m.cfg.Check(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		flip := m.judge(err, &disagree)
		m.mu.Unlock()
		if flip && m.cfg.OnChange != nil {
			m.cfg.OnChange(err == nil, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(m.cfg.Period))):
		}
	}
}

// judge takes one check's result into the verdict and reports whether it
// flipped. disagree counts the checks in a row that disagreed with the
// verdict. It locks m.mu and leaves it locked.
func (m *Monitor) judge(err error, disagree *int) bool {
	m.mu.Lock()
	if err != nil {
		m.lastErr = err
	}
	switch {
	case (err == nil) == m.healthy:
		*disagree = 0
		return false
	case !m.everHealthy: // the first success
	default:
		*disagree++
		if *disagree < m.cfg.Threshold {
			return false
		}
	}
	m.healthy, m.everHealthy, *disagree = err == nil, true, 0
	if m.healthy {
		m.lastErr = nil
	}
	return true
}
