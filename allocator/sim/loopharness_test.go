package sim_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// The simulator is an adapter of the allocator's own loop, not a copy of it: on random
// workloads, sim.Run and the live service driven by the loop's test harness (loop.Harness,
// which applies plans as Nomad does, with this test playing the training tasks: true
// progress, restarts charged, finished allocations) decide alike, round by round.
func TestSimulatorIsTheServiceLoop(t *testing.T) {
	names := []string{policy.FFTName, policy.FFTStickyName, policy.GavelFTFName, policy.LASName, policy.FIFOName, policy.SiaName}
	rng := rand.New(rand.NewPCG(9, 1))
	for i := 0; i < 72; i++ {
		name := names[i%len(names)]
		w := randomWorkload(rng)
		// Every sixth workload hides the rates: the loop learns them.
		w.learn = i/len(names)%6 == 5
		t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
			simPol, _ := policy.New(name, policy.Options{Seed: 1})
			lg, err := sim.Run(context.Background(), simPol, &workload.SliceSource{Jobs: w.jobs}, sim.Config{Cluster: w.cluster, HostGPUs: w.hostGPUs, RoundSeconds: w.roundS,
				RestartSeconds: w.restart, KeepRecords: true, MaxRounds: 400, Learn: w.learn})
			if err != nil {
				t.Fatal(err)
			}
			livePol, _ := policy.New(name, policy.Options{Seed: 1})
			got := runHarness(t, livePol, w, len(lg.Records))
			if len(lg.Records) == 0 {
				t.Fatal("the simulation ran no round")
			}
			for r, want := range lg.Records {
				if d := cmp.Diff(roundView(want), roundView(got[r])); d != "" {
					t.Fatalf("round %d differs (-simulator,+service):\n%s", r, d)
				}
			}
		})
	}
}

// simCase is a small random cluster and job list.
type simCase struct {
	cluster         []allocator.Model
	hostGPUs        map[string]int
	jobs            []workload.JobSpec
	roundS, restart float64
	learn           bool
}

func randomWorkload(rng *rand.Rand) simCase {
	w := simCase{roundS: 100, restart: []float64{0, 30, 60}[rng.IntN(3)]}
	models := []string{"a", "b", "c"}[:2+rng.IntN(2)]
	hosts := rng.IntN(2) == 0 // half the cases have several hosts per model
	w.hostGPUs = map[string]int{}
	for _, m := range models {
		w.cluster = append(w.cluster, allocator.Model{Name: m, GPUs: 1 + rng.IntN(4)})
		if g := w.cluster[len(w.cluster)-1].GPUs; hosts && g%2 == 0 {
			w.hostGPUs[m] = g / 2
		}
	}
	n := 3 + rng.IntN(8)
	for k := 0; k < n; k++ {
		j := workload.JobSpec{ID: fmt.Sprintf("j%02d", k), Type: []string{"ResNet-50 (batch size 64)", "LM (batch size 20)", "A3C"}[k%3], Arrival: math.Floor(rng.Float64() * 500), GPUs: []int{1, 1, 2, 4}[rng.IntN(4)],
			Work: float64(50 + rng.IntN(400)), Rate: map[string]float64{}}
		for _, m := range models {
			if rng.IntN(4) > 0 {
				j.Rate[m] = 0.1 + rng.Float64()
				if j.GPUs > 1 && rng.IntN(2) == 0 {
					// Slower when spread over hosts, as Gavel's unconsolidated rates.
					if j.SpreadRate == nil {
						j.SpreadRate = map[string]float64{}
					}
					j.SpreadRate[m] = j.Rate[m] * (0.3 + 0.6*rng.Float64())
				}
			}
		}
		w.jobs = append(w.jobs, j)
	}
	slices.SortStableFunc(w.jobs, func(a, b workload.JobSpec) int { return int(a.Arrival - b.Arrival) })
	return w
}

