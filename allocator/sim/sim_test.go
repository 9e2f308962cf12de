package sim_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// scripted is a test policy: fn decides each round.
type scripted struct {
	fn func(s *policy.Snapshot) (policy.Assignment, error)
}

func (scripted) Name() string { return "scripted" }
func (p scripted) Schedule(_ context.Context, s *policy.Snapshot) (policy.Assignment, error) {
	return p.fn(s)
}

// job builds a workload.JobSpec fixture.
func job(id string, arrival, work float64, gpus int, rates ...any) workload.JobSpec {
	j := workload.JobSpec{ID: id, Arrival: arrival, Work: work, GPUs: gpus, Rate: map[string]float64{}}
	for k := 0; k+1 < len(rates); k += 2 {
		j.Rate[rates[k].(string)] = rates[k+1].(float64)
	}
	return j
}

var twoModels = []allocator.Model{{Name: "fast", GPUs: 1}, {Name: "slow", GPUs: 1}}

func jctByID(t *testing.T, lg *sim.Log) map[string]float64 {
	t.Helper()
	res, _ := metrics.Analyse(lg, nil)
	out := map[string]float64{}
	for _, r := range res {
		out[r.ID] = r.JCT
	}
	return out
}

func TestRunScenarios(t *testing.T) {
	alternate := scripted{func(s *policy.Snapshot) (policy.Assignment, error) {
		m := "fast"
		if s.Round%2 == 1 {
			m = "slow"
		}
		return policy.Assignment{s.Jobs[0].ID: m}, nil
	}}
	for _, tc := range []struct {
		name    string
		pol     policy.Policy
		jobs    []workload.JobSpec
		restart float64
		want    map[string]float64 // JCT by job
	}{
		{
			name: "fifo-perf: second job takes the slow model and keeps it",
			pol:  policy.NewFIFOPerf(policy.Options{}),
			jobs: []workload.JobSpec{job("a", 0, 100, 1, "fast", 1.0, "slow", 0.5), job("b", 0, 100, 1, "fast", 1.0, "slow", 0.5)},
			want: map[string]float64{"a": 100, "b": 200},
		},
		{
			name: "arrival between rounds waits for the next round",
			pol:  policy.NewFIFOPerf(policy.Options{}),
			jobs: []workload.JobSpec{job("a", 30, 50, 1, "fast", 1.0)},
			want: map[string]float64{"a": 70 + 50},
		},
		{
			name:    "restart cost on every change of model",
			pol:     alternate,
			jobs:    []workload.JobSpec{job("a", 0, 200, 1, "fast", 1.0, "slow", 1.0)},
			restart: 10,
			// round 0: 100 done (first start is free); round 1 on slow:
			// 10 s restart, 90 done; round 2 on fast: 10 s restart, 10 left.
			want: map[string]float64{"a": 200 + 10 + 10},
		},
		{
			name: "idle gap is skipped",
			pol:  policy.NewFIFOPerf(policy.Options{}),
			jobs: []workload.JobSpec{job("a", 0, 100, 1, "fast", 1.0), job("b", 1e6, 100, 1, "fast", 1.0)},
			want: map[string]float64{"a": 100, "b": 100},
		},
	} {
		lg, err := sim.Run(context.Background(), tc.pol, &workload.SliceSource{Jobs: tc.jobs}, sim.Config{Cluster: twoModels, RoundSeconds: 100, RestartSeconds: tc.restart})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if d := cmp.Diff(tc.want, jctByID(t, lg)); d != "" {
			t.Errorf("%s: JCT (-want,+got):\n%s", tc.name, d)
		}
	}
}

func TestRunRejectsJobThatFitsNothing(t *testing.T) {
	jobs := []workload.JobSpec{job("big", 0, 10, 4, "fast", 1.0), job("ok", 0, 10, 1, "slow", 1.0)}
	lg, err := sim.Run(context.Background(), policy.NewFIFOPerf(policy.Options{}), &workload.SliceSource{Jobs: jobs}, sim.Config{Cluster: twoModels, RoundSeconds: 100})
	if err != nil {
		t.Fatal(err)
	}
	res, s := metrics.Analyse(lg, nil)
	if s.Rejected != 1 || s.Finished != 1 || !res[0].Rejected {
		t.Errorf("rejected %d, finished %d, job 0 rejected %v; want 1, 1, true", s.Rejected, s.Finished, res[0].Rejected)
	}
	want := map[sim.EventKind]string{sim.EvArrive: "", sim.EvReject: "", sim.EvRun: "slow", sim.EvFinish: "slow"}
	for _, e := range lg.Events {
		if m, ok := want[e.Kind]; !ok || lg.ModelName(e) != m {
			t.Errorf("event %+v: %s of job %d on %q, want one of %v", e, e.Kind, e.Job, lg.ModelName(e), want)
		}
	}
}

