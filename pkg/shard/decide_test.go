package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	t0     = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	policy = Policy{RebalanceDelay: 30 * time.Second, DrainTimeout: 30 * time.Second}
)

// members lists identities live since long ago.
func members(ids ...string) []Member {
	out := make([]Member, len(ids))
	for i, id := range ids {
		out[i] = Member{Identity: id, LiveSince: t0.Add(-time.Hour)}
	}
	return out
}

func describeActions(as []Action) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s %d", a.Kind, a.Shard))
	}
	return strings.Join(parts, ", ")
}

// With 2 shards over members a and b, Assign gives shard 0 to one and
// shard 1 to the other; these helpers name them.
func twoShardTargets(t *testing.T) (self, other string, mine, theirs int) {
	t.Helper()
	tab, err := Assign(2, []string{"a", "b"})
	if err != nil || tab[0] == tab[1] {
		t.Fatalf("Assign(2, [a b]) = %v, %v", tab, err)
	}
	return "a", "b", slices.Index(tab, "a"), slices.Index(tab, "b")
}

// Each rule of Decide's doc, row by row, on two shards over two members.
func TestDecideRules(t *testing.T) {
	self, other, mine, theirs := twoShardTargets(t)
	shards := func(m, o ShardView) []ShardView {
		s := make([]ShardView, 2)
		s[mine], s[theirs] = m, o
		return s
	}
	free := ShardView{State: Free}
	heldBy := func(id string) ShardView { return ShardView{Holder: id, State: Held} }
	drainingBy := func(id string, since time.Time, drained bool) ShardView {
		return ShardView{Holder: id, State: Draining, DrainingSince: since, Drained: drained}
	}
	expiredBy := func(id string) ShardView { return ShardView{Holder: id, State: Expired} }
	both := members(self, other)
	newcomer := []Member{{Identity: self, LiveSince: t0.Add(-time.Hour)}, {Identity: other, LiveSince: t0.Add(-10 * time.Second)}}

	for _, c := range []struct {
		name string
		v    View
		want string
	}{
		{"a free target is acquired, another's free shard is left to it",
			View{Members: both, Shards: shards(free, free)}, fmt.Sprintf("acquire %d", mine)},
		{"an expired target is acquired, whoever the record names",
			View{Members: both, Shards: shards(expiredBy(other), expiredBy("ghost"))}, fmt.Sprintf("acquire %d", mine)},
		{"a target held live by another is never acquired",
			View{Members: both, Shards: shards(heldBy(other), free)}, ""},
		{"a target draining by another is waited for",
			View{Members: both, Shards: shards(drainingBy(other, t0.Add(-time.Hour), true), free)}, ""},
		{"a target held by a holder that is not a member is waited for",
			View{Members: both, Shards: shards(heldBy("gone"), free)}, ""},
		{"a held target is kept",
			View{Members: both, Shards: shards(heldBy(self), heldBy(other))}, ""},
		{"a shard held for another member is drained",
			View{Members: both, Shards: shards(heldBy(self), heldBy(self))}, fmt.Sprintf("drain %d", theirs)},
		{"not towards a member live for less than the rebalance delay",
			View{Members: newcomer, Shards: shards(heldBy(self), heldBy(self))}, ""},
		{"alone, every shard is a target",
			View{Shards: shards(free, free)}, fmt.Sprintf("acquire %d, acquire %d", min(mine, theirs), max(mine, theirs))},
		{"self counts as a member even when its record is not seen yet",
			View{Members: members(other), Shards: shards(free, free)}, fmt.Sprintf("acquire %d", mine)},
		{"a draining shard is released once its application acknowledged it",
			View{Members: both, Shards: shards(heldBy(self), drainingBy(self, t0, true))}, fmt.Sprintf("release %d", theirs)},
		{"a draining shard waits for the acknowledgement",
			View{Members: both, Shards: shards(heldBy(self), drainingBy(self, t0.Add(-29*time.Second), false))}, ""},
		{"a draining shard is released after the drain timeout",
			View{Members: both, Shards: shards(heldBy(self), drainingBy(self, t0.Add(-30*time.Second), false))}, fmt.Sprintf("release %d", theirs)},
		{"a draining shard that is a target again is kept",
			View{Members: both, Shards: shards(drainingBy(self, t0, false), heldBy(other))}, fmt.Sprintf("undrain %d", mine)},
		{"leaving, every held shard is drained and nothing acquired",
			View{Leaving: true, Members: both, Shards: shards(heldBy(self), free)}, fmt.Sprintf("drain %d", mine)},
		{"leaving alone, held shards are drained all the same",
			View{Leaving: true, Members: members(self), Shards: shards(heldBy(self), heldBy(self))}, fmt.Sprintf("drain %d, drain %d", min(mine, theirs), max(mine, theirs))},
		{"leaving, a drained shard is released, and a draining target stays draining",
			View{Leaving: true, Members: both, Shards: shards(drainingBy(self, t0, false), drainingBy(self, t0, true))}, fmt.Sprintf("release %d", theirs)},
		{"an expired record of its own that is no longer a target is left to expire",
			View{Members: both, Shards: shards(heldBy(self), expiredBy(self))}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.v.Self, c.v.Now = self, t0
			got, err := Decide(c.v, policy)
			if err != nil {
				t.Fatal(err)
			}
			if s := describeActions(got); s != c.want {
				t.Fatalf("Decide = [%s], want [%s]", s, c.want)
			}
		})
	}
}

