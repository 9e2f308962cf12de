package allocator_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// unitsConfig is the unit-free objective with the given debt, restarts
// priced at 60 s (the configuration the policy registry builds).
func unitsConfig(debt allocator.Debt, fair float64) allocator.Config {
	c := allocator.DefaultConfig()
	c.Objective, c.Debt = allocator.ObjectiveUnits, debt
	c.Volume = allocator.VolumeRemaining
	c.Weights.JCT, c.Weights.Fairness = 0, fair
	c.PricePreemption, c.RestartSeconds = true, 60
	return c
}

// rateConfig is unitsConfig with the completion-rate volume term and the
// FTF debt.
func rateConfig(fair float64) allocator.Config {
	c := unitsConfig(allocator.DebtFTF, fair)
	c.Volume = allocator.VolumeRate
	return c
}

// world is a small cluster run for a few rounds the way the live loop runs
// it: Reconcile the ledger, decide, credit the work, Advance.
type world struct {
	models []allocator.Model
	jobs   []allocator.Job
	state  fairness.State
	cfg    allocator.Config
	round  int
}

func (w *world) capacity() map[string]int {
	c := map[string]int{}
	for _, m := range w.models {
		c[m.Name] = m.GPUs
	}
	return c
}

// step runs one round and returns its decision.
func (w *world) step(t *testing.T) *allocator.Decision {
	t.Helper()
	active := make([]fairness.Job, 0, len(w.jobs))
	for _, j := range w.jobs {
		active = append(active, fairness.Job{ID: j.ID, Arrival: j.Arrival, Work: j.Work, GPUs: j.GPUs, Throughput: j.Throughput})
	}
	if rej := w.state.Reconcile(active, w.capacity()); len(rej) != 0 {
		t.Fatalf("rejected %v", rej)
	}
	// The decision prices its options from the instance when asked
	// (JobDecision.Options), after this step has moved the jobs on: it
	// gets its own copy of them.
	in := &allocator.Instance{Round: w.round, Models: w.models, Jobs: slices.Clone(w.jobs), Fairness: w.state, Config: w.cfg}
	d, err := allocator.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	achieved := map[string]float64{}
	kept := w.jobs[:0]
	for k := range w.jobs {
		j := w.jobs[k]
		m := d.Jobs[k].Model
		j.Running = m != ""
		if m != "" {
			if th, left := j.Throughput[m], j.Remaining(); th < left {
				achieved[j.ID] = th
				j.Done += th
			} else {
				// Done + (Work - Done) may round below Work: finish exactly.
				achieved[j.ID] = left
				j.Done = j.Work
			}
			j.LastModel = m
		}
		if j.Remaining() > 0 {
			kept = append(kept, j)
		}
	}
	w.jobs = kept
	w.state.Advance(w.round, achieved)
	w.round++
	return d
}

// randomWorld draws 2-7 jobs on 1-3 models, some mid-run.
func randomWorld(r *rand.Rand, cfg allocator.Config) *world {
	names := []string{"V100", "P100", "K80"}
	w := &world{cfg: cfg, round: 5 + r.IntN(20)}
	for i := range 1 + r.IntN(3) {
		w.models = append(w.models, allocator.Model{Name: names[i], GPUs: 1 + r.IntN(6)})
	}
	for k := range 2 + r.IntN(6) {
		j := allocator.Job{ID: fmt.Sprint("j", k), Arrival: r.IntN(w.round + 1), GPUs: 1 << r.IntN(2),
			Work: math.Exp(r.Float64() * 8), Throughput: map[string]float64{}, StateGB: 4 * r.Float64()}
		base := math.Exp(r.Float64()*6 - 3)
		for _, m := range w.models {
			if r.IntN(4) > 0 && m.GPUs >= j.GPUs {
				j.Throughput[m.Name] = base * (0.2 + r.Float64())
			}
		}
		if len(j.Throughput) == 0 {
			j.Throughput[w.models[0].Name] = base
			w.models[0].GPUs = max(w.models[0].GPUs, j.GPUs)
		}
		j.Work *= base
		if r.IntN(2) == 0 {
			j.Done = j.Work * r.Float64() * 0.8
			for m := range j.Throughput {
				j.LastModel = m
			}
			j.Running = r.IntN(2) == 0
		}
		w.jobs = append(w.jobs, j)
	}
	// The ledger's history: earlier rounds' rho, as Eq. 5 would leave it.
	w.state.Reconcile(w.fairnessJobs(), w.capacity())
	for id, st := range w.state.Jobs {
		st.Rho = st.FairShare() * r.Float64() * 5
		w.state.Jobs[id] = st
	}
	w.state.Round = w.round
	return w
}

