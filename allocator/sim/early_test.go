package sim_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// With a gap, the simulator runs the rounds when the live allocator would: hand-checked round
// times, triggers and completion times (R = 100 s, gap 5 s; fifo-perf never moves a job).
func TestEarlyRoundTimes(t *testing.T) {
	const (
		sched   = loop.TriggerSchedule
		arrival = loop.TriggerArrival
		finish  = loop.TriggerFinish
	)
	four := []allocator.Model{{Name: "fast", GPUs: 4}}
	for _, tc := range []struct {
		name         string
		cluster      []allocator.Model
		jobs         []workload.JobSpec
		wantStarts   []float64
		wantTriggers []loop.TriggerKind
		wantJobs     map[int][]string // TriggerJobs of the early rounds, by round
		wantJCT      map[string]float64
	}{
		{name: "an arrival with idle GPUs starts when the gap is over", cluster: twoModels,
			jobs:       []workload.JobSpec{job("a", 0, 1000, 1, "fast", 1.0), job("b", 2, 100, 1, "fast", 1.0, "slow", 1.0)},
			wantStarts: []float64{0, 5}, wantTriggers: []loop.TriggerKind{sched, arrival}, wantJobs: map[int][]string{1: {"b"}},
			wantJCT: map[string]float64{"a": 1000, "b": 3 + 100}},
		{name: "an arrival after the gap starts at once", cluster: twoModels,
			jobs:       []workload.JobSpec{job("a", 0, 1000, 1, "fast", 1.0), job("b", 42, 100, 1, "fast", 1.0, "slow", 1.0)},
			wantStarts: []float64{0, 42}, wantTriggers: []loop.TriggerKind{sched, arrival}, wantJobs: map[int][]string{1: {"b"}},
			wantJCT: map[string]float64{"a": 1000, "b": 100}},
		{name: "an arrival with no idle GPU waits, and a finish starts it", cluster: twoModels,
			jobs: []workload.JobSpec{job("a", 0, 1000, 1, "fast", 1.0), job("a2", 0, 150, 1, "slow", 1.0),
				job("b", 30, 100, 1, "fast", 1.0, "slow", 1.0)},
			// b waits through the regular round at 100; a2's finish at 150 starts it.
			wantStarts: []float64{0, 100, 150}, wantTriggers: []loop.TriggerKind{sched, sched, finish}, wantJobs: map[int][]string{2: {"a2"}},
			wantJCT: map[string]float64{"a": 1000, "a2": 150, "b": 120 + 100}},
		{name: "a burst of arrivals is one round", cluster: four,
			jobs: []workload.JobSpec{job("a", 0, 1000, 1, "fast", 1.0), job("b", 1, 50, 1, "fast", 1.0), job("c", 2, 50, 1, "fast", 1.0),
				job("d", 3, 50, 1, "fast", 1.0)},
			// b, c and d finish at 55 with nobody waiting: no round for that.
			wantStarts: []float64{0, 5, 105}, wantTriggers: []loop.TriggerKind{sched, arrival, sched}, wantJobs: map[int][]string{1: {"b", "c", "d"}},
			wantJCT: map[string]float64{"a": 1000, "b": 54, "c": 53, "d": 52}},
		{name: "a finish with nobody waiting brings nothing forward; an arrival on an idle cluster does", cluster: twoModels,
			jobs:       []workload.JobSpec{job("a", 0, 50, 1, "fast", 1.0), job("b", 250, 50, 1, "fast", 1.0)},
			wantStarts: []float64{0, 100, 200, 250}, wantTriggers: []loop.TriggerKind{sched, sched, sched, arrival}, wantJobs: map[int][]string{3: {"b"}},
			wantJCT: map[string]float64{"a": 50, "b": 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lg, err := sim.Run(context.Background(), policy.NewFIFOPerf(policy.Options{}), &workload.SliceSource{Jobs: tc.jobs},
				sim.Config{Cluster: tc.cluster, RoundSeconds: 100, MinRoundGapSeconds: 5, KeepRecords: true})
			if err != nil {
				t.Fatal(err)
			}
			var starts []float64
			var triggers []loop.TriggerKind
			jobs := map[int][]string{}
			for k, r := range lg.Rounds[:min(len(lg.Rounds), len(tc.wantStarts))] {
				starts, triggers = append(starts, r.Start), append(triggers, r.Trigger)
				if tj := lg.Records[k].TriggerJobs; tj != nil {
					jobs[k] = tj
				}
			}
			if d := cmp.Diff(tc.wantStarts, starts); d != "" {
				t.Errorf("round starts (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantTriggers, triggers); d != "" {
				t.Errorf("triggers (-want,+got):\n%s", d)
			}
			if tc.wantJobs == nil {
				tc.wantJobs = map[int][]string{}
			}
			if d := cmp.Diff(tc.wantJobs, jobs); d != "" {
				t.Errorf("trigger jobs by round (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantJCT, jctByID(t, lg)); d != "" {
				t.Errorf("JCT (-want,+got):\n%s", d)
			}
		})
	}
}

// A restart longer than a short round goes on in the next one: a moves to slow at 10 (60 s
// restart), an early round at 40 keeps it there, and the last 30 s of its restart are still
// charged, so it finishes at 70 + 90, not 40 + 90.
func TestEarlyRoundRestartCarriesOver(t *testing.T) {
	round := 0 // the loop's round; Snapshot.Round is the fairness clock's whole part
	script := scripted{func(s *policy.Snapshot) (policy.Assignment, error) {
		want := map[int]policy.Assignment{0: {"a": "fast"}, 1: {"a": "slow", "b": "fast"}}[round]
		round++
		if want == nil {
			want = policy.Assignment{"a": "slow", "c": "fast"}
		}
		a := policy.Assignment{}
		for _, j := range s.Jobs {
			if m, ok := want[j.ID]; ok {
				a[j.ID] = m
			}
		}
		return a, nil
	}}
	jobs := []workload.JobSpec{job("a", 0, 100, 1, "fast", 1.0, "slow", 1.0), job("b", 10, 30, 1, "fast", 1.0), job("c", 20, 1000, 1, "fast", 1.0)}
	lg, err := sim.Run(context.Background(), script, &workload.SliceSource{Jobs: jobs},
		sim.Config{Cluster: twoModels, RoundSeconds: 100, RestartSeconds: 60, MinRoundGapSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	var starts, lengths []float64
	for _, r := range lg.Rounds[:4] {
		starts, lengths = append(starts, r.Start), append(lengths, r.Seconds)
	}
	if d := cmp.Diff([]float64{0, 10, 40, 140}, starts); d != "" {
		t.Errorf("round starts (-want,+got):\n%s", d)
	}
	if d := cmp.Diff([]float64{10, 30, 100, 100}, lengths); d != "" {
		t.Errorf("round lengths (-want,+got):\n%s", d)
	}
	if got := jctByID(t, lg); got["a"] != 160 || got["b"] != 30 {
		t.Errorf("JCT a %g, b %g; want 160 (the restart carried over) and 30", got["a"], got["b"])
	}
}

// On random workloads with early rounds: no round starts closer than the gap to the previous
// one or later than R after it, each round lasts until the next starts, no job progresses
// faster than its rate on the GPUs it holds (and, without restarts, exactly at it), every
// job finishes with all its work, and no model's GPUs are over-used.
func TestEarlyRoundInvariants(t *testing.T) {
	// Not Gavel's fifo: it can leave a job waiting for good (see policy.NewFIFO), early rounds or not.
	names := []string{policy.DefaultName, policy.FFTName, policy.GavelFTFName, policy.GavelLASName, policy.SiaName, policy.AlloXName}
	rng := rand.New(rand.NewPCG(7, 3))
	for i := 0; i < 60; i++ {
		name := names[i%len(names)]
		w := randomWorkload(rng)
		gap := []float64{1, 5, 30}[rng.IntN(3)]
		t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
			pol, _ := policy.New(name, policy.Options{Seed: 1, RestartSeconds: w.restart})
			lg, err := sim.Run(context.Background(), pol, &workload.SliceSource{Jobs: w.jobs}, sim.Config{Cluster: w.cluster, RoundSeconds: w.roundS,
				RestartSeconds: w.restart, MinRoundGapSeconds: gap, MaxRounds: 5000})
			if err != nil {
				t.Fatal(err)
			}
			if lg.Stopped != "" {
				t.Fatalf("stopped: %s", lg.Stopped)
			}
			checkRoundTimes(t, lg, gap)
			checkWorkAndCapacity(t, lg, w.restart)
		})
	}
}

func checkRoundTimes(t *testing.T, lg *sim.Log, gap float64) {
	t.Helper()
	const eps = 1e-6
	for k := 1; k < len(lg.Rounds); k++ {
		prev, r := lg.Rounds[k-1], lg.Rounds[k]
		d := r.Start - prev.Start
		if d < gap-eps || d > lg.RoundSeconds+eps || math.Abs(prev.Seconds-d) > eps {
			t.Fatalf("round %d starts %g s after round %d, which lasted %g s (gap %g, R %g)", k, d, k-1, prev.Seconds, gap, lg.RoundSeconds)
		}
		if r.Trigger.Early() != (d < lg.RoundSeconds-eps) {
			t.Fatalf("round %d, %g s after the last, is recorded as %q", k, d, r.Trigger)
		}
	}
}

// checkWorkAndCapacity replays the log's events, each within its round: each job's time on
// each model bounds the work it can have done, and the jobs holding GPUs after each round's
// changes fit the models.
func checkWorkAndCapacity(t *testing.T, lg *sim.Log, restart float64) {
	t.Helper()
	capacity := map[string]int{}
	for _, m := range lg.Cluster {
		capacity[m.Name] = m.GPUs
	}
	type hold struct {
		model string
		since float64
	}
	on := map[int32]hold{}
	possible := make([]float64, len(lg.Jobs)) // work at full rate over the time held
	finished, rejected := 0, 0
	release := func(j int32, at float64) {
		h, ok := on[j]
		if !ok {
			t.Fatalf("job %d released at %g without holding GPUs", j, at)
		}
		possible[j] += lg.Jobs[j].Rate[h.model] * (at - h.since)
		delete(on, j)
	}
	check := func(at float64) {
		used := map[string]int{}
		for j, h := range on {
			used[h.model] += lg.Jobs[j].GPUs
		}
		for m, n := range used {
			if n > capacity[m] {
				t.Fatalf("at %g s, %d GPUs of %s in use, of %d", at, n, m, capacity[m])
			}
		}
	}
	round, at := int32(-1), 0.0
	for _, e := range lg.Events {
		if e.Kind == sim.EvArrive {
			continue // logged when admitted, at its own time
		}
		// A round's changes happen at its start, its finishes within it.
		r := lg.Rounds[e.Round]
		if e.Kind != sim.EvFinish && e.Time != r.Start || e.Kind == sim.EvFinish && (e.Time < r.Start || e.Time > r.Start+r.Seconds+1e-9) {
			t.Fatalf("event %+v outside its round, %g s from %g s", e, r.Seconds, r.Start)
		}
		if e.Kind == sim.EvFinish || e.Round != round {
			check(at)
		}
		round, at = e.Round, e.Time
		switch e.Kind {
		case sim.EvRun:
			on[e.Job] = hold{lg.ModelName(e), e.Time}
		case sim.EvMigrate:
			release(e.Job, e.Time)
			on[e.Job] = hold{lg.ModelName(e), e.Time}
		case sim.EvPreempt:
			release(e.Job, e.Time)
		case sim.EvFinish:
			release(e.Job, e.Time)
			finished++
		case sim.EvReject:
			rejected++
		}
	}
	check(at)
	if finished+rejected != len(lg.Jobs) || len(on) != 0 {
		t.Fatalf("%d jobs finished and %d rejected of %d; %d still hold GPUs", finished, rejected, len(lg.Jobs), len(on))
	}
	ids := make([]int, 0, len(lg.Jobs))
	for j := range lg.Jobs {
		ids = append(ids, j)
	}
	sort.Ints(ids)
	for _, j := range ids {
		if possible[j] == 0 {
			continue // rejected
		}
		work := lg.Jobs[j].Work
		if work > possible[j]*(1+1e-9)+1e-9 {
			t.Fatalf("job %d did %g work in time worth %g at its rates", j, work, possible[j])
		}
		if restart == 0 && math.Abs(work-possible[j]) > 1e-6*work {
			t.Fatalf("job %d, no restarts: did %g work in time worth %g at its rates", j, work, possible[j])
		}
	}
}
