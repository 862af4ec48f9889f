package process

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// The copy-paste clients of examples/clients in shard mode, run as an
// application runs them, against two real sidecars on one SQLite file.

// clientShards is the group's size in these tests: two replicas hold two
// shards each once spread, so the second one's start moves two.
const clientShards = 4

// clientShardArgs: a drain waits 60s for the application, far longer than
// the test, so a shard that moves was released by a client's
// acknowledgement.
func clientShardArgs() []string {
	return []string{"--shards", strconv.Itoa(clientShards), "--shard-rebalance-delay", "1s", "--shard-drain-timeout", "60s"}
}

// heldLines are the lines "<shard> <token> <state> <identity>" that a
// client's --shards prints for st.
func heldLines(st httpapi.ShardsJSON) []string {
	var out []string
	for _, h := range st.Held {
		out = append(out, fmt.Sprintf("%d %d %s %s", h.Shard, h.Token, h.State, st.Identity))
	}
	return out
}

// sameHeld reports whether a and b hold the same shards with the same
// tokens and states (validUntil aside).
func sameHeld(a, b httpapi.ShardsJSON) bool {
	return a.Identity == b.Identity && slices.Equal(heldLines(a), heldLines(b))
}

// shardsOf asks s GET /shards, failing t if it cannot answer.
func shardsOf(t *testing.T, s *sidecartest.Sidecar) httpapi.ShardsJSON {
	t.Helper()
	st, err := s.Shards()
	if err != nil {
		t.Fatalf("GET /shards of sidecar %d: %v", s.Pid(), err)
	}
	return st
}

// awaitShards waits until s's GET /shards satisfies cond and returns it.
func awaitShards(t *testing.T, s *sidecartest.Sidecar, what string, within time.Duration, cond func(httpapi.ShardsJSON) bool) httpapi.ShardsJSON {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := s.Shards()
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar %d: %s: not after %v; GET /shards: %+v, %v", s.Pid(), what, within, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkClientShards runs c --shards (and --shard-selector if selector)
// against s and fails unless they print what s's GET /shards says, asked
// before and after them (and unchanged between).
func checkClientShards(t *testing.T, c appClient, s *sidecartest.Sidecar, selector bool) httpapi.ShardsJSON {
	t.Helper()
	for range 3 {
		before := shardsOf(t, s)
		out, errOut, code := c.run(t, "http://"+s.Addr(), "--shards")
		sel, selErr, selCode := before.ShardSelector+"\n", "", 0
		if selector {
			sel, selErr, selCode = c.run(t, "http://"+s.Addr(), "--shard-selector")
		}
		if after := shardsOf(t, s); !sameHeld(before, after) || before.ShardSelector != after.ShardSelector {
			continue // a change between: ask again
		}
		if want := strings.Join(heldLines(before), "\n") + "\n"; code != 0 || out != want {
			t.Fatalf("%s --shards: exit %d, stdout %q, stderr %q; want 0 and %q", c.name, code, out, errOut, want)
		}
		if want := before.ShardSelector + "\n"; selCode != 0 || sel != want {
			t.Fatalf("%s --shard-selector: exit %d, stdout %q, stderr %q; want 0 and %q", c.name, selCode, sel, selErr, want)
		}
		return before
	}
	t.Fatalf("sidecar %d's shards kept changing", s.Pid())
	return httpapi.ShardsJSON{}
}

// lineProc is a client process that runs beside the test, whose stdout is
// read line by line as it comes.
type lineProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr sidecartest.LockedBuffer

	read chan struct{} // closed once stdout has ended

	mu    sync.Mutex
	lines []string
	ended bool
}

// startLines starts argv with env (and PATH), failing t if it cannot; the
// process is killed when t ends.
func startLines(t *testing.T, name string, env []string, argv ...string) *lineProc {
	t.Helper()
	p := &lineProc{name: name, cmd: exec.Command(argv[0], argv[1:]...)}
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	p.read = make(chan struct{})
	go func() {
		defer close(p.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.ended = true
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.read
		_ = p.cmd.Wait()
	})
	return p
}

// exitCode waits for the process to exit and returns its exit status,
// failing t after within.
func (p *lineProc) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.read:
	case <-time.After(within):
		t.Fatalf("%s still running after %v; printed %q", p.name, within, p.Lines())
	}
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.ExitCode()
}

