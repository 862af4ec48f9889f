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

// Config configures a Publisher.
type Config struct {
	Client *kubeclient.Client
	// Namespace, Name and UID identify the Pod (Downward API). UID is
	// required: it is the precondition of every patch.
	Namespace, Name, UID string
	// Mode is one that PublishesOnPod: ModePodCondition or ModeLabel.
	Mode Mode
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
	queue workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	leading bool
	token   int64
	// published is the state last written to the Pod (nil: none yet);
	// synced is closed and replaced whenever it changes.
	published *state
	synced    chan struct{}
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
	case !cfg.Mode.PublishesOnPod():
		return nil, fmt.Errorf("podreadiness: mode %q publishes nothing on the Pod", cfg.Mode)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Publisher{
		synced: make(chan struct{}),
		cfg:    cfg,
		log:    cfg.Logger.With("pod", cfg.Namespace+"/"+cfg.Name, "mode", cfg.Mode),
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

// Run publishes "follower" at once, then every change, until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
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
		err := p.publish(ctx, leading, token)
		switch {
		case err == nil:
			p.queue.Forget(key)
			p.mu.Lock()
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

func (p *Publisher) publish(ctx context.Context, leading bool, token int64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if p.cfg.Mode == ModeLabel {
		return p.publishLabel(ctx, leading)
	}
	return p.publishCondition(ctx, leading, token)
}
