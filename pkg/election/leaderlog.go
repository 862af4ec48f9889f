package election

// logLeaderChangeLocked logs, in one Info line, who leads now that the
// record has changed from before to e.view, when that changed: another
// holder, a new term (token) of a holder, or no holder at all (released,
// or the record missing). Renewals change neither, so a standby logs
// nothing while the same leader renews. This candidate's own terms are
// logged as "became leader" instead, and its own release as "released the
// lease".
func (e *Elector) logLeaderChangeLocked(before view) {
	now := e.view
	holder := now.holder()
	if holder == e.cfg.Identity || (holder == "" && now.present && before.holder() == e.cfg.Identity) {
		return
	}
	if before.holder() == holder && before.present == now.present &&
		(holder == "" || before.rec.Transitions == now.rec.Transitions) {
		return
	}
	switch {
	case !now.present:
		e.log.Info("leader changed: the record is missing", "holder", "")
	case holder == "":
		e.log.Info("leader changed: released, nobody leads", "holder", "", "token", now.rec.Transitions)
	default:
		e.log.Info("leader changed", "holder", holder, "token", now.rec.Transitions)
	}
}