// Lines are the lines printed so far.
func (p *lineProc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

// await waits until the lines printed so far satisfy cond, failing t
// after within or if the process ends first.
func (p *lineProc) await(t *testing.T, what string, within time.Duration, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p.mu.Lock()
		lines, ended := slices.Clone(p.lines), p.ended
		p.mu.Unlock()
		if cond(lines) {
			return lines
		}
		if ended || time.Now().After(deadline) {
			t.Fatalf("%s: %s: not after %v (ended: %v); printed %q, stderr %q", p.name, what, within, ended, lines, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasAll reports whether lines contain every line of want.
func hasAll(want []string) func([]string) bool {
	return func(lines []string) bool {
		for _, w := range want {
			if !slices.Contains(lines, w) {
				return false
			}
		}
		return true
	}
}

// guardScripts are, for the clients that can be imported, a program that
// uses the client as a library with its ShardGuard, as an application
// of replica A would: it reads GET /shards of A (its first argument
// after the client's directory) and prints "term <shard> <token> <state>
// <holder> <valid> <within> <resource>" for each shard held (within: its
// validUntil is after now by at most the lease, the second argument, in
// seconds), then writes each
// shard's data through the guard with its term, printing "accepted" or
// "refused", the shard, the token and the holder. Then it reads from
// stdin the URL of replica B, to which some of A's shards have moved since,
// writes with B's terms, then with A's first terms again (a paused or
// slow replica's late writes), then with B's first term's token under
// another holder, x_forged, and prints, for each shard, "data <shard>
// <token> <holder>": the term of the last write the guard let through.
// leaseSeconds is sidecartest.LeaseDuration in seconds, for guardScripts.
var leaseSeconds = strconv.FormatFloat(sidecartest.LeaseDuration.Seconds(), 'f', -1, 64)

var guardScripts = map[string]func(t *testing.T, dir, url string) *exec.Cmd{
	"python": func(t *testing.T, dir, url string) *exec.Cmd {
		script := `import sys, time
sys.path.insert(0, sys.argv[1])
import leader
guard, data = leader.ShardGuard(), {}
def write(t):
    def store():
        data[t.shard] = (t.token, t.holder)
    try:
        guard.do(t, store)
        print("accepted", t.shard, t.token, t.holder, flush=True)
    except leader.StaleTokenError:
        print("refused", t.shard, t.token, t.holder, flush=True)
a = leader.shards(sys.argv[2])
for t in a.held:
    within = 0 < t.valid_until - time.time() <= float(sys.argv[3])
    print("term", t.shard, t.token, t.state, t.holder, t.valid(), within, t.resource, flush=True)
for t in a.held:
    write(t)
b = leader.shards(sys.stdin.readline().strip())
for t in b.held + a.held + [b.held[0]._replace(holder="x_forged")]:
    write(t)
for shard in sorted(data):
    print("data", shard, *data[shard], flush=True)
`
		cmd := exec.Command(python3(t), "-c", script, dir, url, leaseSeconds)
		cmd.Env = []string{"PYTHONDONTWRITEBYTECODE=1"} // no __pycache__ in the tree
		return cmd
	},
	"node": func(_ *testing.T, dir, url string) *exec.Cmd {
		script := `import { createInterface } from 'node:readline';
const [, module, url, lease] = process.argv;
const { shards, ShardGuard, StaleTokenError } = await import(module);
const guard = new ShardGuard();
const data = new Map();
const write = async (t) => {
  try {
    await guard.do(t, async () => { data.set(t.shard, [t.token, t.holder]); });
    console.log('accepted', t.shard, t.token, t.holder);
  } catch (e) {
    if (!(e instanceof StaleTokenError)) throw e;
    console.log('refused', t.shard, t.token, t.holder);
  }
};
const a = await shards(url);
for (const t of a.held) {
  const left = t.validUntil - Date.now();
  console.log('term', t.shard, t.token, t.state, t.holder, t.valid() ? 'True' : 'False', 0 < left && left <= lease * 1000 ? 'True' : 'False', t.resource);
}
for (const t of a.held) await write(t);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const b = await shards((await lines.next()).value.trim());
for (const t of [...b.held, ...a.held, { ...b.held[0], holder: 'x_forged' }]) await write(t);
for (const shard of [...data.keys()].sort((x, y) => x - y)) console.log('data', shard, ...data.get(shard));
process.exit(0);
`
		return exec.Command("node", "--input-type=module", "-e", script, "--", "file://"+filepath.Join(dir, "leader.mjs"), url, leaseSeconds)
	},
}

// TestCopyPasteClientsInShardMode runs each copy-paste client against two
// sidecar processes in shard mode on one SQLite file. Replica A starts
// alone and holds the 4 shards; each client's --shards and
// --shard-selector print what A's GET /shards says, and its
// --watch-shards (the shell client's with jq and with sed alike) prints
// acquired for each shard with A's tokens. Replica B starts; A drains two
// shards towards it, which --shards shows as draining and --watch-shards
// as draining events; the client's --drained acknowledges each, A
// releases it at once (the drain timeout is 60s) and B holds it with a
// higher token, and each client then prints what each replica's GET
// /shards says. --watch-shards, replayed in order, ends each moved
// shard's term with released and renews the kept ones. Imported, the
// Python and Node.js clients' ShardGuard accepts A's terms, then B's, and
// refuses A's terms of the shards that moved, while A's term of a shard
// it kept still writes. Killed, A ends the stream, and --watch-shards
// exits 2: what A held is then unknown, and the application stops.
func TestCopyPasteClientsInShardMode(t *testing.T) {
	t.Parallel()
	cs := clients(t)
	dir := sidecartest.RepoPath(t, "examples", "clients")
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := sidecartest.DBPath(t)
			a := sidecartest.Start(t, db, clientShardArgs()...)
			awaitShards(t, a, "holds every shard", 10*time.Second, func(st httpapi.ShardsJSON) bool { return len(st.Held) == clientShards })
			first := checkClientShards(t, c, a, true)

			watch := startLines(t, c.name+" --watch-shards", append([]string{"LEADER_SIDECAR_URL=http://" + a.Addr()}, c.env...),
				append(slices.Clone(c.argv), "--watch-shards")...)
			var acquired []string
			for _, h := range first.Held {
				acquired = append(acquired, fmt.Sprintf("acquired %d %d %s", h.Shard, h.Token, first.Identity))
			}
			watch.await(t, "acquired for every shard of A", 20*time.Second, hasAll(acquired))
			var guard *lineProc
			if script, ok := guardScripts[c.name]; ok {
				guard = startGuard(t, c.name, script(t, dir, "http://"+a.Addr()), first)
			}

			b := sidecartest.Start(t, db, clientShardArgs()...)
			// A drains two shards towards B: the client shows them draining.
			awaitShards(t, a, "drains two shards", 10*time.Second, func(st httpapi.ShardsJSON) bool {
				return strings.Count(strings.Join(heldLines(st), "\n"), " draining ") == clientShards/2
			})
			draining := checkClientShards(t, c, a, false)
			var moved, kept []int
			tokenA := map[int]int64{}
			for _, h := range draining.Held {
				tokenA[h.Shard] = h.Token
				if h.State == "draining" {
					moved = append(moved, h.Shard)
				} else {
					kept = append(kept, h.Shard)
				}
			}
			if len(moved) != clientShards/2 {
				t.Fatalf("A drains %v, want %d shards", draining.Held, clientShards/2)
			}
			var want []string
			for _, i := range moved {
				want = append(want, fmt.Sprintf("draining %d %d %s", i, tokenA[i], draining.Identity))
			}
			watch.await(t, "draining for the shards A drains", 10*time.Second, hasAll(want))

			held := ackDrains(t, c, a, b, moved, kept, tokenA)
			if got := checkClientShards(t, c, a, true); !sameHeld(got, held[0]) {
				t.Fatalf("A holds %+v, then %+v", held[0].Held, got.Held)
			}
			if got := checkClientShards(t, c, b, true); !sameHeld(got, held[1]) {
				t.Fatalf("B holds %+v, then %+v", held[1].Held, got.Held)
			}
			checkWatchedMove(t, watch, first.Identity, moved, kept, tokenA)
			if guard != nil {
				checkGuardAfterMove(t, guard, "http://"+b.Addr(), first, held[1], moved)
			}
			// A killed: its stream breaks, and --watch-shards exits 2.
			if err := a.Cmd().Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if code := watch.exitCode(t, 10*time.Second); code != 2 || watch.stderr.String() == "" {
				t.Fatalf("--watch-shards on a sidecar killed: exit %d, stderr %q; want 2 and a message", code, watch.stderr.String())
			}
		})
	}
}

// TestCopyPasteClientsRefuseBadShardAnswers: each copy-paste client's
// --shards exits 2 with a message and prints nothing on every answer that
// is not a usable GET /shards and where no sidecar listens, and exits 1
// printing nothing on a replica that holds nothing; --shard-selector
// alike on two of them; --drained takes a 200 as acknowledged (0), a 409
// as not draining here (1) and a 404 or no answer as 2. --watch-shards
// prints the events of a stream that ends, skipping one of a name added
// later, and exits 2; it exits 2 with a message, at once and printing
// nothing, on a stream that sends an event the sidecar does not and stays
// open, and when there is no stream.
func TestCopyPasteClientsRefuseBadShardAnswers(t *testing.T) {
	t.Parallel()
	cs := clients(t)
	fakes, streams := shardFakes(t), watchFakes(t)
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checkShardFakes(t, c, fakes)
			checkWatchFakes(t, c, streams)
		})
	}
}

