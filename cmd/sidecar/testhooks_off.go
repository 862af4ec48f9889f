//go:build !(e2ehooks && linux)

package main

import "github.com/leader-sidecar/leader-sidecar/pkg/backend"

// withTestHooks returns b: the hooks of the end-to-end tests exist only
// in binaries built with -tags e2ehooks (testhooks.go).
func withTestHooks(b backend.Backend) backend.Backend { return b }
