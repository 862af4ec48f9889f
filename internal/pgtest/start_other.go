//go:build !linux

package pgtest

import "errors"

func start() (*Server, error) {
	return nil, errors.New("the PostgreSQL tests start their server on Linux only")
}
