package process

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// neverLogged is the password in the tests' PostgreSQL URLs. The test
// server trusts local connections, so it is never asked for; it must not
// appear in any output either way.
const neverLogged = "pw-N3ver-Logged"

// startOnPostgres starts n sidecars on one PostgreSQL table, the URL in
// LEADER_SIDECAR_POSTGRES_URL, and waits until all serve.
func startOnPostgres(t *testing.T, table string, n int, extra ...string) []*sidecartest.Sidecar {
	t.Helper()
	url := strings.Replace(postgresServer.Server(t).URL("postgres"), "postgres@", "postgres:"+neverLogged+"@", 1)
	env := []string{"LEADER_SIDECAR_POSTGRES_URL=" + url}
	args := append([]string{"--backend", "postgres", "--postgres-table", table}, extra...)
	all := make([]*sidecartest.Sidecar, n)
	for i := range all {
		all[i] = sidecartest.Spawn(t, env, args...)
	}
	for _, s := range all {
		s.WaitServing()
	}
	return all
}

// Three sidecar processes on one PostgreSQL, every one sampled as fast as
// it answers throughout: one leads; on SIGTERM it hands off, through the
// release and NOTIFY, within a second with the token one higher; on
// SIGKILL of the next, the last takes over once the lease has run out,
// with the token one higher again. No claim of an older term is ever sent
// after a newer term has claimed, and no process prints the password.
func TestPostgresThreeSidecarsHandOffAndFailOver(t *testing.T) {
	t.Parallel()
	all := startOnPostgres(t, "three_sidecars", 3)
	handOff, failOver, terms := handOffThenFailOver(t, all, time.Second)
	for _, s := range all {
		if strings.Contains(s.Logs(), neverLogged) {
			t.Errorf("sidecar %d printed the password:\n%s", s.Pid(), s.Logs())
		}
	}
	t.Logf("hand-off after SIGTERM: %v; fail-over after SIGKILL: %v (lease %v); answers per term: %v",
		handOff.Round(time.Millisecond), failOver.Round(time.Millisecond), sidecartest.LeaseDuration, terms)
}

// handOffThenFailOver samples three sidecars that elect as fast as they
// answer, while the leader is stopped with SIGTERM (a standby must lead
// with the next token within handOffWithin) and the next is killed with
// SIGKILL (the last must lead with the next token once the lease has run
// out); it checks that no claim of an older term came after a newer
// term's, and returns how long each took and the claims per term.
func handOffThenFailOver(t *testing.T, all []*sidecartest.Sidecar, handOffWithin time.Duration) (handOff, failOver time.Duration, terms map[sidecartest.Term]int) {
	t.Helper()
	first, token := sidecartest.AwaitSettledLeader(t, all, 15*time.Second)
	var log sidecartest.ClaimLog
	var mu sync.Mutex
	gone := map[*sidecartest.Sidecar]bool{}
	halt := log.SampleUntilHalted(all, func(s *sidecartest.Sidecar, err error) bool {
		mu.Lock()
		defer mu.Unlock()
		if !gone[s] {
			t.Errorf("GET /leader of a live sidecar: %v", err)
		}
		return false
	})
	log.AwaitSampled(t, token)

	mu.Lock()
	gone[first] = true
	mu.Unlock()
	signalled := time.Now()
	first.Signal(syscall.SIGTERM)
	second, secondToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, first), sidecartest.LeaseDuration)
	handOff = time.Since(signalled)
	if code := first.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit status %d, want 0", code)
	}
	if secondToken != token+1 {
		t.Fatalf("after the hand-off: token %d, want %d", secondToken, token+1)
	}
	if handOff >= handOffWithin {
		t.Fatalf("hand-off took %v, want under %v", handOff, handOffWithin)
	}
	log.AwaitSampled(t, secondToken)

	mu.Lock()
	gone[second] = true
	mu.Unlock()
	killed := time.Now()
	second.Signal(syscall.SIGKILL)
	second.WaitExit(10 * time.Second)
	rest := sidecartest.Without(sidecartest.Without(all, first), second)
	_, thirdToken := sidecartest.AwaitLeader(t, rest, 3*sidecartest.LeaseDuration)
	failOver = time.Since(killed)
	if thirdToken != secondToken+1 {
		t.Fatalf("after the kill: token %d, want %d", thirdToken, secondToken+1)
	}
	if least := sidecartest.LeaseDuration - sidecartest.RenewInterval; failOver < least {
		t.Fatalf("a standby took over %v after the kill, before the lease could have run out (%v)", failOver, least)
	}
	log.AwaitSampled(t, thirdToken)
	time.Sleep(200 * time.Millisecond) // and a late claim of an earlier term
	halt()
	terms = log.Check(t)
	if len(terms) != 3 {
		t.Fatalf("answers covered terms %v, want the three", terms)
	}
	return handOff, failOver, terms
}

