package fencesuite_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// receive returns the next state, failing if none is ready once every
// goroutine of the bubble is blocked.
func receive(t *testing.T, states <-chan fence.State) fence.State {
	t.Helper()
	synctest.Wait()
	select {
	case s, ok := <-states:
		if !ok {
			t.Fatal("states closed")
		}
		return s
	default:
		t.Fatal("no state delivered")
		return fence.State{}
	}
}

// next waits for the next state, failing if none comes within d of
// virtual time (so a test that goes wrong fails instead of spinning).
func next(t *testing.T, states <-chan fence.State, d time.Duration) fence.State {
	t.Helper()
	select {
	case s, ok := <-states:
		if !ok {
			t.Fatal("states closed")
		}
		return s
	case <-time.After(d):
		t.Fatalf("no state within %v", d)
		return fence.State{}
	}
}

func nothingPending(t *testing.T, states <-chan fence.State) {
	t.Helper()
	synctest.Wait()
	select {
	case s := <-states:
		t.Fatalf("unexpected state %+v", s)
	default:
	}
}

func TestWatchFollowsChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, following("app-1_2"))
		states, err := sc.client.Watch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s := receive(t, states); s.Leader || s.Holder != "app-1_2" || s.Token != 0 || s.Lease != info.Lease {
			t.Fatalf("first state %+v, want a follower of app-1_2", s)
		}
		sc.Set(leading(3, 10*time.Second))
		if s := receive(t, states); !s.Leader || s.Token != 3 || !s.ValidUntil.Equal(time.Now().Add(10*time.Second)) || s.Err != nil {
			t.Fatalf("state %+v, want leader with token 3 for 10s", s)
		}
		sc.Set(following("app-2_3"))
		if s := receive(t, states); s.Leader || s.Holder != "app-2_3" {
			t.Fatalf("state %+v, want a follower of app-2_3", s)
		}
		nothingPending(t, states)
	})
}

func TestWatchReconnectsAfterTheStreamBreaks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, leading(3, time.Hour))
		states, err := sc.client.Watch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		receive(t, states)
		sc.breakStreams()
		broke := time.Now()
		s := receive(t, states)
		if s.Leader || s.Token != 0 || !errors.Is(s.Err, fence.ErrDisconnected) || s.Identity != "app-0_1" {
			t.Fatalf("after the break: %+v, want not leader with ErrDisconnected", s)
		}
		if s = next(t, states, time.Second); !s.Leader || s.Token != 3 || s.Err != nil {
			t.Fatalf("after reconnecting: %+v, want leader with token 3", s)
		}
		if waited := time.Since(broke); waited != 100*time.Millisecond {
			t.Errorf("reconnected after %v, want the first backoff, 100ms", waited)
		}
	})
}

func TestWatchBacksOffWhileTheSidecarIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, leading(3, time.Hour))
		states, err := sc.client.Watch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		receive(t, states)
		sc.setDown(errors.New("connection refused"))
		sc.breakStreams()
		broke := time.Now()
		if s := receive(t, states); !errors.Is(s.Err, fence.ErrDisconnected) {
			t.Fatalf("after the break: %+v, want ErrDisconnected", s)
		}
		before := sc.count()
		time.Sleep(time.Second)
		nothingPending(t, states) // one disconnected state, not one per attempt
		if attempts := sc.count() - before; attempts != 3 {
			t.Errorf("%d attempts in 1s, want 3 (after 100ms, 200ms, 400ms)", attempts)
		}
		sc.setDown(nil)
		if s := next(t, states, time.Minute); !s.Leader || s.Token != 3 {
			t.Fatalf("after the sidecar came back: %+v, want leader with token 3", s)
		}
		if waited := time.Since(broke); waited != 1500*time.Millisecond {
			t.Errorf("reconnected %v after the break, want 1.5s (100+200+400+800ms)", waited)
		}
	})
}

// script serves /leader/watch from a script: each string of events is
// written as is; closing events ends the stream. Keep-alive comments are
// sent every 15s when keepAlive is set.
func script(events <-chan string, keepAlive bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(15 * time.Second)
		defer tick.Stop()
		if !keepAlive {
			tick.Stop()
		}
		for {
			select {
			case e, ok := <-events:
				if !ok {
					return
				}
				if _, err := fmt.Fprint(w, e); err != nil {
					return
				}
			case <-tick.C:
				if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
					return
				}
			case <-r.Context().Done():
				return
			}
		}
	})
}

func leaderEvent(token int64, until time.Time) string {
	return fmt.Sprintf("data: {\"leader\":true,\"identity\":\"a\",\"holder\":\"a\",\"token\":%d,\"validUntil\":%q}\n\n",
		token, until.UTC().Format(time.RFC3339Nano))
}

func TestWatchDropsASilentStream(t *testing.T) {
	for _, keepAlive := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep-alive %v", keepAlive), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				events := make(chan string, 1)
				sc := newScriptedSidecar(t, nil, script(events, keepAlive))
				events <- leaderEvent(1, time.Now().Add(time.Hour))
				states, err := sc.client.Watch(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				receive(t, states)
				start := time.Now()
				time.Sleep(fence.DefaultIdleTimeout - time.Nanosecond)
				nothingPending(t, states)
				if keepAlive {
					time.Sleep(5 * time.Minute)
					nothingPending(t, states)
					return
				}
				s := next(t, states, time.Hour)
				if !errors.Is(s.Err, fence.ErrDisconnected) || !strings.Contains(s.Err.Error(), "idle") {
					t.Fatalf("state %+v, want ErrDisconnected for idleness", s)
				}
				if waited := time.Since(start); waited != fence.DefaultIdleTimeout {
					t.Errorf("dropped after %v, want %v", waited, fence.DefaultIdleTimeout)
				}
			})
		})
	}
}
