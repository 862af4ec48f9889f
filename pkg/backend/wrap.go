package backend

// Wrapped returns outer, a Backend that wraps inner (to log, time or hook
// its requests), with the optional interfaces inner implements,
// Snapshotter, LossNotifier and FirstCreator, and no others. Snapshot and
// Lost go to inner; CreateFirst goes to outer's own method when outer has
// one (it is a request, to be logged, timed or hooked like Create), else
// to inner.
func Wrapped(inner, outer Backend) Backend {
	var w struct {
		snap  Snapshotter
		loss  LossNotifier
		first FirstCreator
	}
	w.snap, _ = inner.(Snapshotter)
	w.loss, _ = inner.(LossNotifier)
	if f, ok := inner.(FirstCreator); ok {
		w.first = f
		if o, ok := outer.(FirstCreator); ok {
			w.first = o
		}
	}
	type plain struct{ Backend }
	type (
		snapshot struct{ Snapshotter }
		loss     struct{ LossNotifier }
		first    struct{ FirstCreator }
	)
	p := plain{outer}
	switch {
	case w.snap != nil && w.loss != nil && w.first != nil:
		return struct {
			plain
			snapshot
			loss
			first
		}{p, snapshot{w.snap}, loss{w.loss}, first{w.first}}
	case w.snap != nil && w.loss != nil:
		return struct {
			plain
			snapshot
			loss
		}{p, snapshot{w.snap}, loss{w.loss}}
	case w.snap != nil && w.first != nil:
		return struct {
			plain
			snapshot
			first
		}{p, snapshot{w.snap}, first{w.first}}
	case w.loss != nil && w.first != nil:
		return struct {
			plain
			loss
			first
		}{p, loss{w.loss}, first{w.first}}
	case w.snap != nil:
		return struct {
			plain
			snapshot
		}{p, snapshot{w.snap}}
	case w.loss != nil:
		return struct {
			plain
			loss
		}{p, loss{w.loss}}
	case w.first != nil:
		return struct {
			plain
			first
		}{p, first{w.first}}
	}
	return p
}