// runHarness runs rounds of the live service over loop.Harness, the test being Nomad's
// clients and the training tasks: it admits arrivals as held jobs, reports each job's true
// progress, runs the jobs the plan placed for a round (restarts charged) and reports
// finished allocations once.
func runHarness(t *testing.T, pol policy.Policy, w simCase, rounds int) []*loop.RoundRecord {
	t.Helper()
	capacity := map[string]bool{}
	var models []allocator.Model
	for _, m := range w.cluster {
		models = append(models, allocator.Model{Name: m.Name, GPUs: m.GPUs})
		capacity[m.Name] = true
	}
	h := &loop.Harness{Models: models, Jobs: map[string]*loop.Job{}, Hosts: sim.Hosts(w.cluster, w.hostGPUs)}
	store := loop.NewMemStore(true)
	now := 0.0
	cfg := allocator.DefaultConfig()
	cfg.RoundSeconds, cfg.RestartSeconds = w.roundS, w.restart
	clock := func() time.Time { return sim.Epoch.Add(time.Duration(now * float64(time.Second))) }
	svc := live.New(loop.New(h, h, store, loop.WithPolicy(pol), loop.WithConfig(cfg), loop.WithClock(clock)), live.WithClock(clock))
	type task struct {
		spec        workload.JobSpec
		done        float64
		last        string
		pendRestart bool
	}
	tasks := map[string]*task{}
	next := 0
	for r := 0; r < rounds; r++ {
		for ; next < len(w.jobs) && w.jobs[next].Arrival <= now; next++ {
			spec := w.jobs[next]
			fits := false
			tp := map[string]float64{}
			for m, rate := range spec.Rate {
				tp[m] = rate * w.roundS
				for _, cm := range w.cluster {
					fits = fits || (cm.Name == m && cm.GPUs >= spec.GPUs)
				}
			}
			js := &jobmeta.Spec{Work: spec.Work, WorkUnit: "steps", Throughput: tp, SpreadThroughput: sim.SpreadThroughput(&spec, tp), Weight: 1, GPUs: spec.GPUs}
			if w.learn {
				js.Throughput, js.LearnThroughput, js.Family = nil, true, sim.Family(spec.Type)
				for _, cm := range w.cluster {
					fits = fits && (cm.GPUs < spec.GPUs || spec.Rate[cm.Name] > 0)
				}
			}
			if !fits {
				continue // the simulator rejects it at admission
			}
			h.Set(loop.Job{ID: spec.ID, Namespace: sim.Namespace, Name: spec.ID, Gated: true, Spec: js, Pieces: sim.PiecesFor(policy.PlacementOf(pol.Name()), h.Hosts, spec.GPUs)})
			tasks[spec.ID] = &task{spec: spec}
		}
		for id, tk := range tasks {
			_ = store.ReportProgress(context.Background(), id, tk.done)
		}
		before := map[string]string{}
		for id, j := range h.Jobs {
			before[id] = fmt.Sprint(j.RunningModel, j.Slots)
		}
		if _, err := svc.RunRound(context.Background()); err != nil {
			t.Fatalf("service round %d: %v", r, err)
		}
		// Allocations that completed were seen once; Nomad's GC takes them.
		for id, j := range h.Jobs {
			if j.Finished {
				delete(h.Jobs, id)
			}
		}
		// The tasks run for a round.
		for id, j := range h.Jobs {
			tk := tasks[id]
			m := j.RunningModel
			if m == "" {
				continue
			}
			if before[id] != fmt.Sprint(m, j.Slots) && tk.last != "" {
				tk.pendRestart = true // resumed after a park, or moved (to another model or host)
			}
			penalty := 0.0
			if tk.pendRestart {
				penalty, tk.pendRestart = math.Min(w.restart, w.roundS), false
			}
			tk.last = m
			tk.done = math.Min(tk.spec.Work, tk.done+trueRate(tk.spec, m, j.Slots)*(w.roundS-penalty))
			if tk.done >= tk.spec.Work {
				j.Finished, j.Allocs, j.RunningModel = true, nil, ""
				delete(tasks, id)
			}
		}
		now += w.roundS
	}
	return store.Records()
}

// roundView is what the comparison looks at in a round record: the decision and its plan,
// and each job's action and rho.
func roundView(r *loop.RoundRecord) map[string]any {
	jobs := map[string]string{}
	for _, j := range r.Jobs {
		jobs[j.ID] = fmt.Sprintf("%s %s %s %.9g %.9g %v", j.Action, j.Model, j.ReasonCode, j.RhoBefore, j.RhoAfter, j.Hosts)
	}
	return map[string]any{"round": r.Round, "assignment": r.Assignment, "plan": r.Plan, "jobs": jobs, "objective": r.Objective, "moves": r.Moves}
}

// trueRate is a task's steps/s on model m in these slots: its spread rate
// when they lie on several hosts.
func trueRate(spec workload.JobSpec, m string, slots []placement.Slot) float64 {
	if r := spec.SpreadRate[m]; r > 0 && placement.Hosts(slots) > 1 {
		return r
	}
	return spec.Rate[m]
}
