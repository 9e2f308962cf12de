package allocator_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/instancegen"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// TestPreemptionPenalty prices each state a job can be in on each model,
// with the option on and off.
func TestPreemptionPenalty(t *testing.T) {
	const (
		p  = 2 * 30.0 / 300           // d_j * restart / R
		sw = 2 * (30 + 5*8/10.) / 300 // the paper's s_j^i for a move
	)
	for _, tc := range []struct {
		name    string
		last    string
		running bool
		on      bool
		// want is Terms.Switch on V100 and on K80.
		wantV100, wantK80 float64
	}{
		{"never ran", "", false, true, 0, 0},
		{"running on K80: staying keeps p, moving pays the move less p", "K80", true, true, sw - p, -p},
		{"parked after K80: resuming there pays p, elsewhere the move", "K80", false, true, sw, p},
		{"off: running", "K80", true, false, sw, 0},
		{"off: parked", "K80", false, false, sw, 0},
		{"off: never ran", "", false, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := allocator.DefaultConfig()
			cfg.PricePreemption = tc.on
			j := &allocator.Job{ID: "a", Arrival: 4, GPUs: 2, Work: 100, StateGB: 5, LastModel: tc.last, Running: tc.running,
				Throughput: both(4, 1)}
			for _, c := range []struct {
				model *allocator.Model
				want  float64
			}{{&allocator.Model{Name: "V100", GPUs: 4}, tc.wantV100}, {&allocator.Model{Name: "K80", GPUs: 4}, tc.wantK80}} {
				got := cfg.Terms(j, c.model, 10, 0.5)
				if math.Abs(got.Switch-c.want) > 1e-12 {
					t.Errorf("%s: switch = %v, want %v", c.model.Name, got.Switch, c.want)
				}
				if got.Cost != got.Wait+got.Volume+got.Switch-got.Credit {
					t.Errorf("%s: cost %v is not wait + volume + switch - credit", c.model.Name, got.Cost)
				}
			}
		})
	}
}

// TestPreemptionDecides: a running job "run" and a parked one "other" on
// one model that holds one of them. The paper trades them whenever the
// other is cheaper at all; priced preemption only when it is cheaper by
// more than what the trade costs: 2p (p to park "run", p to resume
// "other") or p when "other" never ran.
func TestPreemptionDecides(t *testing.T) {
	const p = 2 * 30.0 / 300
	for _, tc := range []struct {
		name       string
		otherRan   bool
		on         bool
		cheaperBy  float64 // other's cost below run's
		wantRunner string
	}{
		{"paper trades for any gain", true, false, 0.1, "other"},
		{"priced: gain below 2p keeps the running job", true, true, 2*p - 0.05, "run"},
		{"priced: gain above 2p trades", true, true, 2*p + 0.05, "other"},
		{"priced: never-ran job needs only p", false, true, p + 0.05, "other"},
		{"priced: never-ran job below p waits", false, true, p - 0.05, "run"},
		{"paper keeps when the running job is cheaper", true, false, -0.1, "run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newInstance().
				job("run", 2, 100, both(4, 0), func(j *allocator.Job) { j.LastModel, j.Running = "V100", true }).
				job("other", 2, 100, both(4, 0), func(j *allocator.Job) {
					if tc.otherRan {
						j.LastModel = "V100"
					}
				})
			b.in.Models[0].GPUs = 2
			b.in.Config.PricePreemption = tc.on
			// Equal jobs differ only in credit rho * theta (theta 4).
			b.in.Fairness = fairness.State{Jobs: map[string]fairness.JobState{"other": {Rho: tc.cheaperBy / 4}}}
			if tc.cheaperBy < 0 {
				b.in.Fairness.Jobs = map[string]fairness.JobState{"run": {Rho: -tc.cheaperBy / 4}}
			}
			d, err := allocator.Decide(context.Background(), &b.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Assignment(); len(got) != 1 || got[tc.wantRunner] != "V100" {
				t.Fatalf("assignment %v, want only %s on V100", got, tc.wantRunner)
			}
		})
	}
}

// TestPreemptionOffBitIdentical: with the option off, the running flag
// changes nothing and every cost is the paper's formula to the bit.
func TestPreemptionOffBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for it := 0; it < 50; it++ {
		in := instancegen.Generate(r, instancegen.Spec{Jobs: 1 + r.IntN(40), Models: 1 + r.IntN(4), GPUs: 8 + r.IntN(40)})
		in.Jobs = fitting(in)
		if len(in.Jobs) == 0 {
			continue
		}
		plain, err := in.Problem()
		if err != nil {
			t.Fatal(err)
		}
		for k := range in.Jobs {
			in.Jobs[k].Running = in.Jobs[k].LastModel != "" && k%2 == 0
		}
		flagged, err := in.Problem()
		if err != nil {
			t.Fatal(err)
		}
		for i := range plain.Cost {
			if math.Float64bits(plain.Cost[i]) != math.Float64bits(flagged.Cost[i]) {
				t.Fatalf("instance %d: cost %d is %v with running flags, %v without", it, i, flagged.Cost[i], plain.Cost[i])
			}
		}
		d, err := allocator.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		c := &in.Config
		for k := range d.Jobs {
			j := &in.Jobs[k]
			for _, o := range d.Jobs[k].Options() {
				s := c.Weights.Switch * c.SwitchPenalty(j, o.Model)
				if o.Switch != s || o.Cost != o.Wait+o.Volume+s-o.Credit {
					t.Fatalf("instance %d job %s on %s: switch %v cost %v, want the paper's %v", it, j.ID, o.Model, o.Switch, o.Cost, s)
				}
			}
		}
	}
}

// TestPreemptionWorkConserving: the bonus on running jobs never leaves a
// model idle that a waiting job could use (constraint (7) still binds).
func TestPreemptionWorkConserving(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	for it := 0; it < 100; it++ {
		in := instancegen.Generate(r, instancegen.Spec{Jobs: 1 + r.IntN(60), Models: 1 + r.IntN(4), GPUs: 4 + r.IntN(40)})
		in.Jobs = fitting(in)
		in.Config.PricePreemption = true
		for k := range in.Jobs {
			in.Jobs[k].Running = in.Jobs[k].LastModel != "" && r.IntN(2) == 0
		}
		if len(in.Jobs) == 0 {
			continue
		}
		d, err := allocator.Decide(context.Background(), in)
		if err != nil {
			t.Fatalf("instance %d: %v", it, err)
		}
		checkWorkConserving(t, it, in, d)
	}
}

func TestRunningNeedsLastModel(t *testing.T) {
	b := newInstance().job("a", 1, 5, both(1, 1), func(j *allocator.Job) { j.Running = true })
	err := b.in.Validate()
	if fe, ok := err.(*allocator.FieldError); !ok || fe.ID != "a" || fe.Field != "running" {
		t.Fatalf("Validate = %v, want a *FieldError on job a, field running", err)
	}
}