// ackDrains acknowledges through c each drain of a (the shards moved),
// after checking that c's --drained refuses a shard a keeps (exit 1).
// It fails t unless b then holds the moved shards, and only them, with
// tokens above a's (tokenA), and unless a second acknowledgement of a
// released shard is refused; it returns a's and b's GET /shards then.
func ackDrains(t *testing.T, c appClient, a, b *sidecartest.Sidecar, moved, kept []int, tokenA map[int]int64) [2]httpapi.ShardsJSON {
	t.Helper()
	urlA := "http://" + a.Addr()
	if out, errOut, code := c.run(t, urlA, "--drained", strconv.Itoa(kept[0])); code != 1 || out != "" || errOut == "" {
		t.Fatalf("%s --drained %d (held, not draining): exit %d, stdout %q, stderr %q; want 1 and a message", c.name, kept[0], code, out, errOut)
	}
	// An acknowledgement of another term is refused, and changes nothing;
	// the draining term's token is accepted, and so is none.
	other := strconv.FormatInt(tokenA[moved[0]]+1, 10)
	if out, errOut, code := c.run(t, urlA, "--drained", strconv.Itoa(moved[0]), other); code != 1 || out != "" || errOut == "" {
		t.Fatalf("%s --drained %d %s (another term): exit %d, stdout %q, stderr %q; want 1 and a message", c.name, moved[0], other, code, out, errOut)
	}
	if st := shardsOf(t, a); !slices.ContainsFunc(st.Held, func(h httpapi.ShardJSON) bool { return h.Shard == moved[0] && h.State == "draining" }) {
		t.Fatalf("%s: after an acknowledgement of another term, A answers %+v; want shard %d still draining", c.name, st.Held, moved[0])
	}
	acked := time.Now()
	for k, i := range moved {
		args := []string{"--drained", strconv.Itoa(i)}
		if k == 0 {
			args = append(args, strconv.FormatInt(tokenA[i], 10))
		}
		if out, errOut, code := c.run(t, urlA, args...); code != 0 || out != "" {
			t.Fatalf("%s --drained %d: exit %d, stdout %q, stderr %q; want 0 and nothing", c.name, i, code, out, errOut)
		}
	}
	onB := awaitShards(t, b, "holds the shards A drained, with higher tokens", 10*time.Second, func(st httpapi.ShardsJSON) bool {
		if len(st.Held) != len(moved) {
			return false
		}
		for i, h := range st.Held {
			if h.Shard != moved[i] || h.Token <= tokenA[h.Shard] || h.State != "held" {
				return false
			}
		}
		return true
	})
	t.Logf("%s: shards %v released on the acknowledgement and held by B %v after it", c.name, moved, time.Since(acked).Round(time.Millisecond))
	if out, errOut, code := c.run(t, urlA, "--drained", strconv.Itoa(moved[0])); code != 1 || out != "" || errOut == "" {
		t.Fatalf("%s --drained %d again (released): exit %d, stdout %q, stderr %q; want 1 and a message", c.name, moved[0], code, out, errOut)
	}
	onA := awaitShards(t, a, "holds the shards it kept, and only them", 10*time.Second, func(st httpapi.ShardsJSON) bool {
		return len(st.Held) == len(kept) && st.Held[0].Shard == kept[0] && st.Held[1].Shard == kept[1]
	})
	return [2]httpapi.ShardsJSON{onA, onB}
}

