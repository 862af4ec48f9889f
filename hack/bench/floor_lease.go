package main

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// The floors on a Lease are the work of a hand-off or a fail-over with
// nothing else: two clients (client-go's typed client, no leaderelection
// package), each in this process behind a counting proxy of its own as
// every candidate is, each with a watch of the one Lease open. A
// hand-off: the leader's release (an update with the resourceVersion it
// last wrote), the watch event reaching the other client, and its acquire
// (an update with the event's resourceVersion). A crash fail-over beyond
// the lease: the leader's last renewal reaching the other client by its
// watch, then, after a pause, one update; the lease duration a real
// standby waits in between is left out, as it is of the sidecar's figure.

// floorPause is the wait before a floor trial: as a hand-off trial's with
// the short timings, so the processes have idled as long.
func floorPause() <-chan time.Time { return randomPause(profShort) }

// leaseClient is one of the floor's two clients.
type leaseClient struct {
	name   string
	proxy  *countingProxy
	leases typedcoordinationv1.LeaseInterface
	events <-chan watch.Event
	stop   func()
}

// leaseFloor measures n floor trials on a Lease: hand-offs, or with
// failover, the part of a crash fail-over beyond the lease.
func (b *bench) leaseFloor(n int, failover bool) ([]trial, error) {
	ns, err := b.namespace("floor-lease")
	if err != nil {
		return nil, err
	}
	var cs [2]*leaseClient
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.stop()
				c.proxy.close()
			}
		}
	}()
	for i, name := range []string{"a", "b"} {
		p, err := newProxy(b.kube.Config)
		if err != nil {
			return nil, err
		}
		client, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + p.addr})
		if err != nil {
			p.close()
			return nil, err
		}
		cs[i] = &leaseClient{name: name, proxy: p, leases: client.CoordinationV1().Leases(ns), stop: func() {}}
	}
	now := metav1.NewMicroTime(time.Now())
	lease, err := cs[0].leases.Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "floor"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To(int32(profShort.Lease.Seconds())),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(int32(0))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		w, err := c.leases.Watch(context.Background(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", "floor").String(), ResourceVersion: lease.ResourceVersion})
		if err != nil {
			return nil, err
		}
		c.events, c.stop = w.ResultChan(), w.Stop
	}
	var out []trial
	for i := 0; i < n; i++ {
		leader, standby := cs[i%2], cs[(i+1)%2]
		pause := floorPause()
		for _, c := range cs {
			if i == 0 {
				break // the watches start after the Lease's first version
			}
			if _, err := c.awaitVersion(lease.ResourceVersion); err != nil {
				return out, err
			}
		}
		<-pause
		var t trial
		if t, lease, err = leaseFloorTrial(leader, standby, lease, failover); err != nil {
			return out, err
		}
		out = append(out, t)
		b.logf("  floor lease trial %d (failover %v): %v %s", i+1, failover, t.Latency.Round(time.Microsecond), stepsString(t.Steps))
	}
	return out, nil
}

// leaseFloorTrial is one hand-off (the leader releases) or fail-over (the
// leader renews, and the standby takes over after a pause) from lease,
// which the leader holds; it returns the Lease as the standby wrote it.
func leaseFloorTrial(leader, standby *leaseClient, lease *coordinationv1.Lease, failover bool) (trial, *coordinationv1.Lease, error) {
	ctx := context.Background()
	t0 := time.Now()
	write := lease.DeepCopy()
	stamp := metav1.NewMicroTime(t0)
	write.Spec.RenewTime = &stamp
	if !failover { // the shape of a release, the sidecar's and client-go's
		write.Spec.HolderIdentity, write.Spec.LeaseDurationSeconds, write.Spec.AcquireTime = ptr.To(""), ptr.To(int32(1)), &stamp
	}
	written, err := leader.leases.Update(ctx, write, metav1.UpdateOptions{})
	if err != nil {
		return trial{}, nil, fmt.Errorf("%s's write: %w", leader.name, err)
	}
	wrote := time.Now()
	seen, err := standby.awaitVersion(written.ResourceVersion)
	if err != nil {
		return trial{}, nil, err
	}
	event := time.Now()
	if failover {
		<-floorPause() // a real standby waits out the lease duration here
	}
	casStart := time.Now()
	take := seen.DeepCopy()
	now := metav1.NewMicroTime(casStart)
	take.Spec.HolderIdentity, take.Spec.AcquireTime, take.Spec.RenewTime = ptr.To(standby.name), &now, &now
	take.Spec.LeaseDurationSeconds = ptr.To(int32(profShort.Lease.Seconds()))
	take.Spec.LeaseTransitions = ptr.To(*take.Spec.LeaseTransitions + 1)
	taken, err := standby.leases.Update(ctx, take, metav1.UpdateOptions{})
	if err != nil {
		return trial{}, nil, fmt.Errorf("%s's acquire: %w", standby.name, err)
	}
	done := time.Now()
	first := "release returned"
	if failover {
		first = "renewal returned"
	}
	t := trial{Latency: done.Sub(t0), Steps: []step{{first, wrote.Sub(t0)}, {"watch event", event.Sub(t0)}, {"acquire returned", done.Sub(t0)}}}
	if failover {
		cas := done.Sub(casStart)
		t.Latency, t.Beyond = event.Sub(t0)+cas, event.Sub(t0)+cas
		t.Steps[2] = step{"acquire returned (pause left out)", event.Sub(t0) + cas}
	}
	return t, taken, nil
}

// awaitVersion reads c's watch until it shows the Lease at version rv and
// returns it.
func (c *leaseClient) awaitVersion(rv string) (*coordinationv1.Lease, error) {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return nil, fmt.Errorf("%s's watch ended", c.name)
			}
			if l, isLease := ev.Object.(*coordinationv1.Lease); isLease && l.ResourceVersion == rv {
				return l, nil
			}
		case <-timeout:
			return nil, fmt.Errorf("%s's watch did not show version %s within 10s", c.name, rv)
		}
	}
}