func (w *world) fairnessJobs() []fairness.Job {
	out := make([]fairness.Job, 0, len(w.jobs))
	for _, j := range w.jobs {
		out = append(out, fairness.Job{ID: j.ID, Arrival: j.Arrival, Work: j.Work, GPUs: j.GPUs, Throughput: j.Throughput})
	}
	return out
}

// scaled copies w with job k's work, progress, throughputs and ledger rho
// multiplied by factor(k) (1 leaves a job as it is).
func (w *world) scaled(factor func(k int) float64) *world {
	c := &world{models: w.models, cfg: w.cfg, round: w.round, state: fairness.State{Round: w.state.Round, Jobs: map[string]fairness.JobState{}}}
	for k, j := range w.jobs {
		f := factor(k)
		j.Work *= f
		j.Done *= f
		th := make(map[string]float64, len(j.Throughput))
		for m, v := range j.Throughput {
			th[m] = v * f
		}
		j.Throughput = th
		c.jobs = append(c.jobs, j)
		st := w.state.Jobs[j.ID]
		st.Work *= f
		st.Rho *= f
		c.state.Jobs[j.ID] = st
	}
	return c
}

// TestUnitsObjectiveIsScaleInvariant: on 10,000 random instances run for
// four rounds with the ledger advanced, multiplying one job's (or every
// job's) work, progress and throughputs by k changes no decision. For k a
// power of two the arithmetic is exact, so every cost term is bit for bit
// the same; for k in [1e-3, 1e3] the assignments are identical.
func TestUnitsObjectiveIsScaleInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	configs := []allocator.Config{
		unitsConfig(allocator.DebtLag, 1), unitsConfig(allocator.DebtLag, 4),
		unitsConfig(allocator.DebtLate, 1), unitsConfig(allocator.DebtShortfall, 1000),
		rateConfig(1), rateConfig(4),
	}
	const instances = 10000
	for n := range instances {
		cfg := configs[n%len(configs)]
		w := randomWorld(r, cfg)
		pow2 := n%2 == 0
		draw := func() float64 {
			if pow2 {
				return math.Ldexp(1, r.IntN(21)-10)
			}
			return math.Exp((r.Float64()*2 - 1) * 3 * math.Ln10)
		}
		one, k := r.IntN(len(w.jobs)), draw()
		factors := make([]float64, len(w.jobs))
		for i := range factors {
			switch {
			case n%4 < 2 && i == one:
				factors[i] = k
			case n%4 < 2:
				factors[i] = 1
			default:
				factors[i] = draw()
			}
		}
		s := w.scaled(func(i int) float64 { return factors[i] })
		for round := range 4 {
			if len(w.jobs) == 0 {
				break
			}
			a, b := w.step(t), s.step(t)
			if fmt.Sprint(a.Assignment()) != fmt.Sprint(b.Assignment()) {
				t.Fatalf("instance %d (%s debt %s, factors %v), round %d: assignment %v, scaled %v",
					n, cfg.Objective, cfg.Debt, factors, round, a.Assignment(), b.Assignment())
			}
			if !pow2 {
				continue
			}
			for k := range a.Jobs {
				if unitFree(a.Jobs[k].Options()) != unitFree(b.Jobs[k].Options()) || a.Jobs[k].Debt != b.Jobs[k].Debt {
					t.Fatalf("instance %d, round %d, job %s scaled by %v: terms %v debt %v, scaled %v debt %v",
						n, round, a.Jobs[k].ID, factors[k], a.Jobs[k].Options(), a.Jobs[k].Debt, b.Jobs[k].Options(), b.Jobs[k].Debt)
				}
			}
		}
	}
}

// unitFree prints the terms without the throughput, the one field that
// is in the job's unit.
func unitFree(opts []allocator.Terms) string {
	out := ""
	for _, o := range opts {
		o.Throughput = 0
		out += fmt.Sprint(o)
	}
	return out
}

// issueInstance is issue 10's two jobs on one A100: "in-steps" arrived 8
// rounds after "in-epochs" and declares the same kind of work in steps.
// stepsPerEpoch = 1 is its fair equivalent: both in epochs.
func issueInstance(cfg allocator.Config, stepsPerEpoch float64) *allocator.Instance {
	k := stepsPerEpoch
	return &allocator.Instance{
		Round:  10,
		Models: []allocator.Model{{Name: "A100", GPUs: 1}},
		Jobs: []allocator.Job{
			{ID: "in-epochs", Arrival: 0, GPUs: 1, Work: 10, Throughput: map[string]float64{"A100": 1}},
			{ID: "in-steps", Arrival: 8, GPUs: 1, Work: 10 * k, Throughput: map[string]float64{"A100": k}},
		},
		Fairness: fairness.State{Round: 10, Jobs: map[string]fairness.JobState{
			"in-epochs": {Arrival: 0, Work: 10, Tau: 20, Rho: 5},
			"in-steps":  {Arrival: 8, Work: 10 * k, Tau: 28, Rho: 0.05 * k},
		}},
		Config: cfg,
	}
}

