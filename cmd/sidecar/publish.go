package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeevents"
	"github.com/leader-sidecar/leader-sidecar/pkg/podreadiness"
)

// podPublisher returns the publisher of --readiness-mode pod-condition or
// label, or nil in the other modes.
func podPublisher(cfg sidecarConfig, kube *kubeClient, log *slog.Logger) (*podreadiness.Publisher, error) {
	mode := cfg.readiness
	if mode != podreadiness.ModePodCondition && mode != podreadiness.ModeLabel {
		return nil, nil
	}
	client, err := kube.forOthers()
	if err != nil {
		return nil, fmt.Errorf("--readiness-mode %s needs the Kubernetes API: %w", mode, err)
	}
	pod := cfg.election.pod
	p, err := podreadiness.New(podreadiness.Config{
		Client:        client,
		Namespace:     pod.namespace,
		Name:          pod.name,
		UID:           pod.uid,
		Mode:          mode,
		ConditionType: cfg.conditionType,
		LabelKey:      cfg.roleLabel,
		Identity:      cfg.election.identity,
		Logger:        log,
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

// eventRecorder returns the recorder of Kubernetes Events for the Lease
// st, or nil when there is none to record: another backend, --events=false,
// no POD_NAME, or a recorder that cannot be made (logged). stop stops it.
func eventRecorder(cfg sidecarConfig, st *store, kube *kubeClient, log *slog.Logger) (obs election.Observer, stop func()) {
	if cfg.election.backend != "lease" {
		return nil, func() {}
	}
	pod := kubeevents.Pod{Namespace: cfg.election.pod.namespace, Name: cfg.election.pod.name, UID: cfg.election.pod.uid}
	if pod.Name == "" || !cfg.events {
		reason := "POD_NAME is not set"
		if !cfg.events {
			reason = "--events=false"
		}
		log.Info("not recording Kubernetes Events", "reason", reason)
		return nil, func() {}
	}
	client, err := kube.forOthers()
	if err == nil {
		var rec *kubeevents.Recorder
		if rec, err = kubeevents.New(kubeevents.Config{Client: client, Pod: pod, LeaseNamespace: st.namespace,
			LeaseName: cfg.election.leaseName, Identity: cfg.election.identity, Logger: log}); err == nil {
			return rec, rec.Stop
		}
	}
	log.Warn("not recording Kubernetes Events", "err", err)
	return nil, func() {}
}
