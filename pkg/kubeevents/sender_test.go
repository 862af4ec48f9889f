package kubeevents

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The sender's tests run in synctest bubbles: its waits take no real
// time, and synctest.Wait lets it reach its next wait.

// scriptedCreator answers each Create with the next error of its script
// (nil: created) and fails the test on a call beyond it.
type scriptedCreator struct {
	t      *testing.T
	script []error
	mu     sync.Mutex
	calls  []string // the action of each call, in order
}

func (s *scriptedCreator) Create(_ context.Context, ev *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.calls)
	s.calls = append(s.calls, ev.Action)
	if n >= len(s.script) {
		s.t.Errorf("unexpected Create #%d of %s", n+1, ev.Action)
		return nil, errors.New("unexpected")
	}
	return ev, s.script[n]
}

// called is the action of every call so far.
func (s *scriptedCreator) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

var unreachable = &url.Error{Op: "Post", URL: "https://10.0.0.1/apis/events.k8s.io/v1/events", Err: errors.New("connection refused")}

func event(action string) *eventsv1.Event { return &eventsv1.Event{Action: action} }

// TestUnreachableAPIServerIsTriedAgainAfterTheWait: a transport error is
// retried once retryWait has passed, not before.
func TestUnreachableAPIServerIsTriedAgainAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		creator := &scriptedCreator{t: t, script: []error{unreachable, nil, nil}}
		var logs logBuffer
		s := newSender(creator, logs.logger())
		s.enqueue(event("first"))
		s.enqueue(event("second"))
		synctest.Wait()
		time.Sleep(retryWait - time.Millisecond)
		synctest.Wait()
		if len(creator.called()) != 1 {
			t.Fatalf("%d calls before the wait was over, want 1", len(creator.called()))
		}
		time.Sleep(time.Millisecond)
		s.stop()
		if got := fmt.Sprint(creator.called()); got != "[first first second]" {
			t.Fatalf("calls %s, want first twice then second", got)
		}
		if !strings.Contains(logs.String(), "retrying") || strings.Contains(logs.String(), "not retrying") {
			t.Fatalf("log:\n%s", logs.String())
		}
	})
}

// TestGivesUpAfterMaxTries: an API server that stays unreachable costs
// maxTries attempts per Event, retryWait apart, then the Event is dropped
// and logged.
func TestGivesUpAfterMaxTries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := make([]error, maxTries)
		for i := range script {
			script[i] = unreachable
		}
		creator := &scriptedCreator{t: t, script: script}
		var logs logBuffer
		s := newSender(creator, logs.logger())
		began := time.Now()
		s.enqueue(event("e"))
		synctest.Wait()
		time.Sleep((maxTries - 1) * retryWait)
		synctest.Wait()
		if len(creator.called()) != maxTries || !strings.Contains(logs.String(), "not retrying") {
			t.Fatalf("%d calls after %v, want %d and a log of giving up:\n%s", len(creator.called()), time.Since(began), maxTries, logs.String())
		}
		s.stop()
	})
}

// TestAnswerFromTheAPIServerIsFinal: an error status (here a rejected
// Event) drops the Event after one try; the next Event is still sent.
func TestAnswerFromTheAPIServerIsFinal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		invalid := apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "e", nil)
		creator := &scriptedCreator{t: t, script: []error{invalid, nil}}
		var logs logBuffer
		s := newSender(creator, logs.logger())
		s.enqueue(event("rejected"))
		s.enqueue(event("next"))
		s.stop()
		if fmt.Sprint(creator.called()) != "[rejected next]" || !strings.Contains(logs.String(), "not retrying") ||
			!strings.Contains(logs.String(), "tries=1") {
			t.Fatalf("calls %v, log:\n%s", creator.called(), logs.String())
		}
	})
}

// hangingCreator never answers before its context ends.
type hangingCreator struct{}

func (hangingCreator) Create(ctx context.Context, _ *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestEnqueueNeverBlocks: with the API server hanging, recording more
// Events than the queue holds returns at once and drops the excess; stop
// gives up after flushTimeout.
func TestEnqueueNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		s := newSender(hangingCreator{}, logs.logger())
		for range queueSize + 5 {
			s.enqueue(event("e"))
		}
		if !strings.Contains(logs.String(), "dropping one") {
			t.Fatalf("no Event dropped from a full queue:\n%s", logs.String())
		}
		began := time.Now()
		s.stop()
		if took := time.Since(began); took != flushTimeout {
			t.Fatalf("stop returned after %v with Events in flight, want %v", took, flushTimeout)
		}
	})
}