// TestIssueInstance: the paper's objective gives the GPU to the job that
// declared its work in steps (credit 50,000 against 5); the unit-free one
// gives it to the job owed more, whatever unit the other declares.
func TestIssueInstance(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  allocator.Config
		k    float64
		want string
	}{
		{"paper, in steps", allocator.DefaultConfig(), 1000, "in-steps"},
		{"paper, both in epochs", allocator.DefaultConfig(), 1, "in-epochs"},
		{"units lag, in steps", unitsConfig(allocator.DebtLag, 1), 1000, "in-epochs"},
		{"units lag, both in epochs", unitsConfig(allocator.DebtLag, 1), 1, "in-epochs"},
		{"units late, in steps", unitsConfig(allocator.DebtLate, 1), 1000, "in-epochs"},
		{"units shortfall, in steps", unitsConfig(allocator.DebtShortfall, 1000), 1000, "in-epochs"},
		{"rate, in steps", rateConfig(1), 1000, "in-epochs"},
		{"rate, both in epochs", rateConfig(1), 1, "in-epochs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := allocator.Decide(context.Background(), issueInstance(tc.cfg, tc.k))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Assignment(); len(got) != 1 || got[tc.want] != "A100" {
				t.Fatalf("assignment %v, want %s on the A100", got, tc.want)
			}
		})
	}
}

// TestJobDebt prices the three debts of one job against hand-computed
// values, and the credit they give.
func TestJobDebt(t *testing.T) {
	// Reference: arrival 2, tau 22 (span 20), work 40 at 4 units per
	// round on V100, 1 on K80: f = 2 units per round. At round 12 the
	// reference has done 20; the job has done 8, so it is 12 units behind.
	j := &allocator.Job{ID: "a", Arrival: 2, GPUs: 2, Work: 40, Done: 8, Throughput: map[string]float64{"V100": 4, "K80": 1}}
	st := fairness.JobState{Arrival: 2, Work: 40, Tau: 22, Rho: 6}
	v100, k80 := &allocator.Model{Name: "V100", GPUs: 4}, &allocator.Model{Name: "K80", GPUs: 4}
	for _, tc := range []struct {
		name string
		cfg  allocator.Config
		// debt in rounds; credit on V100 and K80.
		debt, v100, k80 float64
	}{
		{"paper: rho itself, credit rho*theta", allocator.DefaultConfig(), 6, 6 * 4, 6 * 1},
		{"shortfall: rho/theta*", unitsConfig(allocator.DebtShortfall, 1), 1.5, 2 * 1.5, 2 * 1.5 / 4},
		{"lag: 12 units behind / 4 per round", unitsConfig(allocator.DebtLag, 1), 3, 2 * 3, 2 * 3 / 4.},
		{"late: 12 units behind / f = 2", unitsConfig(allocator.DebtLate, 1), 6, 2 * 6, 2 * 6 / 4.},
		{"lag, weight 2", unitsConfig(allocator.DebtLag, 2), 3, 2 * 2 * 3, 2 * 2 * 3 / 4.},
		{"ftf: 12 units behind / W = 40", rateConfig(1), 0.3, 2 * 0.3, 2 * 0.3 / 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debt := tc.cfg.JobDebt(j, 12, st)
			if debt != tc.debt {
				t.Fatalf("debt = %v, want %v", debt, tc.debt)
			}
			if got := tc.cfg.Terms(j, v100, 12, debt).Credit; got != tc.v100 {
				t.Errorf("V100 credit = %v, want %v", got, tc.v100)
			}
			if got := tc.cfg.Terms(j, k80, 12, debt).Credit; got != tc.k80 {
				t.Errorf("K80 credit = %v, want %v", got, tc.k80)
			}
		})
	}
	// Ahead of the reference: no debt.
	ahead := *j
	ahead.Done = 30
	lag := unitsConfig(allocator.DebtLag, 1)
	if got := lag.JobDebt(&ahead, 12, st); got != 0 {
		t.Errorf("debt of a job ahead of its reference = %v, want 0", got)
	}
}

