//go:build e2ehooks && linux

package supervise

import (
	"fmt"
	"os"
	"time"
)

// This file is compiled only with -tags e2ehooks, into the binary the
// end-to-end tests build for the scenarios they cannot time from outside.
// A released binary has none of it (testhooks_off.go).

// guardianPauseEnv, set to a point of the guardian's start-up
// ("before-handler": before it catches its parent-death signal;
// "before-start": after it checked its parent, before it starts CMD),
// makes the guardian say so on stderr ("e2e hook: guardian paused
// <point>") and pause there for guardianPause: a lock killed in that
// window is the race the guardian must not miss.
const guardianPauseEnv = "SIDECAR_E2E_GUARDIAN_PAUSE"

const guardianPause = 300 * time.Millisecond

func guardianPauseAt(point string) {
	if os.Getenv(guardianPauseEnv) == point {
		fmt.Fprintf(os.Stderr, "e2e hook: guardian paused %s\n", point)
		time.Sleep(guardianPause)
	}
}