// A server that cannot be reached, a database or a role it does not have:
// each stops the sidecar with exit status 1 and one error line that names
// the flag, the server and what is wrong, never the password.
func TestPostgresBadServerIsOneLineWithoutThePassword(t *testing.T) {
	t.Parallel()
	socketDir := postgresServer.Server(t).SocketDir
	for _, c := range []struct {
		name, url string
		want      []string
	}{
		{"unreachable", "postgres://app:" + neverLogged + "@/orders?host=" + t.TempDir() + "&connect_timeout=2",
			[]string{"app@unix:", "failed to connect"}},
		{"no such database", "postgres://postgres:" + neverLogged + "@/no_such_db?host=" + socketDir,
			[]string{"postgres@unix:", "no_such_db", "does not exist (SQLSTATE 3D000)"}},
		{"no such role", "postgres://no_such_role:" + neverLogged + "@/postgres?host=" + socketDir,
			[]string{"no_such_role@unix:", "does not exist (SQLSTATE 28000)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := sidecartest.Spawn(t, nil, "--backend", "postgres", "--postgres-url", c.url)
			if code := s.WaitExit(30 * time.Second); code != 1 {
				t.Fatalf("exit status %d, want 1; logs:\n%s", code, s.Logs())
			}
			logs := s.Logs()
			if strings.Contains(logs, neverLogged) {
				t.Fatalf("the sidecar printed the password:\n%s", logs)
			}
			var errors []string
			for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
				if strings.Contains(line, `"level":"ERROR"`) {
					errors = append(errors, line)
				}
			}
			if len(errors) != 1 {
				t.Fatalf("%d error lines, want one:\n%s", len(errors), logs)
			}
			for _, w := range append([]string{"--postgres-url: postgres: open"}, c.want...) {
				if !strings.Contains(errors[0], w) {
					t.Fatalf("the error line\n%s\ndoes not say %q", errors[0], w)
				}
			}
		})
	}
}

