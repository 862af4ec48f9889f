package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// renewSetting is how often the leaders of the many-elections measurement
// renew: "default", each system's own default (the sidecar every lease/3,
// client-go every retry period, 2s at the default timings, the rate
// kube-controller-manager runs at), or a fraction num/den of the lease
// duration, the same for both systems. The sidecar gets it as
// --renew-interval. client-go has no renew interval: its leader renews
// once per RetryPeriod, which is also how often its standbys read the
// Lease, so client-go gets the fraction as its retry period, and its
// standbys poll at that rate too.
type renewSetting struct {
	Name     string // "default" or "num/den"
	Num, Den int    // 0/0 for default
}

var renewDefault = renewSetting{Name: "default"}

// parseRenews parses -elections-renew: a comma-separated list of
// "default" and fractions of the lease such as 1/3 or 1/2.
func parseRenews(list string) ([]renewSetting, error) {
	var out []renewSetting
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "default" {
			out = append(out, renewDefault)
			continue
		}
		a, b, ok := strings.Cut(s, "/")
		num, err1 := strconv.Atoi(a)
		den, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || num < 1 || den <= num {
			return nil, fmt.Errorf("bad -elections-renew %q: want default or fractions of the lease below 1, such as 1/3,1/2", list)
		}
		out = append(out, renewSetting{Name: fmt.Sprintf("%d/%d", num, den), Num: num, Den: den})
	}
	return out, nil
}

// interval is how often sys's leader renews under this setting and the
// timings p.
func (r renewSetting) interval(sys string, p profile) time.Duration {
	switch {
	case r.Den != 0:
		return p.Lease * time.Duration(r.Num) / time.Duration(r.Den)
	case sys == sysSidecar:
		return election.DefaultRenewInterval(p.Lease, p.Renew, p.Retry)
	default:
		return p.Retry
	}
}

// apply is the timings and the sidecar's extra flags that make sys renew
// as this setting says.
func (r renewSetting) apply(sys string, p profile) (profile, []string) {
	if r.Den == 0 {
		return p, nil
	}
	iv := r.interval(sys, p)
	if sys == sysSidecar {
		return p, []string{"--renew-interval", iv.String()}
	}
	p.Retry = iv
	return p, nil
}

// check reports whether each system accepts this setting with the timings
// p, by its own rules: the sidecar's ValidateRenewInterval (a failed
// renewal must be retried before the renew deadline), client-go's
// RenewDeadline > JitterFactor × RetryPeriod (NewLeaderElector).
func (r renewSetting) check(p profile) error {
	if err := election.ValidateRenewInterval(r.interval(sysSidecar, p), p.Renew, p.Retry); err != nil {
		return fmt.Errorf("-elections-renew %s at the %s timings (lease %v, renew deadline %v, retry %v): the sidecar refuses it: %w",
			r.Name, p.Name, p.Lease, p.Renew, p.Retry, err)
	}
	if iv := r.interval(sysClientGo, p); float64(p.Renew) <= leaderelection.JitterFactor*float64(iv) {
		return fmt.Errorf("-elections-renew %s at the %s timings: client-go refuses a retry period of %v with a renew deadline of %v (it must exceed %v × the retry period)",
			r.Name, p.Name, iv, p.Renew, leaderelection.JitterFactor)
	}
	return nil
}

// slug names the setting in a namespace.
func (r renewSetting) slug() string {
	if r.Den == 0 {
		return "default"
	}
	return fmt.Sprintf("%d-%d", r.Num, r.Den)
}

// renewMargin says what is left when a leader renewing every iv misses a
// renewal: the time until its Lease expires for the others (lease - iv),
// and how many retries, a jittered retry period apart at the longest,
// start before the sidecar's renew deadline.
func renewMargin(iv time.Duration, p profile) (left time.Duration, retries int) {
	for at := iv + time.Duration(election.JitterFactor*float64(p.Retry)); at < p.Renew; at += time.Duration(election.JitterFactor * float64(p.Retry)) {
		retries++
	}
	return p.Lease - iv, retries
}