// TestUnitsRestartPrices: under the unit-free objective a restart costs
// d_j * restart_seconds / R GPU-rounds, the unit of the volume term, so a
// parked job displaces a running one only when it saves more GPU-rounds
// than the two restarts of the trade (one now, one for the parked job
// later) cost, and a model change is priced with its checkpoint's move.
func TestUnitsRestartPrices(t *testing.T) {
	v100 := &allocator.Model{Name: "V100", GPUs: 1}
	for _, tc := range []struct {
		restart float64
		// gain is how many GPU-rounds less the parked job has left.
		gain       float64
		wantRunner string
	}{
		{0, 0.01, "parked"},
		{60, 2*0.2 - 0.01, "running"},
		{60, 2*0.2 + 0.01, "parked"},
		{120, 2*0.4 - 0.01, "running"},
		{120, 2*0.4 + 0.01, "parked"},
	} {
		t.Run(fmt.Sprintf("restart %gs gain %g", tc.restart, tc.gain), func(t *testing.T) {
			cfg := unitsConfig(allocator.DebtLag, 1)
			cfg.RestartSeconds = tc.restart
			in := &allocator.Instance{Round: 3, Models: []allocator.Model{*v100}, Config: cfg,
				Jobs: []allocator.Job{
					{ID: "running", GPUs: 1, Work: 10, Throughput: map[string]float64{"V100": 1}, LastModel: "V100", Running: true},
					{ID: "parked", GPUs: 1, Work: 10 - tc.gain, Throughput: map[string]float64{"V100": 1}, LastModel: "V100"},
				}}
			d, err := allocator.Decide(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Assignment(); len(got) != 1 || got[tc.wantRunner] != "V100" {
				t.Fatalf("assignment %v, want %s on V100", got, tc.wantRunner)
			}
		})
	}
	// The prices themselves, for a 2-GPU job with 5 GB of state at 10
	// Gbit/s: p = 2 * 60 / 300 = 0.4; a move 2 * (60 + 4) / 300.
	cfg := unitsConfig(allocator.DebtLag, 1)
	j := allocator.Job{ID: "a", GPUs: 2, Work: 10, StateGB: 5, Throughput: map[string]float64{"V100": 2, "K80": 1}}
	k80 := &allocator.Model{Name: "K80", GPUs: 2}
	for _, tc := range []struct {
		name       string
		last       string
		running    bool
		v100, k80w float64
	}{
		{"never ran: free", "", false, 0, 0},
		{"running on V100: staying keeps the park price, moving pays the move", "V100", true, -0.4, 2*64/300. - 0.4},
		{"parked after V100: resuming pays a restart", "V100", false, 0.4, 2 * 64 / 300.},
	} {
		j.LastModel, j.Running = tc.last, tc.running
		if got := cfg.Terms(&j, v100, 3, 0).Switch; math.Abs(got-tc.v100) > 1e-15 {
			t.Errorf("%s: V100 switch %v, want %v", tc.name, got, tc.v100)
		}
		if got := cfg.Terms(&j, k80, 3, 0).Switch; math.Abs(got-tc.k80w) > 1e-15 {
			t.Errorf("%s: K80 switch %v, want %v", tc.name, got, tc.k80w)
		}
	}
}

// TestRateRestartPrices: under volume "rate" a restart loses its share s =
// restart_seconds / R of the round, so a parked job with remaining work
// rem_p displaces a running one with rem_r only when the round it gets,
// net of its restart, beats the running job's round plus the restart
// that job will owe: (1 - s) / rem_p > (1 + s) / rem_r.
func TestRateRestartPrices(t *testing.T) {
	for _, tc := range []struct {
		restart, parkedWork float64
		wantRunner          string
	}{
		{0, 9.99, "parked"},
		{0, 10.01, "running"},
		{60, 6.6, "parked"}, // threshold 10 * 0.8 / 1.2 = 6.67
		{60, 6.7, "running"},
		{120, 4.2, "parked"}, // threshold 10 * 0.6 / 1.4 = 4.29
		{120, 4.4, "running"},
	} {
		t.Run(fmt.Sprintf("restart %gs parked %g", tc.restart, tc.parkedWork), func(t *testing.T) {
			cfg := rateConfig(1)
			cfg.RestartSeconds = tc.restart
			in := &allocator.Instance{Round: 3, Models: []allocator.Model{{Name: "V100", GPUs: 1}}, Config: cfg,
				Jobs: []allocator.Job{
					{ID: "running", GPUs: 1, Work: 10, Throughput: map[string]float64{"V100": 1}, LastModel: "V100", Running: true},
					{ID: "parked", GPUs: 1, Work: tc.parkedWork, Throughput: map[string]float64{"V100": 1}, LastModel: "V100"},
				}}
			d, err := allocator.Decide(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Assignment(); len(got) != 1 || got[tc.wantRunner] != "V100" {
				t.Fatalf("assignment %v, want %s on V100", got, tc.wantRunner)
			}
		})
	}
}
