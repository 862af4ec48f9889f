package kubetest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestPIDsNameTheRunningProcesses starts an Env and finds its API server
// and etcd, then the API server again after a restart, as a new process.
func TestPIDsNameTheRunningProcesses(t *testing.T) {
	e, err := Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer e.Stop()
	api, err := e.APIServerPID()
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := e.EtcdPID()
	if err != nil {
		t.Fatal(err)
	}
	for pid, name := range map[int]string{api: "kube-apiserver", etcd: "etcd"} {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != name {
			t.Fatalf("pid %d is %q (%v), want %s", pid, comm, err, name)
		}
	}

	server := e.Env.ControlPlane.GetAPIServer()
	if err := server.Stop(); err != nil {
		t.Fatalf("stopping the API server: %v", err)
	}
	if pid, err := e.APIServerPID(); err == nil {
		t.Fatalf("an API server (pid %d) found while it is stopped", pid)
	}
	if err := server.Start(); err != nil {
		t.Fatalf("starting the API server again: %v", err)
	}
	again, err := e.APIServerPID()
	if err != nil || again == api {
		t.Fatalf("after a restart: pid %d (%v), want a new one (was %d)", again, err, api)
	}
}
