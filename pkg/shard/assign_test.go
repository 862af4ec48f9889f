package shard

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func randomMembers(rng *rand.Rand, m int) []string {
	out := make([]string, m)
	for j := range out {
		out[j] = fmt.Sprintf("app-%d_%016x", j, rng.Uint64())
	}
	return out
}

// checkTable checks the guarantees of one table: every shard given to
// exactly one of members, each member given floor(n/m) or ceil(n/m).
func checkTable(t *testing.T, tab Table, n int, members []string) {
	t.Helper()
	if len(tab) != n {
		t.Fatalf("%d shards, a table of %d", n, len(tab))
	}
	for i, m := range tab {
		if !slices.Contains(members, m) {
			t.Fatalf("shard %d given to %q, not a member of %v", i, m, members)
		}
	}
	load := tab.Load()
	lo, hi := n/len(members), FairShare(n, len(members))
	for _, m := range members {
		if l := load[m]; l < lo || l > hi {
			t.Fatalf("%d shards over %d members: %s has %d, want %d to %d", n, len(members), m, l, lo, hi)
		}
	}
}

func TestEveryShardIsGivenOnceAndNoMemberBeyondItsShare(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 1; n <= MaxShards; n += 1 + n/8 {
		for m := 1; m <= 12; m++ {
			members := randomMembers(rng, m)
			tab, err := Assign(n, members)
			if err != nil {
				t.Fatal(err)
			}
			checkTable(t, tab, n, members)
		}
	}
}

// The table depends on the set of members only: shuffled, or with
// repeats, the same members give the same table.
func TestTheSameMembersInAnyOrderGiveTheSameTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		n, m := 1+rng.IntN(MaxShards), 1+rng.IntN(10)
		members := randomMembers(rng, m)
		want, _ := Assign(n, members)
		shuffled := slices.Clone(members)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, shuffled[rng.IntN(m)])
		got, _ := Assign(n, shuffled)
		if !slices.Equal(got, want) {
			t.Fatalf("%d shards over %v gave %v; the same members as %v gave %v", n, members, want, shuffled, got)
		}
	}
}

func moved(a, b Table) int {
	c := 0
	for i := range a {
		if a[i] != b[i] {
			c++
		}
	}
	return c
}

// A member joining or leaving moves few shards besides those that must
// move. The figures (shards moved against the minimum, over random
// groups of 2 to 10 members) are in docs/shards.md; the bounds here sit
// above them with room, to catch an assignment that reshuffles.
func TestJoiningOrLeavingMovesFewShards(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const trials = 200
	for _, c := range []struct {
		n                 int
		joinMax, leaveMax float64 // moved / minimum
	}{
		{8, 3, 2}, {16, 2, 1.6}, {64, 1.6, 1.4}, {256, 1.3, 1.2},
	} {
		var joinMoved, joinMin, leaveMoved, leaveMin int
		for range trials {
			members := randomMembers(rng, 2+rng.IntN(9))
			before, _ := Assign(c.n, members)
			joined := append(slices.Clone(members), fmt.Sprintf("app-new_%016x", rng.Uint64()))
			after, _ := Assign(c.n, joined)
			joinMoved += moved(before, after)
			joinMin += FewestMoves(before, joined)
			left := slices.Delete(slices.Clone(members), 0, 1)
			after, _ = Assign(c.n, left)
			leaveMoved += moved(before, after)
			leaveMin += FewestMoves(before, left)
		}
		total := float64(trials * c.n)
		join, leave := float64(joinMoved)/float64(joinMin), float64(leaveMoved)/float64(leaveMin)
		t.Logf("%3d shards: a join moves %.1f%% of the shards (minimum %.1f%%, %.2fx), a leave %.1f%% (minimum %.1f%%, %.2fx)",
			c.n, 100*float64(joinMoved)/total, 100*float64(joinMin)/total, join,
			100*float64(leaveMoved)/total, 100*float64(leaveMin)/total, leave)
		if join > c.joinMax || leave > c.leaveMax {
			t.Errorf("%d shards: joins move %.2fx the minimum (bound %.1f), leaves %.2fx (bound %.1f)", c.n, join, c.joinMax, leave, c.leaveMax)
		}
	}
}

