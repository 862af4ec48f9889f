//go:build !linux

package pgtest

import "errors"

var errLinuxOnly = errors.New("the PostgreSQL tests start their servers on Linux only")

func start() (*Server, error) { return nil, errLinuxOnly }

func startPair(Replication) (*Pair, error) { return nil, errLinuxOnly }

func startPooler(*Server, int) (*Pooler, error) { return nil, errLinuxOnly }
