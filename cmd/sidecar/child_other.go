//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// Without process groups, signals reach CMD alone.

func supervisedProcess(*exec.Cmd) {}

func signalGroup(p *os.Process, sig os.Signal) {
	if p.Signal(sig) != nil {
		_ = p.Kill()
	}
}

func killGroup(*os.Process) {}

func exitStatus(ps *os.ProcessState) int {
	return ps.ExitCode()
}
