package allocator_test

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/instancegen"
)

// TestOptionsMatchProblem: the options a decision prices on demand are the
// costs the solver was given, to the bit and in model order, the chosen
// terms are the option of the chosen model, and the JSON keeps them.
func TestOptionsMatchProblem(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 4))
	configs := []allocator.Config{allocator.DefaultConfig(), unitsConfig(allocator.DebtLag, 1), rateConfig(1)}
	for it := 0; it < 60; it++ {
		in := instancegen.Generate(r, instancegen.Spec{Jobs: 1 + r.IntN(40), Models: 1 + r.IntN(4), GPUs: 8 + r.IntN(40)})
		in.Jobs = fitting(in)
		if len(in.Jobs) == 0 {
			continue
		}
		in.Config = configs[it%len(configs)]
		in.Config.PricePreemption = it%2 == 0
		for k := range in.Jobs {
			in.Jobs[k].Running = in.Jobs[k].LastModel != "" && r.IntN(2) == 0
		}
		p, err := in.Problem()
		if err != nil {
			t.Fatal(err)
		}
		d, err := allocator.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		m := len(in.Models)
		for k := range d.Jobs {
			jd := &d.Jobs[k]
			opts := jd.Options()
			n := 0
			for i := 0; i < m; i++ {
				c := p.Cost[k*m+i]
				if math.IsInf(c, 1) {
					continue
				}
				if n >= len(opts) || opts[n].Model != in.Models[i].Name || math.Float64bits(opts[n].Cost) != math.Float64bits(c) {
					t.Fatalf("instance %d job %s: options %+v, want cost %v on %s as option %d", it, jd.ID, opts, c, in.Models[i].Name, n)
				}
				n++
			}
			if n != len(opts) {
				t.Fatalf("instance %d job %s: %d options, the problem has %d", it, jd.ID, len(opts), n)
			}
			if jd.Model != "" && !slices.Contains(opts, jd.Chosen) {
				t.Fatalf("instance %d job %s: chosen %+v is not among its options %+v", it, jd.ID, jd.Chosen, opts)
			}
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back allocator.Decision
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		for k := range d.Jobs {
			if got, want := back.Jobs[k].Options(), d.Jobs[k].Options(); !reflect.DeepEqual(got, want) || back.Jobs[k].Chosen != d.Jobs[k].Chosen {
				t.Fatalf("instance %d job %s: options after JSON %+v, before %+v", it, d.Jobs[k].ID, got, want)
			}
		}
	}
}

// TestDecideGapTolerance: Config.GapTolerance reaches the solver. With a
// loose tolerance the round stops short of proving its optimum on some
// instances (recorded feasible, with its gap), never beyond the tolerance
// and never below the proven optimum.
func TestDecideGapTolerance(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 5))
	short := 0
	for it := 0; it < 20; it++ {
		in := instancegen.Generate(r, instancegen.Spec{Jobs: 300, Models: 4, GPUs: 160})
		exact, err := allocator.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		in.Config.GapTolerance = 0.5
		loose, err := allocator.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if exact.Status.String() != "optimal" {
			continue
		}
		tol := 1e-9 * math.Max(1, math.Abs(exact.Objective))
		if loose.Gap > 0.5+1e-12 || loose.Objective < exact.Objective-tol || loose.Bound > exact.Objective+tol {
			t.Fatalf("instance %d: tolerance 0.5 gave objective %v bound %v gap %v; the optimum is %v", it, loose.Objective, loose.Bound, loose.Gap, exact.Objective)
		}
		if loose.Status.String() != "optimal" {
			short++
		}
	}
	if short == 0 {
		t.Error("no round stopped within the tolerance: Config.GapTolerance does not reach the solver")
	}
}

// WithWorld takes the operator's facts and solver tolerance, and keeps the
// objective's own settings.
func TestWithWorld(t *testing.T) {
	obj := allocator.DefaultConfig()
	obj.Weights.Fairness, obj.NodeLimit, obj.PricePreemption = 2, 7, true
	world := allocator.DefaultConfig()
	world.RoundSeconds, world.RestartSeconds, world.TransferGbps, world.GapTolerance = 60, 90, 25, 1e-3
	world.Weights.Fairness, world.NodeLimit = 5, 9
	got := obj.WithWorld(world)
	want := obj
	want.RoundSeconds, want.RestartSeconds, want.TransferGbps, want.GapTolerance = 60, 90, 25, 1e-3
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithWorld = %+v, want %+v", got, want)
	}
}
