package process

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Three sidecars on one PostgreSQL table, every one sampled as fast as it
// answers, while an operator edits the election's row by hand with psql
// (a new version, as a write through the table's identity column does):
//
//   - holder renamed to a replica that does not exist: a live holder
//     nobody renews; the leader steps down at its next renewal and a
//     replica takes over a lease after the edit, with the next token;
//   - holder emptied (not a release: the lease duration stays): the
//     standbys wait it out, and the leader takes the row back at its next
//     renewal with the next token;
//   - token lowered to 0: the leader starts a new term one above the
//     highest token it saw, never a lower one, and a replica logs that the
//     token went back;
//   - the row deleted: the trigger refuses, naming why, and the leader
//     leads on;
//   - holder renamed without a new version: the leader's next renewal,
//     whose compare-and-swap still matches, writes over the edit, and it
//     leads on with its token.
//
// Throughout, no claim of an older term comes after a newer term's first
// claim, and no token is claimed by two replicas.
func TestPostgresRecordEditedByHand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, edit       string
		newTerm, refused bool // the edit ends the leader's term; the table refuses it
	}{
		{"holder renamed", `UPDATE %s SET holder = 'ghost_0', version = DEFAULT WHERE name = 'leader-sidecar'`, true, false},
		{"holder emptied", `UPDATE %s SET holder = '', version = DEFAULT WHERE name = 'leader-sidecar'`, true, false},
		{"token lowered", `UPDATE %s SET transitions = 0, version = DEFAULT WHERE name = 'leader-sidecar'`, true, false},
		{"row deleted", `DELETE FROM %s WHERE name = 'leader-sidecar'`, false, true},
		{"holder renamed in place", `UPDATE %s SET holder = 'ghost_0' WHERE name = 'leader-sidecar'`, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			server := postgresServer.Server(t)
			table := "hand_edited_" + strings.ReplaceAll(c.name, " ", "_")
			all := startOnPostgres(t, table, 3)
			leader, token := sidecartest.AwaitSettledLeader(t, all, 10*time.Second)

			var log sidecartest.ClaimLog
			halt := log.SampleUntilHalted(all, func(s *sidecartest.Sidecar, err error) bool {
				t.Errorf("GET /leader of sidecar %d: %v", s.Pid(), err)
				return false
			})
			t.Cleanup(halt) // a failed check must not leave samplers asking dead sidecars
			log.AwaitSampled(t, token)
			db, err := sql.Open("pgx", server.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			edited := time.Now()
			_, err = db.ExecContext(t.Context(), fmt.Sprintf(c.edit, table))
			switch {
			case !c.refused && err != nil:
				t.Fatalf("the edit: %v", err)
			case c.refused && (err == nil || !strings.Contains(err.Error(), "never deleted")):
				t.Fatalf("the delete: %v, want it refused as never deleted", err)
			}

			var next *sidecartest.Sidecar
			var nextToken int64
			if c.newTerm {
				next = sidecartest.AwaitToken(t, all, token+1, 3*sidecartest.LeaseDuration)
				nextToken = token + 1
				log.AwaitSampled(t, nextToken)
			} else {
				next, nextToken = leader, token
				sidecartest.Steady(t, all, leader, token, sidecartest.LeaseDuration)
				var holder string
				if err := db.QueryRowContext(t.Context(), "SELECT holder FROM "+table+" WHERE name = 'leader-sidecar'").Scan(&holder); err != nil {
					t.Fatal(err)
				}
				if id := sidecartest.IdentityOf(t, leader); holder != id {
					t.Fatalf("after a lease the row names %q, want the leader %q", holder, id)
				}
			}
			took := time.Since(edited)
			sidecartest.AwaitSettled(t, all, next)
			halt()

			terms := log.Check(t)
			log.CheckOneHolderPerTerm(t)
			if c.name == "token lowered" {
				reported := false
				for _, s := range all {
					reported = reported || strings.Contains(s.Logs(), "the record's token is lower than one seen before")
				}
				if !reported {
					t.Error("no replica logged that the token went back")
				}
			}
			t.Logf("%s: token %d, then %d (the same replica: %v), %v after the edit; terms %v",
				c.name, token, nextToken, next == leader, took.Round(time.Millisecond), terms)
		})
	}
}
