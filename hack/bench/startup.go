package main

import (
	"fmt"
	"net/http"
	"time"
)

// startupResult is the start-up of one candidate on a free Lease.
type startupResult struct {
	FirstAnswer time.Duration // sidecar: process start -> first answer on /leader
	Lead        time.Duration // process start -> leads
	Prof        string        // the timings' name; "" in results saved before it was kept: the default ones
}

// measureStartup: one candidate of each system on a fresh Lease, with the
// default timings (config.IdleTimings).
func measureStartup(b *bench, res *results) error {
	for _, sys := range []string{sysSidecar, sysClientGo} {
		r, err := b.startup(sys, b.cfg.idleTimings())
		if err != nil {
			return fmt.Errorf("%s: %w", sys, err)
		}
		res.Startup[sys] = r
	}
	return nil
}

func (b *bench) startup(sys string, prof profile) (startupResult, error) {
	var r startupResult
	ns, err := b.namespace("startup-" + sys)
	if err != nil {
		return r, err
	}
	spec := candSpec{sys: sys, prof: prof, backend: "lease", namespace: ns, lease: "bench", follow: true, identity: "startup"}
	p, err := newProxy(b.kube.Config)
	if err != nil {
		return r, err
	}
	defer p.close()
	if spec.kubeconfig, err = p.kubeconfig(b.tmp); err != nil {
		return r, err
	}
	if sys == sysSidecar {
		if spec.httpAddr, err = freePort(); err != nil {
			return r, err
		}
	}
	c, err := b.startCand(spec)
	if err != nil {
		return r, err
	}
	defer c.stop()
	if sys == sysSidecar {
		if r.FirstAnswer, err = firstAnswer(c, spec.httpAddr); err != nil {
			return r, err
		}
	}
	if err := c.waitLeading(30 * time.Second); err != nil {
		return r, err
	}
	r.Lead, r.Prof = c.leadTime().Sub(c.started), prof.Name
	return r, nil
}

// firstAnswer polls GET /leader from the moment c started until it
// answers.
func firstAnswer(c *cand, addr string) (time.Duration, error) {
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if resp, err := client.Get("http://" + addr + "/leader"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(c.started), nil
			}
		}
	}
	return 0, fmt.Errorf("sidecar never answered /leader:\n%s", c.tail())
}
