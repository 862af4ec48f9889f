package kubeevents

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits of the background sender, as client-go's event broadcaster has
// them (its queue is larger: it serves whole controllers).
const (
	queueSize    = 64
	maxTries     = 12
	retryWait    = 10 * time.Second
	flushTimeout = 3 * time.Second
)

// eventCreator is what the sender needs of an Events client.
type eventCreator interface {
	Create(ctx context.Context, ev *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error)
}

// sender writes queued Events on one goroutine, started with the first.
type sender struct {
	events eventCreator
	log    *slog.Logger

	ctx    context.Context // ends on stop, after the flush
	cancel context.CancelFunc
	start  sync.Once
	done   chan struct{} // closed when the goroutine has ended

	mu      sync.Mutex // guards queue against enqueue after close
	queue   chan *eventsv1.Event
	stopped bool
}

func newSender(events eventCreator, log *slog.Logger) *sender {
	ctx, cancel := context.WithCancel(context.Background())
	return &sender{events: events, log: log, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), queue: make(chan *eventsv1.Event, queueSize)}
}

// enqueue queues ev without blocking, or drops it.
func (s *sender) enqueue(ev *eventsv1.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.start.Do(func() { go s.run() })
	select {
	case s.queue <- ev:
	default:
		s.log.Warn("too many Kubernetes Events waiting; dropping one", "action", ev.Action, "reason", ev.Reason)
	}
}

// stop closes the queue, lets the goroutine write what is queued for at
// most flushTimeout, then cancels what remains and waits for it.
func (s *sender) stop() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.queue)
	}
	s.mu.Unlock()
	s.start.Do(func() { close(s.done) }) // never started: nothing to wait for
	flush := time.NewTimer(flushTimeout)
	defer flush.Stop()
	select {
	case <-s.done:
	case <-flush.C:
	}
	s.cancel()
	<-s.done
}

func (s *sender) run() {
	defer close(s.done)
	for ev := range s.queue {
		s.send(ev)
	}
}

// send creates ev, trying again while the API server cannot be reached.
func (s *sender) send(ev *eventsv1.Event) {
	for try := 1; ; try++ {
		_, err := s.events.Create(s.ctx, ev, metav1.CreateOptions{})
		if err == nil {
			return
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) || try == maxTries || s.ctx.Err() != nil {
			s.log.Warn("could not record a Kubernetes Event; not retrying",
				"action", ev.Action, "reason", ev.Reason, "tries", try, "err", err)
			return
		}
		s.log.Info("could not record a Kubernetes Event; retrying", "action", ev.Action, "in", retryWait, "err", err)
		pause := time.NewTimer(retryWait)
		select {
		case <-s.ctx.Done():
		case <-pause.C:
		}
		pause.Stop()
	}
}
