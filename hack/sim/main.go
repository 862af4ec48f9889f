// Command sim explores the election's schedules under the deterministic
// simulator of package internal/sim and reports every broken invariant
// with a trace that replays exactly:
//
//	go run ./hack/sim -seeds 100000 -seed-start 1
//	go run ./hack/sim -seed-start 4242 -seeds 1 -v   # replay one schedule
//	go run ./hack/sim -shards 8 -candidates 3        # a shard group
//	go run ./hack/sim -shards 8 -seeds 20 -digest    # one figure for the whole range
//	go run ./hack/sim -seeds 5000 -first-violation   # stop at the first broken seed
//	go run ./hack/sim -seeds 5000 -store-restarts -failovers  # the store's own faults
//
// It prints "N schedules, V violations" and exits 1 if V > 0. With
// -first-violation it stops at the first broken schedule in the order of
// the seeds, prints its trace and "first violation: seed S, after N
// schedules" (N counts the seeds from -seed-start to S), and exits 1; a
// range with none ends as without the flag. make mutants reads that line.
// With
// -digest it also prints a hash of every schedule's summary in the order
// of the seeds (sim.Result.Summary): two builds that print the same
// digest for a range of seeds played every schedule of it the same way.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sim"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int64("seeds", 1000, "how many schedules to run")
	start := fs.Int64("seed-start", 1, "the first schedule's seed")
	duration := fs.Duration("duration", 3*time.Minute, "virtual time of each schedule (the last 100s are free of faults)")
	drift := fs.Float64("drift", 0, "each candidate's clock runs at a rate in [1-drift, 1+drift]")
	candidates := fs.Int("candidates", 3, "candidates running at once")
	renewInterval := fs.Duration("renew-interval", 0, "every candidate's renew interval (default: drawn per schedule from the valid range)")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "schedules run in parallel")
	verbose := fs.Bool("v", false, "print every schedule's trace, not only those that break an invariant")
	report := fs.Int("report", 3, "print the traces of at most this many broken schedules")
	shards := fs.Int("shards", 0, "play a shard group: -candidates replicas over this many shards (default duration 5m, the last 200s free of faults)")
	shardsTo := fs.Int("shards-to", 0, "with -shards: a rolling update of the count to this many shards in every schedule, and back in half of them")
	digest := fs.Bool("digest", false, "print a hash of every schedule's summary, in the order of the seeds")
	summaries := fs.Bool("summaries", false, "print every schedule's summary line, in the order of the seeds")
	progress := fs.Duration("progress", 0, "print the figures so far every this much wall time (0: only at the end)")
	trusted := fs.Duration("trusted-record-lease", 0, "every candidate's MaxRecordLeaseDuration (default: the simulator's bound, 30s); a longer one lets hostile lease durations break liveness")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	restarts := fs.Bool("store-restarts", false, "give every schedule one to three restarts of the store that lose nothing (a lone election only)")
	failovers := fs.Bool("failovers", false, "give every schedule one or two failovers of the store that lose its last writes (a lone election only)")
	reissue := fs.Bool("reissue-versions", false, "with -failovers: a failover hands out again the versions it lost (an etcd backup restored without --bump-revision)")
	statefulSets := fs.Bool("statefulsets", false, "make every rolling update a StatefulSet's: each old candidate stops, then one of its Pod name starts, and a stopping leader leaves its release to it (a lone election only)")
	staleReads := fs.Bool("stale-reads", false, "let reads and change signals show the record as it was up to two leases ago (a lagging watch cache; a lone election only)")
	throttling := fs.Bool("throttling", false, "give every schedule one to three windows in which the server refuses requests with 429 (a lone election only)")
	firstViolation := fs.Bool("first-violation", false, "stop at the first schedule, in the order of the seeds, that breaks an invariant, and print it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *seeds < 1 || *workers < 1 {
		fmt.Fprintln(stderr, "sim: -seeds and -workers must be at least 1")
		return 2
	}
	if *progress < 0 {
		fmt.Fprintln(stderr, "sim: -progress must not be negative")
		return 2
	}
	// A schedule's heap is small and short-lived: collecting it less often
	// saves a sixth of the run's CPU time, for a few megabytes.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "sim: -cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "sim: -cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	opts := sim.Options{Duration: *duration, Drift: *drift, Candidates: *candidates, RenewInterval: *renewInterval, Shards: *shards,
		ShardsTo: *shardsTo, TrustedRecordLease: *trusted, StoreRestarts: *restarts, Failovers: *failovers, ReissueVersions: *reissue,
		StaleReads: *staleReads, Throttling: *throttling, StatefulSets: *statefulSets}
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	switch {
	case *shards > 0 && !durationSet:
		opts.Duration = 0 // the group's defaults
	case *duration <= 100*time.Second:
		opts.Quiet = *duration / 2
	}

	began := time.Now()
	results := make(chan sim.Result)
	errs := make(chan error, 1)
	next := make(chan int64)
	stop := make(chan struct{}) // closed to send no more seeds
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range next {
				o := opts
				o.Seed = seed
				r, err := sim.Run(o)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				results <- r
			}
		}()
	}
	go func() {
	send:
		for s := *start; s < *start+*seeds; s++ {
			select {
			case next <- s:
			case <-stop:
				break send
			}
		}
		close(next)
		wg.Wait()
		close(results)
	}()

	var broken, reported, done int64
	var virtual time.Duration
	var events, terms, handoffs, handedOff, stoppedTargets, moves, hostile int
	var rollouts, leadersStopped, stopHandedOff, stopToOther, crashedStopping, releasedPending, statefulSetRollouts int
	var reservedTaken [3]int
	var storeRestarts, failoversPlayed, lostWrites, handedTwice, severed, committedAtCrash int
	var staleShown, throttled, throttledOut, regressedReports int
	var settledMax time.Duration
	// Results arrive in any order; the digest, the summaries and the first
	// violation take them in the order of the seeds.
	sum, early, nextSeed := sim.NewDigest(), map[int64]sim.Result{}, *start
	var first *sim.Result // the first broken schedule in the order of the seeds
	var tick <-chan time.Time
	if *progress > 0 {
		t := time.NewTicker(*progress)
		defer t.Stop()
		tick = t.C
	}
	for in := results; in != nil; {
		var r sim.Result
		select {
		case <-tick:
			fmt.Fprintf(stdout, "after %v: %d schedules, %d violations, %d events, %d terms, %d shards moved, held as assigned within %v\n",
				time.Since(began).Round(time.Second), done, broken, events, terms, moves, settledMax.Round(time.Millisecond))
			continue
		case got, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			r = got
		}
		if first != nil {
			continue // the schedules that were running when it was found
		}
		done++
		if *digest || *summaries || *firstViolation {
			early[r.Seed] = r
			for next, ok := early[nextSeed]; ok && first == nil; next, ok = early[nextSeed] {
				delete(early, nextSeed)
				sum.Add(next)
				if *summaries {
					fmt.Fprintln(stdout, next.Summary())
				}
				if *firstViolation && len(next.Violations) > 0 {
					first = &next
					close(stop)
				}
				nextSeed++
			}
		}
		virtual += r.Virtual
		events += r.Events
		terms += r.Terms
		handoffs, handedOff, stoppedTargets = handoffs+r.Handoffs, handedOff+r.HandedOff, stoppedTargets+r.StoppedTargets
		moves, settledMax = moves+r.Moves, max(settledMax, r.SettledAfter)
		hostile += r.HostileLeases
		if r.Rollout {
			rollouts++
			leadersStopped, stopHandedOff = leadersStopped+r.LeadersStopped, stopHandedOff+r.StopHandedOff
			stopToOther, crashedStopping = stopToOther+r.StopToOtherRevision, crashedStopping+r.CrashedStopping
			releasedPending += r.StopReleasedPending
			if r.StatefulSet {
				statefulSetRollouts++
				for i, n := range r.ReservedTaken {
					reservedTaken[i] += n
				}
			}
		}
		storeRestarts, failoversPlayed = storeRestarts+r.StoreRestarts, failoversPlayed+r.Failovers
		lostWrites, handedTwice = lostWrites+r.LostWrites, handedTwice+r.TokensHandedTwice
		severed, committedAtCrash = severed+r.Severed, committedAtCrash+r.CommittedAtCrash
		staleShown, throttled, throttledOut = staleShown+r.StaleReads, throttled+r.Throttled, throttledOut+r.ThrottledOut
		regressedReports += r.TokenRegressedReports
		if len(r.Violations) > 0 {
			broken++
		}
		if (len(r.Violations) > 0 && reported < int64(*report) && !*firstViolation) || *verbose {
			reported++
			printSchedule(stdout, r)
		}
	}
	select {
	case err := <-errs:
		fmt.Fprintf(stderr, "sim: %v\n", err)
		return 2
	default:
	}
	if first != nil {
		printSchedule(stdout, *first)
		fmt.Fprintf(stdout, "first violation: seed %d, after %d schedules (seeds %d to %d in order, %d violations among the %d schedules run), wall time %v\n",
			first.Seed, first.Seed-*start+1, *start, first.Seed, broken, done, time.Since(began).Round(time.Millisecond))
		return 1
	}
	fmt.Fprintf(stdout, "virtual time %v, %d events, %d terms, wall time %v\n",
		virtual.Round(time.Second), events, terms, time.Since(began).Round(time.Millisecond))
	if *shards > 0 {
		fmt.Fprintf(stdout, "%d shards moved; once faults stopped, every table held as assigned within %v\n", moves, settledMax.Round(time.Millisecond))
	} else {
		fmt.Fprintf(stdout, "%d planned hand-offs, %d handed off, %d targets stopped right after accepting; %d hostile lease durations written\n",
			handoffs, handedOff, stoppedTargets, hostile)
		fmt.Fprintf(stdout, "%d rolling updates: %d leaders stopped, %d handed off on stop (%d to the other revision), %d candidates crashed while stopping, %d pending claims released on stop\n",
			rollouts, leadersStopped, stopHandedOff, stopToOther, crashedStopping, releasedPending)
		if *statefulSets {
			fmt.Fprintf(stdout, "%d of them a StatefulSet's: releases left to a replacement taken by it %d, by another revision %d, by anyone after the wait %d\n",
				statefulSetRollouts, reservedTaken[0], reservedTaken[1], reservedTaken[2])
		}
		if *restarts || *failovers {
			fmt.Fprintf(stdout, "%d store restarts; %d failovers, losing %d writes; %d tokens handed out twice; %d requests cut off as the store went down, %d of them committed\n",
				storeRestarts, failoversPlayed, lostWrites, handedTwice, severed, committedAtCrash)
		}
		if *staleReads || *throttling {
			fmt.Fprintf(stdout, "%d reads and signals from a lagging view; %d tries refused with 429, %d requests refused until their timeout\n",
				staleShown, throttled, throttledOut)
		}
		fmt.Fprintf(stdout, "%d reports of a token below one seen (token-regressed)\n", regressedReports)
	}
	if *digest {
		fmt.Fprintf(stdout, "digest of seeds %d to %d: %s\n", *start, *start+*seeds-1, sum)
	}
	fmt.Fprintf(stdout, "%d schedules, %d violations\n", *seeds, broken)
	if broken > 0 {
		return 1
	}
	return 0
}

func printSchedule(w io.Writer, r sim.Result) {
	fmt.Fprintf(w, "--- schedule %d: %d violations (replay: -seed-start %d -seeds 1 -v)\n", r.Seed, len(r.Violations), r.Seed)
	for _, line := range r.Trace {
		fmt.Fprintln(w, line)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATION at %v: %s\n", v.At, v.What)
	}
}
