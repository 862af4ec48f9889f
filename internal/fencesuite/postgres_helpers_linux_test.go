//go:build linux

package fencesuite_test

import (
	"os"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
)

func init() { postgresServer.start = startPostgresLinux }

// startPostgresLinux starts the throwaway server of package pgtest.
func startPostgresLinux() (*runningServer, error) {
	s, err := pgtest.Start()
	if err != nil {
		return nil, err
	}
	return &runningServer{addr: s.DSN, stop: s.Stop}, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
