package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/podreadiness"
)

// setup is what the parts of the sidecar are built from.
type setup struct {
	o        *options
	environ  []string
	identity string
	log      *slog.Logger
	// kube returns the one Kubernetes client of the sidecar, built on first
	// use (the lease backend and the Pod publisher share it).
	kube func() (kubernetes.Interface, error)
}

func newSetup(o *options, environ []string, identity string, log *slog.Logger) *setup {
	s := &setup{o: o, environ: environ, identity: identity, log: log}
	s.kube = sync.OnceValues(s.newKubeClient)
	return s
}

func (s *setup) getenv(k string) string {
	v, _ := lookup(s.environ, k)
	return v
}

func (s *setup) newKubeClient() (kubernetes.Interface, error) {
	copts := lease.ClientOptions{
		Kubeconfig: s.o.kubeconfig,
		Timeout:    s.o.renewDeadline / 2,
		QPS:        s.o.kubeAPIQPS,
		Burst:      s.o.kubeAPIBurst,
		UserAgent:  "leader-sidecar/" + currentVersion(),
	}
	cfg, err := lease.RESTConfig(copts)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return lease.NewClient(cfg, copts)
}

// podPublisher returns the publisher of --readiness-mode pod-condition or
// label, or nil in the other modes.
func (s *setup) podPublisher() (*podreadiness.Publisher, error) {
	mode := podreadiness.Mode(s.o.readinessMode)
	if mode != podreadiness.ModePodCondition && mode != podreadiness.ModeLabel {
		return nil, nil
	}
	client, err := s.kube()
	if err != nil {
		return nil, fmt.Errorf("--readiness-mode %s needs the Kubernetes API: %w", mode, err)
	}
	p, err := podreadiness.New(podreadiness.Config{
		Client:        client,
		Namespace:     s.getenv("POD_NAMESPACE"),
		Name:          s.getenv("POD_NAME"),
		UID:           s.getenv("POD_UID"),
		Mode:          mode,
		ConditionType: s.o.conditionType,
		LabelKey:      s.o.roleLabel,
		Identity:      s.identity,
		Logger:        s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("--readiness-mode %s: %w", mode, err)
	}
	return p, nil
}

// runPublisher runs p until the election is over, then lets it publish
// the final "follower" for at most shutdownTimeout.
func runPublisher(p *podreadiness.Publisher, electionDone <-chan struct{}) (wait func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	return func() {
		<-electionDone
		drainCtx, stop := context.WithTimeout(context.Background(), shutdownTimeout)
		defer stop()
		_ = p.Drain(drainCtx)
		cancel()
		<-done
	}
}
