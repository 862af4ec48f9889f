//go:build !linux

package sqlite

// osStatfs cannot tell filesystem types apart outside Linux: every path
// counts as local, and the network-filesystem refusal does not apply.
func osStatfs(string) (uint32, error) { return 0, nil }