// startGuard starts cmd, a guardScripts program reading replica A's GET
// /shards, and fails t unless it prints A's terms (first) and writes each
// through its ShardGuard.
func startGuard(t *testing.T, name string, cmd *exec.Cmd, first httpapi.ShardsJSON) *lineProc {
	t.Helper()
	guard := startLines(t, name+" imported", cmd.Env, cmd.Args...)
	var want []string
	for _, h := range first.Held {
		want = append(want, fmt.Sprintf("term %d %d held %s True True %s", h.Shard, h.Token, first.Identity, fence.ShardResource("leader-sidecar", first.Shards, h.Shard)))
	}
	for _, h := range first.Held {
		want = append(want, fmt.Sprintf("accepted %d %d %s", h.Shard, h.Token, first.Identity))
	}
	if got := guard.await(t, "A's terms written", 20*time.Second, func(l []string) bool { return len(l) >= len(want) }); !slices.Equal(got, want) {
		t.Fatalf("imported, with A's terms: printed %q, want %q", got, want)
	}
	return guard
}

// checkGuardAfterMove hands the guard program B's URL and fails t unless
// its ShardGuard accepts B's terms (onB), then refuses A's terms (first)
// of the shards that moved and accepts A's terms of the others again,
// refuses B's token from another holder, and each shard's data is left
// written by the last term accepted.
func checkGuardAfterMove(t *testing.T, guard *lineProc, urlB string, first, onB httpapi.ShardsJSON, moved []int) {
	t.Helper()
	if _, err := io.WriteString(guard.stdin, urlB+"\n"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, h := range onB.Held {
		want = append(want, fmt.Sprintf("accepted %d %d %s", h.Shard, h.Token, onB.Identity))
	}
	data := map[int]string{}
	for _, h := range first.Held {
		verdict := "accepted"
		if slices.Contains(moved, h.Shard) {
			verdict = "refused"
		}
		want = append(want, fmt.Sprintf("%s %d %d %s", verdict, h.Shard, h.Token, first.Identity))
		data[h.Shard] = fmt.Sprintf("data %d %d %s", h.Shard, h.Token, first.Identity)
	}
	want = append(want, fmt.Sprintf("refused %d %d x_forged", onB.Held[0].Shard, onB.Held[0].Token))
	for _, h := range onB.Held {
		data[h.Shard] = fmt.Sprintf("data %d %d %s", h.Shard, h.Token, onB.Identity)
	}
	for i := range clientShards {
		want = append(want, data[i])
	}
	n := 2 * clientShards // the lines of A's terms, before
	got := guard.await(t, "the writes with B's terms and A's again", 20*time.Second, func(l []string) bool { return len(l) >= n+len(want) })
	if !slices.Equal(got[n:], want) {
		t.Fatalf("imported, with B's terms then A's again: printed %q, want %q", got[n:], want)
	}
}

// checkWatchedMove fails t unless the lines of --watch-shards on replica A
// (identity), replayed in order, follow the stream's rules (acquired for a
// shard not held; draining, undrained, renewed, released, lost for the
// term held, every one with A's token of the shard, tokenA), end holding
// the shards kept, after a renewal of each, and end each moved shard's
// term with acquired, draining and released.
func checkWatchedMove(t *testing.T, watch *lineProc, identity string, moved, kept []int, tokenA map[int]int64) {
	t.Helper()
	var want []string
	for _, i := range moved {
		want = append(want, fmt.Sprintf("released %d %d %s", i, tokenA[i], identity))
	}
	for _, i := range kept {
		want = append(want, fmt.Sprintf("renewed %d %d %s", i, tokenA[i], identity))
	}
	lines := watch.await(t, "released for the shards acknowledged, renewed for those kept", 10*time.Second, hasAll(want))
	held := map[int]string{} // state by shard
	events := map[int][]string{}
	for _, l := range lines {
		var event, who string
		var shard int
		var token int64
		if n, err := fmt.Sscanf(l, "%s %d %d %s", &event, &shard, &token, &who); n != 4 || err != nil || who != identity || token != tokenA[shard] {
			t.Fatalf("--watch-shards printed %q, want <event> <shard> <A's token of it> %s; all: %q", l, identity, lines)
		}
		state, had := held[shard]
		ok := false
		switch event {
		case "acquired":
			ok, held[shard] = !had, "held"
		case "draining":
			ok, held[shard] = state == "held", "draining"
		case "undrained":
			ok, held[shard] = state == "draining", "held"
		case "renewed":
			ok = had
		case "released", "lost":
			ok = had
			delete(held, shard)
		}
		if !ok {
			t.Fatalf("--watch-shards printed %q with shard %d %q (held: %v); all: %q", l, shard, state, had, lines)
		}
		if event != "renewed" {
			events[shard] = append(events[shard], event)
		}
	}
	if len(held) != len(kept) || held[kept[0]] != "held" || held[kept[1]] != "held" {
		t.Fatalf("--watch-shards leaves A holding %v, want %v held; printed %q", held, kept, lines)
	}
	for _, i := range moved {
		if e := events[i]; len(e) < 3 || !slices.Equal(e[len(e)-3:], []string{"acquired", "draining", "released"}) {
			t.Fatalf("--watch-shards printed for shard %d %v, want it to end with acquired, draining, released; all: %q", i, e, lines)
		}
	}
}

// shardFake is an app API that answers every request with status and body.
type shardFake struct {
	status int
	body   string
}

// shardFakes are servers whose answers to GET /shards are not usable, by
// what they answer, and "holds nothing", a usable answer of a replica that
// holds no shard; "409" answers as a replica answers the acknowledgement
// of a drain it does not have.
func shardFakes(t *testing.T) map[string]*httptest.Server {
	t.Helper()
	fakes := map[string]shardFake{
		"HTML":                    {http.StatusOK, "<html>proxy error</html>"},
		"404 (not in shard mode)": {http.StatusNotFound, `{"error":"not found"}`},
		"503 with a shards body":  {http.StatusServiceUnavailable, fakeShards(fmt.Sprintf(fakeHeld, 3, "held"))},
		"no held field":           {http.StatusOK, `{"group":"g","identity":"a_1","shards":4,"shardSelector":""}`},
		"a shard with token 0":    {http.StatusOK, fakeShards(fmt.Sprintf(fakeHeld, 0, "held"))},
		"a shard in state lost":   {http.StatusOK, fakeShards(fmt.Sprintf(fakeHeld, 3, "lost"))},
		"holds nothing":           {http.StatusOK, `{"group":"g","identity":"a_1","shards":4,"members":["a_1"],"fairShare":4,"leaving":false,"held":[],"shardSelector":""}`},
		"409":                     {http.StatusConflict, `{"shard":1,"error":"shard 1 is not draining"}`},
	}
	srvs := map[string]*httptest.Server{}
	for name, f := range fakes {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.status)
			fmt.Fprintln(w, f.body)
		}))
		t.Cleanup(srv.Close)
		srvs[name] = srv
	}
	return srvs
}