// FewestMoves counts what must change member, worked by hand: the loads
// after are floor or ceil of n/m, the members holding most keep most.
func TestFewestMoves(t *testing.T) {
	old := Table{"a", "a", "a", "b", "b", "b", "c", "c"} // 3, 3, 2
	for _, c := range []struct {
		members []string
		want    int
	}{
		{[]string{"a", "b", "c"}, 0},           // 3 3 2 already
		{[]string{"c", "b", "a", "a"}, 0},      // order and repeats do not matter
		{[]string{"a", "b", "c", "d", "e"}, 2}, // loads 2 2 2 1 1: a and b give one each
		{[]string{"a", "b", "c", "d"}, 2},      // loads 2 2 2 2: a and b give one each
		{[]string{"a", "b"}, 2},                // loads 4 4: c's two shards move
		{[]string{"c"}, 6},                     // c keeps its two
		{[]string{"d"}, 8},                     // all to a newcomer
		{nil, 8},                               // every held shard loses its member
	} {
		if got := FewestMoves(old, c.members); got != c.want {
			t.Errorf("from %v to members %v: FewestMoves %d, want %d", old, c.members, got, c.want)
		}
	}
	if got := FewestMoves(Table{"a", "", "b", ""}, []string{"a", "b"}); got != 2 {
		t.Errorf("two shards held by no one, members a and b: FewestMoves %d, want 2 (each is given one)", got)
	}
}

// Rendezvous hashing spreads shards by member, not by position: with
// members ranked by a hash, no member's name makes it win everything.
func TestAssignmentIsNotTheFirstMemberTakingAll(t *testing.T) {
	tab, _ := Assign(8, []string{"a", "b", "c"})
	checkTable(t, tab, 8, []string{"a", "b", "c"})
	tab, _ = Assign(3, []string{"a", "b", "c", "d", "e"})
	checkTable(t, tab, 3, []string{"a", "b", "c", "d", "e"})
	if l := tab.Load(); len(l) != 3 {
		t.Fatalf("3 shards over 5 members: %v, want three members with one each", l)
	}
}

func TestAssignWithoutMembersOrWithBadInput(t *testing.T) {
	tab, err := Assign(4, nil)
	if err != nil || !slices.Equal(tab, Table{"", "", "", ""}) {
		t.Fatalf("Assign(4, nil) = %v, %v; want four unassigned shards", tab, err)
	}
	if _, err := Assign(4, []string{"a", ""}); err == nil {
		t.Error("Assign accepted an empty identity")
	}
	if _, err := Assign(0, []string{"a"}); err == nil {
		t.Error("Assign accepted 0 shards")
	}
	if got := FairShare(8, 3); got != 3 {
		t.Errorf("FairShare(8, 3) = %d, want 3", got)
	}
	if got := FairShare(8, 0); got != 0 {
		t.Errorf("FairShare(8, 0) = %d, want 0", got)
	}
}

// A score is FNV-1a 64 of the member, a zero byte and the shard's number
// as 8 big-endian bytes, then mixed: computed here the long way.
func TestScoreIsTheHashOfMemberAndShard(t *testing.T) {
	mix := func(h uint64) uint64 {
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		return h ^ h>>31
	}
	for _, m := range []string{"a", "app-0_x", "pod-7f9c_1b2e"} {
		for _, i := range []int{0, 1, 7, 255, 256} {
			var be [8]byte
			binary.BigEndian.PutUint64(be[:], uint64(i))
			if got, want := score(memberPrefix(m), i), mix(Hash(m+"\x00"+string(be[:]))); got != want {
				t.Fatalf("score(%q, %d) = %#x, want %#x", m, i, got, want)
			}
		}
	}
}
