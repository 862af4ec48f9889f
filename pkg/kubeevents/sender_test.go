package kubeevents

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

// scriptedCreator answers each Create with the next error of its script
// (nil: created) and fails the test on a call beyond it.
type scriptedCreator struct {
	t      *testing.T
	script []error
	calls  chan string // the action of each call, in order
}

func newScripted(t *testing.T, script ...error) *scriptedCreator {
	return &scriptedCreator{t: t, script: script, calls: make(chan string, 100)}
}

func (s *scriptedCreator) Create(_ context.Context, ev *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	n := len(s.calls)
	s.calls <- ev.Action
	if n >= len(s.script) {
		s.t.Errorf("unexpected Create #%d of %s", n+1, ev.Action)
		return nil, errors.New("unexpected")
	}
	return ev, s.script[n]
}

var unreachable = &url.Error{Op: "Post", URL: "https://10.0.0.1/apis/events.k8s.io/v1/events", Err: errors.New("connection refused")}

// awaitCalls waits for the sender's n-th call.
func awaitCalls(t *testing.T, s *scriptedCreator, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.calls) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls, want %d", len(s.calls), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitWaiting waits until the sender waits on the clock.
func awaitWaiting(t *testing.T, c *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !c.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the sender never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

func event(action string) *eventsv1.Event { return &eventsv1.Event{Action: action} }

// TestUnreachableAPIServerIsTriedAgainAfterTheWait: a transport error is
// retried once retryWait has passed on the clock, not before.
func TestUnreachableAPIServerIsTriedAgainAfterTheWait(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	creator := newScripted(t, unreachable, nil, nil)
	var logs logBuffer
	s := newSender(creator, logs.logger(), clock)
	s.enqueue(event("first"))
	s.enqueue(event("second"))
	awaitCalls(t, creator, 1)
	awaitWaiting(t, clock)
	clock.Step(retryWait - time.Millisecond)
	if len(creator.calls) != 1 {
		t.Fatal("tried again before the wait was over")
	}
	clock.Step(time.Millisecond)
	awaitCalls(t, creator, 3)
	s.stop()
	if got := fmt.Sprint(<-creator.calls, <-creator.calls, <-creator.calls); got != "firstfirstsecond" {
		t.Fatalf("calls %s, want first twice then second", got)
	}
	if !strings.Contains(logs.String(), "retrying") || strings.Contains(logs.String(), "not retrying") {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// TestGivesUpAfterMaxTries: an API server that stays unreachable costs
// maxTries attempts per Event, then the Event is dropped and logged.
func TestGivesUpAfterMaxTries(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	script := make([]error, maxTries)
	for i := range script {
		script[i] = unreachable
	}
	creator := newScripted(t, script...)
	var logs logBuffer
	s := newSender(creator, logs.logger(), clock)
	s.enqueue(event("e"))
	for try := 1; try < maxTries; try++ {
		awaitCalls(t, creator, try)
		awaitWaiting(t, clock)
		clock.Step(retryWait)
	}
	awaitCalls(t, creator, maxTries)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "not retrying") {
		if time.Now().After(deadline) {
			t.Fatalf("no log of giving up:\n%s", logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	s.stop()
}

// TestAnswerFromTheAPIServerIsFinal: an error status (here a rejected
// Event) drops the Event after one try; the next Event is still sent.
func TestAnswerFromTheAPIServerIsFinal(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "e", nil)
	creator := newScripted(t, invalid, nil)
	var logs logBuffer
	s := newSender(creator, logs.logger(), clock)
	s.enqueue(event("rejected"))
	s.enqueue(event("next"))
	awaitCalls(t, creator, 2)
	s.stop()
	if !strings.Contains(logs.String(), "not retrying") || !strings.Contains(logs.String(), "tries=1") {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// blockingCreator holds every Create until released.
type blockingCreator struct{ release chan struct{} }

func (b blockingCreator) Create(ctx context.Context, ev *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	select {
	case <-b.release:
		return ev, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestEnqueueNeverBlocks: with the API server hanging, recording more
// Events than the queue holds returns at once and drops the excess; Stop
// gives up after flushTimeout on the clock.
func TestEnqueueNeverBlocks(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	var logs logBuffer
	s := newSender(blockingCreator{release: make(chan struct{})}, logs.logger(), clock)
	for range queueSize + 5 {
		s.enqueue(event("e"))
	}
	if !strings.Contains(logs.String(), "dropping one") {
		t.Fatalf("no Event dropped from a full queue:\n%s", logs.String())
	}
	stopped := make(chan struct{})
	go func() { s.stop(); close(stopped) }()
	awaitWaiting(t, clock)
	select {
	case <-stopped:
		t.Fatal("stop returned before flushTimeout with Events in flight")
	default:
	}
	clock.Step(flushTimeout)
	<-stopped
}
