package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// rssKiB is VmRSS from /proc/<pid>/status, or -1.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// privateKiB is the memory only pid maps (Private_Clean + Private_Dirty of
// /proc/<pid>/smaps_rollup): what one more process of the same binary adds
// on a machine that already runs one. -1 if it cannot be read.
func privateKiB(pid int) int64 {
	return smapsRollupKiB(pid, "Private_Clean:", "Private_Dirty:")
}

// anonKiB is the anonymous part of pid's RSS (Anonymous of
// /proc/<pid>/smaps_rollup): the Go heap, stacks and runtime structures,
// and the binary's data pages the process wrote to. The rest of the RSS is
// file-backed: pages of the binary read from the page cache. -1 if it
// cannot be read.
func anonKiB(pid int) int64 {
	return smapsRollupKiB(pid, "Anonymous:")
}

// smapsRollupKiB is the sum of fields of /proc/<pid>/smaps_rollup, in KiB,
// or -1 if it cannot be read.
func smapsRollupKiB(pid int, fields ...string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return -1
	}
	var sum int64
	for _, line := range strings.Split(string(b), "\n") {
		for _, field := range fields {
			if v, ok := strings.CutPrefix(line, field); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					return -1
				}
				sum += n
			}
		}
	}
	return sum
}

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTicks = 100

// cpuTime is the CPU time pid has used, user and system, from
// /proc/<pid>/stat (fields 14 and 15, after the parenthesised name).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[end+1:]) // fields[0] is field 3, the state
	if end < 0 || len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// loadAverage is the 1, 5 and 15 minute load averages of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
