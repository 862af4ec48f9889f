// Package e2e holds end-to-end tests: the real sidecar binary, built once,
// run as separate OS processes that contend through one real SQLite file,
// and driven with real signals (SIGKILL, SIGTERM, SIGSTOP/SIGCONT).
package e2e
