package postgres

import (
	"context"
	"strconv"
)

// standbys reads the server's synchronous_standby_names and how many
// physical standbys stream from it now: the rows of pg_stat_replication
// (every role sees them, if not their details) that are not the
// walsenders of logical replication slots.
const standbys = `SELECT current_setting('synchronous_standby_names'),
	(SELECT count(*) FROM pg_stat_replication r WHERE NOT EXISTS (
		SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical'))`

// checkReplication warns in the log when the server streams its WAL to
// standbys none of which is synchronous (a failover to one of them can
// lose the last record writes, and tokens then repeat), and when it names
// synchronous standbys of which none streams (every record write then
// waits until one does). It sees only the standbys streaming now: one
// restoring from a WAL archive, or disconnected at the moment, escapes it.
// It never fails Open: a server that does not answer (a pooler, a
// restricted role) is noted at debug level.
func (t *Table) checkReplication(ctx context.Context) {
	rows, err := t.pool.query(ctx, standbys)
	if err != nil || len(rows) != 1 || len(rows[0]) != 2 {
		t.log.Debug("could not read the server's replication", "server", t.where, "error", t.scrub(err))
		return
	}
	names := string(rows[0][0])
	streaming, _ := strconv.Atoi(string(rows[0][1]))
	switch {
	case names == "" && streaming > 0:
		t.log.Warn("PostgreSQL streams to asynchronous standbys only: a failover to one can lose the last record writes, "+
			"and a token can then be handed out twice; name the standby to promote in synchronous_standby_names "+
			"(the record writes ask for synchronous_commit = on), or raise transitions after every failover",
			"server", t.where, "table", t.tableName, "standbys", streaming)
	case names != "" && streaming == 0:
		t.log.Warn("PostgreSQL names synchronous standbys but none streams: every record write waits until one does, "+
			"so no term can start or be renewed meanwhile",
			"server", t.where, "table", t.tableName, "synchronous_standby_names", names)
	}
}

// scrub is err's text without the password, "" for nil.
func (t *Table) scrub(err error) string {
	if err == nil {
		return ""
	}
	return t.fail("check", "", err).Error()
}
