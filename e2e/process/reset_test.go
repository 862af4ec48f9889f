package process

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// An election moved to a new store carries its token there: `sidecar
// reset --min-token 41` on the new store, before its first sidecar,
// creates the record held by "reset" for the lease; the first sidecar
// waits that out and leads with token 42, above every token the old store
// issued, so the guards accept it. On a new SQLite file and on a new
// PostgreSQL table.
func TestResetCarriesTheTokenIntoANewStore(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			var where, env []string
			switch store {
			case "sqlite":
				where = []string{"--sqlite-path", sidecartest.DBPath(t)}
			case "postgres":
				where = []string{"--backend", "postgres", "--postgres-table", "moved_here"}
				env = []string{"LEADER_SIDECAR_POSTGRES_URL=" + postgresServer.Server(t).URL("postgres")}
			}
			cmd := exec.Command(sidecartest.Binary(t), append(append([]string{"reset"}, where...),
				"--min-token", "41", "--lease-duration", sidecartest.LeaseDuration.String())...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "created at token 41") {
				t.Fatalf("sidecar reset --min-token 41: %v\n%s", err, out)
			}
			began := time.Now()
			s := sidecartest.Spawn(t, env, where...)
			s.WaitServing()
			_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 3*sidecartest.LeaseDuration)
			if token != 42 {
				t.Fatalf("the first sidecar on the new store leads with token %d, want 42", token)
			}
			t.Logf("%s: reset said %q; the first sidecar led after %v with token %d", store, strings.TrimSpace(string(out)),
				time.Since(began).Round(time.Millisecond), token)
		})
	}
}