// TestEventSize keeps the log's entry small: a long run of a policy that
// preempts every round logs tens of millions of events (sim.Event).
func TestEventSize(t *testing.T) {
	if n := unsafe.Sizeof(sim.Event{}); n > 24 {
		t.Errorf("sim.Event is %d bytes, want at most 24", n)
	}
}

func TestRunPolicyFailures(t *testing.T) {
	jobs := []workload.JobSpec{job("a", 0, 10, 1, "fast", 1.0)}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		fn    func(*policy.Snapshot) (policy.Assignment, error)
		check func(error) bool
	}{
		{"error", func(*policy.Snapshot) (policy.Assignment, error) { return nil, boom }, func(e error) bool { return errors.Is(e, boom) }},
		{"panic", func(*policy.Snapshot) (policy.Assignment, error) { panic("oops") }, func(e error) bool { var p *loop.PanicError; return errors.As(e, &p) }},
		{"unknown model", func(s *policy.Snapshot) (policy.Assignment, error) { return policy.Assignment{"a": "tpu"}, nil }, func(e error) bool {
			var a *policy.AssignmentError
			return errors.As(e, &a) && a.Reason == "unknown model"
		}},
		{"does not fit", func(s *policy.Snapshot) (policy.Assignment, error) { return policy.Assignment{"a": "slow"}, nil }, func(e error) bool {
			var a *policy.AssignmentError
			return errors.As(e, &a)
		}},
	} {
		_, err := sim.Run(context.Background(), scripted{tc.fn}, &workload.SliceSource{Jobs: jobs}, sim.Config{Cluster: twoModels, RoundSeconds: 100})
		if err == nil || !tc.check(err) {
			t.Errorf("%s: err = %v", tc.name, err)
		}
	}
}

func TestRunCapacityViolation(t *testing.T) {
	jobs := []workload.JobSpec{job("a", 0, 10, 1, "fast", 1.0), job("b", 0, 10, 1, "fast", 1.0)}
	both := scripted{func(s *policy.Snapshot) (policy.Assignment, error) {
		return policy.Assignment{"a": "fast", "b": "fast"}, nil
	}}
	_, err := sim.Run(context.Background(), both, &workload.SliceSource{Jobs: jobs}, sim.Config{Cluster: twoModels, RoundSeconds: 100})
	var a *policy.AssignmentError
	if !errors.As(err, &a) || a.Reason != "model over capacity" {
		t.Errorf("err = %v, want model over capacity", err)
	}
}