// fakeHeld is shard 1's JSON in a fake's answers, with a token and a state
// to fill in; fakeShards is a fake GET /shards of replica a_1 (of 4 shards)
// holding the shard held.
const fakeHeld = `{"shard":1,"token":%d,"state":%q,"range":{"start":"0x4000000000000000","end":"0x8000000000000000"},"validUntil":"2030-01-01T00:00:00.123456789Z"}`

func fakeShards(held string) string {
	return `{"group":"g","identity":"a_1","shards":4,"members":["a_1"],"fairShare":4,"leaving":false,"held":[` + held +
		`],"shardSelector":"shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')"}`
}

// fakeEvent is a named event of a fake /shards/watch about shard i.
func fakeEvent(event string, i int, token int64, state string) string {
	return fmt.Sprintf(`event: %s`+"\n"+`data: {"event":%q,"shard":%d,"token":%d,"state":%q,"range":{"start":"0x4000000000000000","end":"0x8000000000000000"},"validUntil":"2030-01-01T00:00:00.123456789Z"}`+"\n\n",
		event, event, i, token, state)
}

// watchFake is an app API whose GET /shards says that a_1 holds shard 1
// with token 3, and whose GET /shards/watch sends events, then ends the
// stream if end, else keeps it open until the client goes; with no events
// it answers 404.
type watchFake struct {
	events string
	end    bool
	want   []string // what --watch-shards prints before it exits 2
	url    string   // the fake's, once started
}

