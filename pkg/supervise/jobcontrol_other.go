//go:build !unix

package supervise

import "os"

// NotifyJobControl delivers nothing: there is no job control.
func NotifyJobControl() (signals <-chan os.Signal, stop func()) {
	return nil, func() {}
}

// PassJobControl passes sig on to CMD.
func (c *Child) PassJobControl(sig os.Signal) { c.Signal(sig) }
