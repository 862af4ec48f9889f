package backend

// Notify delivers a coalesced signal on ch, a channel with a buffer of one:
// if a signal is already pending, the new one merges with it. It never blocks.
func Notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