// The README's PostgreSQL section, as written: psql creates the user and
// the database, then three sidecars in two "machines" (each with the
// environment its export line sets, the server's address swapped for the
// test server's socket, and a free port) elect through the one database:
// one leads and all name it; Ctrl-C (SIGINT) on it hands over within a
// second with the token one higher; kill -9 of the next leaves the last
// to take over once the lease has run out.
func TestReadmePostgresThreeProcessesOnTwoMachines(t *testing.T) {
	t.Parallel()
	server := postgresServer.Server(t)
	lines := blockStarting(t, shellBlocks(t, "README.md"), `psql -c "CREATE USER leader PASSWORD 'change-me'" -c "CREATE DATABASE leader OWNER leader"`)
	psql := exec.Command("sh", "-c", lines[0])
	psql.Env = []string{"PATH=" + os.Getenv("PATH"), "PGHOST=" + server.SocketDir, "PGPORT=5432", "PGUSER=postgres", "PGDATABASE=postgres"}
	if out, err := psql.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", lines[0], err, out)
	}
	var env []string
	var all []*sidecartest.Sidecar
	machines := 0
	for _, line := range lines[1:] {
		switch {
		case strings.HasPrefix(line, "# machine "):
			machines++
			env = nil
		case strings.HasPrefix(line, "export "):
			for _, kv := range strings.Fields(strings.TrimPrefix(line, "export ")) {
				kv = strings.Replace(kv, "@db.example:5432/leader", "@/leader?host="+server.SocketDir+"&port=5432", 1)
				env = append(env, kv)
			}
		case strings.HasPrefix(line, "./sidecar "):
			var args []string
			fields := strings.Fields(line)[1:]
			for i := 0; i < len(fields); i++ {
				if fields[i] == "--http-address" {
					i++ // a free port instead: both "machines" are this one
					continue
				}
				args = append(args, fields[i])
			}
			all = append(all, sidecartest.Spawn(t, env, args...))
		default:
			t.Fatalf("the README's PostgreSQL block has a line the test does not know: %q", line)
		}
	}
	if machines != 2 || len(all) != 3 {
		t.Fatalf("the README's block starts %d sidecars on %d machines, want 3 on 2", len(all), machines)
	}
	for _, s := range all {
		s.WaitServing()
	}
	leader, token := sidecartest.AwaitLeader(t, all, 10*time.Second)
	// A standby names the holder it read last: all agree within moments.
	holder := sidecartest.IdentityOf(t, leader)
	sidecartest.WaitTrue(t, "every replica names the leader the holder", 10*time.Second, func() bool {
		for _, s := range all {
			if st, err := s.Leader(); err != nil || st.Holder != holder {
				return false
			}
		}
		return true
	})
	if ls, _ := sidecartest.Leaders(t, all); len(ls) != 1 || ls[0] != leader {
		t.Fatalf("%d leaders once all named %q, want that one alone", len(ls), holder)
	}
	stopped := time.Now()
	leader.Signal(syscall.SIGINT)
	next, nextToken := sidecartest.AwaitLeader(t, sidecartest.Without(all, leader), sidecartest.LeaseDuration)
	if took := time.Since(stopped); took > time.Second || nextToken != token+1 {
		t.Fatalf("after Ctrl-C: token %d after %v, want %d within a second", nextToken, took, token+1)
	}
	if code := leader.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("Ctrl-C: exit status %d, want 0", code)
	}
	killed := time.Now()
	next.Signal(syscall.SIGKILL)
	rest := sidecartest.Without(sidecartest.Without(all, leader), next)
	_, lastToken := sidecartest.AwaitLeader(t, rest, 3*sidecartest.LeaseDuration)
	if took := time.Since(killed); took < sidecartest.LeaseDuration-sidecartest.RenewInterval || lastToken != nextToken+1 {
		t.Fatalf("after kill -9: token %d after %v, want %d once the lease has run out", lastToken, took, nextToken+1)
	}
}

// sidecar lock on PostgreSQL: two locks started at once on one election
// both run their command, one after the other (the journal never shows a
// start inside the other's run), each with its own token, the second
// higher, and both exit with their command's status 0.
func TestPostgresLockRunsOneCommandAtATime(t *testing.T) {
	t.Parallel()
	j := sidecartest.NewJournal(t)
	script := j.Line("start") + "; sleep 0.3; " + j.Line("end")
	env := []string{"PATH=" + os.Getenv("PATH"), "LEADER_SIDECAR_POSTGRES_URL=" + postgresServer.Server(t).URL("postgres")}
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(sidecartest.Binary(t), lockArgs(script, "--backend", "postgres", "--postgres-table", "lock_jobs", "--lease-name", "nightly")...)
		cmd.Env = env
		out := &sidecartest.LockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("lock %d:\n%s", cmd.Process.Pid, out.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("sidecar lock: %v, want exit status 0", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("sidecar lock did not finish within 30s")
		}
	}
	var words []string
	var tokens []int64
	for _, e := range j.Entries(t) {
		words = append(words, e.Word)
		if e.Word == "start" {
			tokens = append(tokens, e.Token)
		}
	}
	if strings.Join(words, " ") != "start end start end" || len(tokens) != 2 || tokens[1] <= tokens[0] || tokens[0] < 1 {
		t.Fatalf("journal %v with tokens %v; want two runs one after the other, the second with a higher token", words, tokens)
	}
}

