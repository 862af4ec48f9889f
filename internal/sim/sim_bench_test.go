package sim

import (
	"testing"
)

// The simulator's speed: one schedule per iteration, over seeds 1 to 20
// in turn (hack/sim -cpuprofile shows where the time goes; docs/shards.md
// has the figures of whole runs).
func BenchmarkGroupSchedule(b *testing.B) {
	benchmarkSchedules(b, Options{Shards: 8, Candidates: 3})
}

func BenchmarkLoneSchedule(b *testing.B) {
	benchmarkSchedules(b, Options{})
}

func benchmarkSchedules(b *testing.B, o Options) {
	b.ReportAllocs()
	events, seed := 0, int64(0)
	for b.Loop() {
		o.Seed = seed%20 + 1
		seed++
		r, err := Run(o)
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
	}
	b.ReportMetric(float64(events)/float64(seed), "events/op")
	b.ReportMetric(float64(seed)/b.Elapsed().Seconds(), "schedules/s")
}
