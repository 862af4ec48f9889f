package podreadiness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// Mode is how leadership is published on the Pod.
type Mode string

// The modes. ModeNone and ModeProbe publish nothing on the Pod: readiness
// is either plain health or the /leader/ready probe.
const (
	ModeNone         Mode = "none"
	ModeProbe        Mode = "probe"
	ModePodCondition Mode = "pod-condition"
	ModeLabel        Mode = "label"
)

// Modes is every mode, in the order the sidecar's --readiness-mode names
// them: the one list the sidecar checks the flag against.
var Modes = []Mode{ModeNone, ModeProbe, ModePodCondition, ModeLabel}

// PublishesOnPod reports whether m keeps something on the Pod (a condition
// or a label): the modes New accepts.
func (m Mode) PublishesOnPod() bool {
	return m == ModePodCondition || m == ModeLabel
}

// DefaultResyncPeriod is how often a leader's Publisher reads its Pod
// again, to repair what someone else changed there.
const DefaultResyncPeriod = time.Minute

// Config configures a Publisher.
type Config struct {
	Client *kubeclient.Client
	// Namespace, Name and UID identify the Pod (Downward API). UID is
	// required: it is the precondition of every patch.
	Namespace, Name, UID string
	// Mode is what the Publisher keeps on the Pod: ModePodCondition,
	// ModeLabel, or another mode (nothing) when DeletionCost is set.
	Mode Mode
	// DeletionCost keeps DeletionCostAnnotation at LeaderDeletionCost on
	// the Pod while this replica leads, and off it otherwise.
	DeletionCost bool
	// ResyncPeriod is how often the leader's Pod is read again and
	// repaired (0: DefaultResyncPeriod).
	ResyncPeriod time.Duration
	// ConditionType is the Pod condition of ModePodCondition, e.g.
	// "leader-sidecar.io/leader".
	ConditionType string
	// LabelKey is the label of ModeLabel, e.g. "leader-sidecar.io/role".
	LabelKey string
	// Identity names this candidate in condition messages.
	Identity string
	Logger   *slog.Logger
}

// Publisher keeps the Pod in step with this replica's leadership. It
// implements election.Observer.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	pods  podAPI
	queue workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	leading bool
	token   int64
	// published is the state last written to the Pod (nil: none yet);
	// synced is closed and replaced whenever it changes.
	published *state
	synced    chan struct{}
	// costOff is set once the API server refused the deletion cost;
	// costForeignSeen once another writer's cost was reported; repaired
	// once a repair was reported.
	costOff, costForeignSeen, repaired bool
}

type state struct {
	leading bool
	token   int64
}

var _ election.Observer = (*Publisher)(nil)

// New checks cfg and returns a Publisher; call Run to start it.
func New(cfg Config) (*Publisher, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("podreadiness: a Kubernetes client is required")
	case cfg.Namespace == "" || cfg.Name == "" || cfg.UID == "":
		return nil, errors.New("podreadiness: the Pod's namespace, name and UID are required (POD_NAMESPACE, POD_NAME, POD_UID from the Downward API)")
	case cfg.Mode == ModePodCondition && cfg.ConditionType == "":
		return nil, errors.New("podreadiness: a condition type is required in pod-condition mode")
	case cfg.Mode == ModeLabel && cfg.LabelKey == "":
		return nil, errors.New("podreadiness: a label key is required in label mode")
	case !cfg.Mode.PublishesOnPod() && !cfg.DeletionCost:
		return nil, fmt.Errorf("podreadiness: mode %q publishes nothing on the Pod, and the deletion cost is off", cfg.Mode)
	case cfg.ResyncPeriod < 0:
		return nil, fmt.Errorf("podreadiness: negative resync period %v", cfg.ResyncPeriod)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ResyncPeriod == 0 {
		cfg.ResyncPeriod = DefaultResyncPeriod
	}
	return &Publisher{
		synced: make(chan struct{}),
		cfg:    cfg,
		log:    cfg.Logger.With("pod", cfg.Namespace+"/"+cfg.Name, "mode", cfg.Mode),
		pods:   cfg.Client.Pods(cfg.Namespace),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "podreadiness"}),
	}, nil
}

// podKey is the only queue item: "bring the Pod up to date".
const podKey = "pod"

// LeadershipChanged implements election.Observer. It never blocks.
func (p *Publisher) LeadershipChanged(leading bool, token int64) {
	p.mu.Lock()
	p.leading, p.token = leading, token
	p.mu.Unlock()
	p.queue.Add(podKey)
}

// RenewFailed implements election.Observer.
func (p *Publisher) RenewFailed(error) {}

// TokenAnomaly implements election.Observer.
func (p *Publisher) TokenAnomaly(election.TokenAnomaly, int64, int64) {}

// Drain waits until the Pod shows what the Publisher was last told, or ctx
// ends. Call it after the election has stopped, then end Run.
func (p *Publisher) Drain(ctx context.Context) error {
	for {
		p.mu.Lock()
		done := p.published != nil && *p.published == state{p.leading, p.token}
		synced := p.synced
		p.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-synced:
		case <-ctx.Done():
			return fmt.Errorf("podreadiness: the Pod does not show the last state yet: %w", ctx.Err())
		}
	}
}

// Run publishes "follower" at once, then every change, and while this
// replica leads reads the Pod again every ResyncPeriod to repair it, until
// ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	go func() {
		resync := time.NewTicker(p.cfg.ResyncPeriod)
		defer resync.Stop()
		for {
			select {
			case <-ctx.Done():
				p.queue.ShutDown()
				return
			case <-resync.C:
				// Only the leader's Pod is read again: a standby's
				// marks are checked at every change, and a hundred
				// idle standbys then cost the API server nothing.
				p.mu.Lock()
				leading := p.leading
				p.mu.Unlock()
				if leading {
					p.queue.Add(podKey)
				}
			}
		}
	}()
	p.queue.Add(podKey)
	for {
		key, quit := p.queue.Get()
		if quit {
			return
		}
		p.mu.Lock()
		leading, token := p.leading, p.token
		p.mu.Unlock()
		changed, err := p.publish(ctx, leading, token)
		switch {
		case err == nil:
			p.queue.Forget(key)
			p.mu.Lock()
			if changed && p.published != nil && *p.published == (state{leading, token}) {
				p.repairedLocked(leading)
			}
			p.published = &state{leading, token}
			close(p.synced)
			p.synced = make(chan struct{})
			p.mu.Unlock()
		case ctx.Err() == nil:
			p.log.Warn("could not publish leadership on the Pod; retrying", "leading", leading, "err", err)
			p.queue.AddRateLimited(key)
		}
		p.queue.Done(key)
	}
}

// repairedLocked says, once, that the Pod had to be written although it
// already showed this state: someone else changed it (a hand edit, a
// controller, a Pod template's label).
func (p *Publisher) repairedLocked(leading bool) {
	if p.repaired {
		return
	}
	p.repaired = true
	p.log.Warn("someone else changed what this sidecar keeps on its Pod; repaired (said once)", "leading", leading)
}
