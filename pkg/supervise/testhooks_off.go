//go:build !(e2ehooks && linux)

package supervise

// guardianPauseAt does nothing: the hooks of the end-to-end tests exist
// only in binaries built with -tags e2ehooks (testhooks.go).
func guardianPauseAt(string) {}