// watchFakes are the fakes of TestCopyPasteClientsRefuseBadShardAnswers'
// --watch-shards, by what they send, with the servers' URLs.
func watchFakes(t *testing.T) map[string]watchFake {
	t.Helper()
	state := "data: " + fakeShards(fmt.Sprintf(fakeHeld, 3, "held")) + "\n\n"
	fakes := map[string]watchFake{
		"a stream that ends": {
			events: "event: later\ndata: {}\n\n: keep-alive\n\n" + fakeEvent("acquired", 1, 3, "held") + state +
				strings.ReplaceAll(fakeEvent("renewed", 1, 3, "held"), "\n", "\r\n"),
			end:  true,
			want: []string{"acquired 1 3 a_1", "renewed 1 3 a_1"},
		},
		"acquired with token 0":        {events: fakeEvent("acquired", 1, 0, "held")},
		"acquired of shard 4 of 4":     {events: fakeEvent("acquired", 4, 3, "held")},
		"lost in state held":           {events: fakeEvent("lost", 1, 3, "held")},
		"acquired that is not JSON":    {events: "event: acquired\ndata: <html>proxy error</html>\n\n"},
		"a state of another sidecar":   {events: strings.Replace(state, `"a_1"`, `"b_1"`, 1)},
		"no stream (404 on the watch)": {},
	}
	for name, f := range fakes {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/shards":
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintln(w, fakeShards(fmt.Sprintf(fakeHeld, 3, "held")))
			case r.URL.Path == "/shards/watch" && f.events != "":
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, f.events)
				w.(http.Flusher).Flush()
				if !f.end {
					<-r.Context().Done()
				}
			default:
				http.NotFound(w, r)
			}
		}))
		t.Cleanup(srv.Close)
		f.url = srv.URL
		fakes[name] = f
	}
	return fakes
}

