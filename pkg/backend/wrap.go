package backend

// Wrapped returns outer, a Backend that wraps inner (to log, time or hook
// its requests), with the optional interfaces inner implements,
// Snapshotter and LossNotifier, passed through to inner, and no others.
// outer's own methods of those interfaces, if any, are hidden.
func Wrapped(inner, outer Backend) Backend {
	snap, isSnap := inner.(Snapshotter)
	loss, isLoss := inner.(LossNotifier)
	type plain struct{ Backend }
	switch {
	case isSnap && isLoss:
		return struct {
			plain
			Snapshotter
			LossNotifier
		}{plain{outer}, snap, loss}
	case isSnap:
		return struct {
			plain
			Snapshotter
		}{plain{outer}, snap}
	case isLoss:
		return struct {
			plain
			LossNotifier
		}{plain{outer}, loss}
	}
	return plain{outer}
}
