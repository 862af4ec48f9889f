package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// APIServerPID is the process id of this Env's kube-apiserver, found
// afresh at each call (a restarted API server is a new process). It reads
// /proc, so it works on Linux only.
func (e *Env) APIServerPID() (int, error) {
	return childPID("kube-apiserver", "--cert-dir="+filepath.Join(e.dir, "certs"))
}

// EtcdPID is the process id of this Env's etcd; see APIServerPID.
func (e *Env) EtcdPID() (int, error) {
	return childPID("etcd", "--data-dir="+filepath.Join(e.dir, "etcd"))
}

// childPID finds the child of this process named name whose command line
// holds arg.
func childPID(name, arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("finding %s: %w", name, err)
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, comm, ok := parentAndName(pid); !ok || parent != self || comm != name {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains("\x00"+string(cmdline), "\x00"+arg+"\x00") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process started by this one (pid %d) with %s", name, self, arg)
}

// parentAndName reads the parent pid and the command name of pid from
// /proc/<pid>/stat ("pid (comm) state ppid ...").
func parentAndName(pid int) (parent int, comm string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, "", false
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return 0, "", false
	}
	parent, err = strconv.Atoi(fields[1])
	return parent, s[open+1 : end], err == nil
}
