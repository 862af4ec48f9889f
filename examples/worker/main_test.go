package main

import (
	"context"
	"errors"
	"testing"
)

// A worker told to stop can see its context done while the term derived
// from it is not cancelled yet: the term's error is then nil, and the
// reason logged must come from the stop, not from a nil error.
func TestTermOverReasonWhenTheStopIsSeenBeforeTheTermEnds(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("signal: terminated"))
	if got, want := termOverReason(ctx, nil), "stopping: signal: terminated"; got != want {
		t.Fatalf("termOverReason(stopped, nil) = %q, want %q", got, want)
	}
	if got, want := termOverReason(ctx, errors.New("fence: leadership lost")), "fence: leadership lost"; got != want {
		t.Fatalf("termOverReason(stopped, lost) = %q, want %q", got, want)
	}
}