// TestRunDeterministic: every built-in policy gives
// the same log twice on the same seed, and every run respects the rules
// (Run checks each assignment).
func TestRunDeterministic(t *testing.T) {
	cl := []allocator.Model{{Name: "v100", GPUs: 8}, {Name: "p100", GPUs: 8}, {Name: "k80", GPUs: 8}}
	for _, name := range policy.Names() {
		var logs [2]*sim.Log
		for k := range logs {
			p, err := policy.New(name, policy.Options{Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			lg, err := sim.Run(context.Background(), p, workload.NewGenerator(workload.GenConfig{Rate: 1, Seed: 5, MultiGPU: true, Jobs: 40}), sim.Config{Cluster: cl, MaxRounds: 20000})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			lg.Wall = 0
			for r := range lg.Rounds {
				lg.Rounds[r].Solve = 0
			}
			logs[k] = lg
		}
		if d := cmp.Diff(logs[0].Events, logs[1].Events); d != "" {
			t.Errorf("%s: events differ between identical runs (-first,+second):\n%s", name, d)
		}
		_, s := metrics.Analyse(logs[0], nil)
		if s.Finished+s.Rejected != 40 || s.Unfinished != 0 {
			t.Errorf("%s: finished %d, rejected %d, unfinished %d of 40", name, s.Finished, s.Rejected, s.Unfinished)
		}
		if s.Utilisation <= 0 || s.Utilisation > 1+1e-9 {
			t.Errorf("%s: utilisation %v out of (0, 1]", name, s.Utilisation)
		}
	}
}

func TestRunWindowStops(t *testing.T) {
	cl := []allocator.Model{{Name: "v100", GPUs: 8}, {Name: "p100", GPUs: 8}, {Name: "k80", GPUs: 8}}
	lg, err := sim.Run(context.Background(), policy.NewFIFOPerf(policy.Options{}), workload.NewGenerator(workload.GenConfig{Rate: 1, Seed: 1}), sim.Config{Cluster: cl, Window: sim.Window{20, 30}})
	if err != nil {
		t.Fatal(err)
	}
	res, s := metrics.Analyse(lg, nil)
	if s.Measured != 10 || s.Finished != 10 {
		t.Fatalf("measured %d, finished %d; want 10, 10", s.Measured, s.Finished)
	}
	last := 0.0
	for _, r := range res[20:30] {
		last = math.Max(last, r.Finish)
	}
	if end := lg.Rounds[len(lg.Rounds)-1].Start; end > last {
		t.Errorf("run went on to %v after the window finished at %v", end, last)
	}
}

// TestRunSimTimeLimit: a run whose measured jobs cannot all finish in time
// stops at the simulated time limit, says so, and leaves them unfinished;
// a limit the run never reaches changes nothing.
func TestRunSimTimeLimit(t *testing.T) {
	cl := []allocator.Model{{Name: "v100", GPUs: 2}}
	run := func(limitS float64) *sim.Log {
		t.Helper()
		lg, err := sim.Run(context.Background(), policy.NewFIFOPerf(policy.Options{}),
			workload.NewGenerator(workload.GenConfig{Rate: 1, Seed: 2, Jobs: 30}), sim.Config{Cluster: cl, MaxSimSeconds: limitS})
		if err != nil {
			t.Fatal(err)
		}
		return lg
	}
	const limitS = 20 * 3600
	lg := run(limitS)
	if want := "simulated time limit 20h0m0s reached"; lg.Stopped != want {
		t.Fatalf("Stopped = %q, want %q", lg.Stopped, want)
	}
	if last := lg.Rounds[len(lg.Rounds)-1].Start; last >= limitS {
		t.Errorf("a round started at %v s, at or past the limit %v s", last, limitS)
	}
	if _, s := metrics.Analyse(lg, nil); s.Unfinished == 0 || s.Stopped != lg.Stopped {
		t.Errorf("unfinished %d, summary stopped %q: want jobs left unfinished and the reason kept", s.Unfinished, s.Stopped)
	}
	full := run(0)
	if full.Stopped != "" {
		t.Fatalf("the run without a limit stopped: %q", full.Stopped)
	}
	if late := run(full.Rounds[len(full.Rounds)-1].Start + 1); late.Stopped != "" || len(late.Events) != len(full.Events) {
		t.Errorf("a limit after the last round changed the run: stopped %q, %d events against %d", late.Stopped, len(late.Events), len(full.Events))
	}
	if _, err := sim.Run(context.Background(), policy.NewFIFOPerf(policy.Options{}),
		workload.NewGenerator(workload.GenConfig{Rate: 1, Seed: 2, Jobs: 3}), sim.Config{Cluster: cl, MaxSimSeconds: -1}); err == nil || !strings.Contains(err.Error(), "MaxSimSeconds") {
		t.Errorf("a negative limit gave %v, want an error naming MaxSimSeconds", err)
	}
}

// TestRunConfigBeyondTheLog: the log's events count rounds in 32 bits and
// models in 16; a run that could overflow them is refused up front, naming
// what to change.
func TestRunConfigBeyondTheLog(t *testing.T) {
	many := make([]allocator.Model, math.MaxInt16+1)
	for k := range many {
		many[k] = allocator.Model{Name: fmt.Sprintf("m%d", k), GPUs: 1}
	}
	for _, tc := range []struct {
		name string
		cfg  sim.Config
		want string
	}{
		{"models", sim.Config{Cluster: many}, "GPU models"},
		{"rounds", sim.Config{Cluster: twoModels, MaxRounds: math.MaxInt32 + 1}, "MaxRounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sim.Run(context.Background(), policy.NewFIFOPerf(policy.Options{}), &workload.SliceSource{}, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run gave %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestRoundStatsTimesAndStatus checks what each round keeps for naming a
// slow round: a policy that solves reports its search's status and nodes,
// one that does not reports none, and a round's wall time covers its
// solve.
func TestRoundStatsTimesAndStatus(t *testing.T) {
	gen := func() workload.Source {
		return workload.NewGenerator(workload.GenConfig{Rate: 2, Seed: 3, MultiGPU: true, Jobs: 20})
	}
	// Sia solves through Schedule's program but reports as a Decider.
	for _, name := range []string{policy.FFTName, policy.SiaName, policy.FIFOName} {
		t.Run(name, func(t *testing.T) {
			p, err := policy.New(name, policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			lg, err := sim.Run(context.Background(), p, gen(), sim.Config{Cluster: []allocator.Model{{Name: "v100", GPUs: 4}, {Name: "p100", GPUs: 4}, {Name: "k80", GPUs: 4}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(lg.Rounds) == 0 {
				t.Fatal("no rounds")
			}
			solved := 0
			for _, r := range lg.Rounds {
				if r.Wall < r.Solve || r.Wall < r.Place {
					t.Errorf("round %d: wall %v below solve %v or place %v", r.Round, r.Wall, r.Solve, r.Place)
				}
				switch r.Status {
				case "optimal", "feasible":
					solved++
				case "":
				default:
					t.Errorf("round %d: status %q", r.Round, r.Status)
				}
			}
			// A round with no job decides nothing, so an FFT or Sia run may
			// have a few without a status; FIFO has none with one.
			solves := name != policy.FIFOName
			if solves != (solved > 0) {
				t.Errorf("%s: %d of %d rounds with a solver status", name, solved, len(lg.Rounds))
			}
			if _, ok := lg.PolicyStats["rounds_not_optimal"]; solves != ok {
				t.Errorf("%s: policy stats %v: rounds_not_optimal kept = %v, want %v", name, lg.PolicyStats, ok, solves)
			}
		})
	}
}