// TestPostgresResetReleasesAnAbandonedRecord: the leader and its standby
// are killed (no release), so the record names a holder that is gone.
// sidecar reset --backend postgres waits out its lease and writes the
// release, token kept, without printing the password; a sidecar started
// afterwards leads at once with the next token.
func TestPostgresResetReleasesAnAbandonedRecord(t *testing.T) {
	t.Parallel()
	all := startOnPostgres(t, "reset_abandoned", 2, "--lease-name", "billing")
	_, token := sidecartest.AwaitLeader(t, all, 10*time.Second)
	for _, s := range all {
		s.Signal(syscall.SIGKILL)
		s.WaitExit(10 * time.Second)
	}

	url := strings.Replace(postgresServer.Server(t).URL("postgres"), "postgres@", "postgres:"+neverLogged+"@", 1)
	began := time.Now()
	cmd := exec.Command(sidecartest.Binary(t), "reset", "--backend", "postgres", "--postgres-table", "reset_abandoned", "--lease-name", "billing",
		"--lease-duration", sidecartest.LeaseDuration.String())
	cmd.Args = append(cmd.Args, "--postgres-url", url)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "released at token") {
		t.Fatalf("sidecar reset --backend postgres: %v\n%s", err, out)
	}
	if strings.Contains(string(out), neverLogged) {
		t.Fatalf("sidecar reset printed the password:\n%s", out)
	}
	if took := time.Since(began); took < sidecartest.LeaseDuration {
		t.Fatalf("reset released after %v, before the holder's lease of %v could pass", took, sidecartest.LeaseDuration)
	}
	again := startOnPostgres(t, "reset_abandoned", 1, "--lease-name", "billing")
	if _, next := sidecartest.AwaitLeader(t, again, sidecartest.LeaseDuration-500*time.Millisecond); next != token+1 {
		t.Fatalf("token after the reset %d, want %d", next, token+1)
	}
}

// TestPostgresStatus runs sidecar status --backend postgres on the table
// two sidecars elect through: the election shows with the leader as its
// holder and its token, held; the password is never printed; a table that
// does not exist is an error that names it, and status does not create it.
func TestPostgresStatus(t *testing.T) {
	t.Parallel()
	all := startOnPostgres(t, "status_table", 2, "--lease-name", "billing")
	leader, token := sidecartest.AwaitLeader(t, all, 10*time.Second)
	url := strings.Replace(postgresServer.Server(t).URL("postgres"), "postgres@", "postgres:"+neverLogged+"@", 1)
	status := func(table string, args ...string) (string, error) {
		cmd := exec.Command(sidecartest.Binary(t), append([]string{"status", "--backend", "postgres", "--postgres-url", url,
			"--postgres-table", table}, args...)...)
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), neverLogged) {
			t.Fatalf("sidecar status printed the password:\n%s", out)
		}
		return string(out), err
	}
	out, err := status("status_table", "-o", "json")
	if err != nil {
		t.Fatalf("sidecar status --backend postgres: %v\n%s", err, out)
	}
	var list struct {
		Elections []struct {
			Name, Holder, State string
			Token               int64
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(list.Elections) != 1 || list.Elections[0].Name != "billing" || list.Elections[0].Holder != sidecartest.IdentityOf(t, leader) ||
		list.Elections[0].Token != token || list.Elections[0].State != "held" {
		t.Fatalf("status shows %+v; want billing held by %s at token %d", list.Elections, sidecartest.IdentityOf(t, leader), token)
	}
	for range 2 { // the second read proves the first created nothing
		if out, err := status("no_such_table"); err == nil || !strings.Contains(out, "no_such_table does not exist") {
			t.Fatalf("status of a table that does not exist: %v\n%s", err, out)
		}
	}
}

// A sidecar on PostgreSQL exports what every backend's does: its build
// info names the backend, it leads with its token, and its requests to
// the store are timed by operation.
func TestPostgresMetrics(t *testing.T) {
	t.Parallel()
	s := sidecartest.Spawn(t, nil, "--backend", "postgres", "--postgres-url", postgresServer.Server(t).DSN,
		"--postgres-table", "with_metrics", "--ops-address", "127.0.0.1:0")
	s.WaitServing()
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 10*time.Second)
	resp, err := http.Get("http://" + s.Listener("ops") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %v %v", resp.Status, err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^leader_sidecar_build_info\{.*backend="postgres".*\} 1$`),
		regexp.MustCompile(`(?m)^leader_sidecar_is_leader(\{[^}]*\})? 1$`),
		regexp.MustCompile(fmt.Sprintf(`(?m)^leader_sidecar_token(\{[^}]*\})? %d$`, token)),
		regexp.MustCompile(`(?m)^leader_sidecar_store_request_duration_seconds_count\{.*operation="update",result="ok"\} [1-9]`),
	} {
		if !want.Match(body) {
			t.Errorf("/metrics has no line matching %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
