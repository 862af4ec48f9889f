//go:build e2ehooks && linux

package main

import (
	"context"
	"os"
	"runtime"
	"syscall"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// This file is compiled only with -tags e2ehooks, into the binary the
// end-to-end tests build for the scenarios they cannot time from outside.
// A released binary has none of it (testhooks_off.go).

// stopAfterAcceptEnv, set to 1, makes the sidecar stop itself with SIGSTOP
// the moment its accept of a hand-off offer has been written: a target
// that dies mid-way, before the leader transfers and before it can renew.
const stopAfterAcceptEnv = "SIDECAR_E2E_STOP_AFTER_ACCEPT"

// withTestHooks wraps b with the hooks the environment asks for; it keeps
// the optional interfaces of b the election uses.
func withTestHooks(b backend.Backend) backend.Backend {
	if os.Getenv(stopAfterAcceptEnv) != "1" {
		return b
	}
	h := &stopAfterAccept{Backend: b}
	return backend.Wrapped(b, h)
}

type stopAfterAccept struct{ backend.Backend }

func (s *stopAfterAccept) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	v, err := s.Backend.Update(ctx, prev, rec)
	if err == nil && rec.Handoff.Phase == backend.HandoffAccept {
		stopNow()
	}
	return v, err
}

// stopNow stops the process before the calling goroutine goes on. A
// SIGSTOP sent to the process is taken by whichever thread the kernel
// picks, and the others may run on for milliseconds meanwhile; one sent to
// the calling thread stops it on its way back from the system call, and
// the whole process with it.
func stopNow() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