func TestDecideRefusesViewsItCannotJudge(t *testing.T) {
	for name, v := range map[string]View{
		"no identity":         {Shards: []ShardView{{}}},
		"no shards":           {Self: "a"},
		"too many shards":     {Self: "a", Shards: make([]ShardView, MaxShards+1)},
		"an empty member":     {Self: "a", Members: []Member{{}}, Shards: []ShardView{{}}},
		"an unknown state":    {Self: "a", Shards: []ShardView{{Holder: "b", State: 9}}},
		"a free shard, named": {Self: "a", Shards: []ShardView{{Holder: "b", State: Free}}},
		"held by nobody":      {Self: "a", Shards: []ShardView{{State: Held}}},
	} {
		if as, err := Decide(v, policy); err == nil {
			t.Errorf("%s: Decide accepted it and answered [%s]", name, describeActions(as))
		}
	}
}

// randomView is what one replica might see: any members, any holders and
// states, drains of any age, acknowledged or not.
func randomView(rng *rand.Rand) View {
	pool := []string{"a", "b", "c", "d", "e", "ghost"}
	v := View{Self: pool[rng.IntN(4)], Leaving: rng.IntN(5) == 0, Now: t0}
	for _, id := range pool[:5] {
		if rng.IntN(3) > 0 {
			v.Members = append(v.Members, Member{Identity: id, LiveSince: t0.Add(-time.Duration(rng.Int64N(int64(time.Minute))))})
		}
	}
	n := 1 + rng.IntN(16)
	if rng.IntN(10) == 0 {
		n = 1 + rng.IntN(MaxShards)
	}
	v.Shards = make([]ShardView, n)
	for i := range v.Shards {
		s := ShardView{State: State(rng.IntN(4))}
		if s.State != Free {
			s.Holder = pool[rng.IntN(len(pool))]
		}
		if s.State == Draining {
			s.DrainingSince = t0.Add(-time.Duration(rng.Int64N(int64(time.Minute))))
			s.Drained = rng.IntN(2) == 0
		}
		v.Shards[i] = s
	}
	return v
}

// Over many random views, every action keeps the invariants: at most one
// per shard; never acquire a shard another holder holds live (held or
// draining); acquire only targets, and nothing while leaving; drain,
// undrain and release only shards this replica holds, in the state each
// needs; release only after the acknowledgement or the drain timeout.
func TestDecideNeverTakesALiveShardFromAnotherHolder(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	counts := map[ActionKind]int{}
	const views = 10000
	for range views {
		v := randomView(rng)
		as, err := Decide(v, policy)
		if err != nil {
			t.Fatalf("Decide(%+v): %v", v, err)
		}
		seen := map[int]bool{}
		for _, a := range as {
			counts[a.Kind]++
			s := v.Shards[a.Shard]
			fail := func(why string) {
				t.Fatalf("%s on shard %d (%s by %q) for %s (leaving %v): %s", a.Kind, a.Shard, s.State, s.Holder, v.Self, v.Leaving, why)
			}
			if seen[a.Shard] {
				fail("a second action on one shard")
			}
			seen[a.Shard] = true
			switch a.Kind {
			case Acquire:
				if s.State == Held || s.State == Draining {
					fail("takes a live shard")
				}
				if v.Leaving || a.Target != v.Self {
					fail("acquires a shard that is not its target")
				}
			case Drain:
				if s.Holder != v.Self || s.State != Held || a.Target == v.Self && !v.Leaving {
					fail("drains a shard it does not hold, or its own target")
				}
			case Undrain:
				if s.Holder != v.Self || s.State != Draining || v.Leaving {
					fail("undrains a shard it does not drain")
				}
			case Release:
				if s.Holder != v.Self || s.State != Draining {
					fail("releases a shard it does not drain")
				}
				if !s.Drained && v.Now.Before(s.DrainingSince.Add(policy.DrainTimeout)) {
					fail("releases before the acknowledgement and the timeout")
				}
			}
		}
	}
	// The views reach every rule.
	for _, k := range []ActionKind{Acquire, Drain, Undrain, Release} {
		if counts[k] < 100 {
			t.Fatalf("%d random views asked %s only %d times: too few to test it (%v)", views, k, counts[k], counts)
		}
	}
	t.Logf("%d random views: %v", views, counts)
}

// Replicas that see the same members, acting on Decide's actions in turn
// (a release lands as a free record; an acquire of a free or expired
// shard takes it), reach the table Assign gives, every shard held once,
// whatever they held to start with.
func TestReplicasWithTheSameViewConverge(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	fast := Policy{}
	for trial := range 300 {
		ids := randomMembers(rng, 1+rng.IntN(6))
		n := 1 + rng.IntN(32)
		shards := make([]ShardView, n)
		for i := range shards { // any start: some held, some free
			if rng.IntN(2) == 0 {
				shards[i] = ShardView{Holder: ids[rng.IntN(len(ids))], State: Held}
			}
		}
		want, _ := Assign(n, ids)
		var rounds int
		for rounds = 0; rounds < 10; rounds++ {
			acted := false
			for _, self := range ids {
				as, err := Decide(View{Self: self, Members: members(ids...), Shards: shards, Now: t0}, fast)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range as {
					acted = true
					s := &shards[a.Shard]
					switch a.Kind {
					case Acquire:
						*s = ShardView{Holder: self, State: Held}
					case Drain:
						*s = ShardView{Holder: self, State: Draining, DrainingSince: t0, Drained: true}
					case Undrain:
						s.State = Held
					case Release:
						*s = ShardView{State: Free}
					}
				}
			}
			if !acted {
				break
			}
		}
		for i, s := range shards {
			if s.State != Held || s.Holder != want[i] {
				t.Fatalf("trial %d: after %d rounds shard %d is %s by %q, want held by %q", trial, rounds, i, s.State, s.Holder, want[i])
			}
		}
	}
}