// checkWatchFakes runs c --watch-shards against fakes as
// TestCopyPasteClientsRefuseBadShardAnswers says.
func checkWatchFakes(t *testing.T, c appClient, fakes map[string]watchFake) {
	t.Helper()
	for name, f := range fakes {
		p := startLines(t, c.name+" --watch-shards on "+name, append([]string{"LEADER_SIDECAR_URL=" + f.url}, c.env...),
			append(slices.Clone(c.argv), "--watch-shards")...)
		code := p.exitCode(t, 10*time.Second)
		if got := p.Lines(); code != 2 || !slices.Equal(got, f.want) || p.stderr.String() == "" {
			t.Errorf("%s --watch-shards on %s: exit %d, printed %q, stderr %q; want 2, %q and a message", c.name, name, code, got, p.stderr.String(), f.want)
		}
	}
}

// checkShardFakes runs c against fakes as
// TestCopyPasteClientsRefuseBadShardAnswers says.
func checkShardFakes(t *testing.T, c appClient, fakes map[string]*httptest.Server) {
	t.Helper()
	urls := map[string]string{"no sidecar": "http://" + closedPort(t)}
	for name, srv := range fakes {
		urls[name] = srv.URL
	}
	type run struct {
		fake string
		args []string
		want int
	}
	runs := []run{
		{"holds nothing", []string{"--shard-selector"}, 1},
		{"a shard in state lost", []string{"--shard-selector"}, 2},
		{"holds nothing", []string{"--drained", "1"}, 0},
		{"409", []string{"--drained", "1"}, 1},
		{"404 (not in shard mode)", []string{"--drained", "1"}, 2},
		{"no sidecar", []string{"--drained", "1"}, 2},
		{"holds nothing", []string{"--drained", "x"}, 2},
	}
	for name := range urls {
		want := 2
		if name == "holds nothing" {
			want = 1
		}
		runs = append(runs, run{name, []string{"--shards"}, want})
	}
	for _, r := range runs {
		out, errOut, code := c.run(t, urls[r.fake], r.args...)
		if code != r.want || out != "" || (r.want == 2 && errOut == "") {
			t.Errorf("%s %s on %s: exit %d, stdout %q, stderr %q; want %d, nothing printed, and a message if 2", c.name, r.args, r.fake, code, out, errOut, r.want)
		}
	}
}
