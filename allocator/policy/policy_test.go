package policy

import (
	"github.com/nomad-fft/nomad-fft/allocator/placement"

	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nomad-fft/nomad-fft/allocator"
)

// snap is a fixture builder for snapshots.
type snap struct{ s Snapshot }

func newSnap(round int, models ...any) *snap {
	b := &snap{Snapshot{Round: round, Now: float64(round) * 100, RoundSeconds: 100}}
	for k := 0; k+1 < len(models); k += 2 {
		b.s.Models = append(b.s.Models, Model{Name: models[k].(string), GPUs: models[k+1].(int)})
	}
	return b
}

// job adds a job; rates are model, steps/s pairs.
func (b *snap) job(id string, gpus int, work float64, rates ...any) *snap {
	j := Job{ID: id, ArrivalSeconds: float64(len(b.s.Jobs)), GPUs: gpus, Work: work, RatePerSecond: map[string]float64{}}
	for k := 0; k+1 < len(rates); k += 2 {
		j.RatePerSecond[rates[k].(string)] = rates[k+1].(float64)
	}
	b.s.Jobs = append(b.s.Jobs, j)
	return b
}

func (b *snap) running(id, model string) *snap {
	for k := range b.s.Jobs {
		if b.s.Jobs[k].ID == id {
			b.s.Jobs[k].Running, b.s.Jobs[k].LastModel = model, model
		}
	}
	return b
}

func (b *snap) attained(id string, gpuSeconds float64) *snap {
	for k := range b.s.Jobs {
		if b.s.Jobs[k].ID == id {
			b.s.Jobs[k].AttainedGPUSeconds = gpuSeconds
		}
	}
	return b
}

func (b *snap) obj() *Snapshot { return &b.s }

func TestRegistry(t *testing.T) {
	for _, name := range Names() {
		p, err := New(name, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if p.Name() != name {
			t.Errorf("New(%q).Name() = %q", name, p.Name())
		}
	}
	if _, err := New("nope", Options{}); err == nil {
		t.Error("New(\"nope\") succeeded")
	}
}

// TestPoliciesRespectRules feeds every policy that assigns from the
// snapshot seeded random snapshots and checks each assignment with Check.
// The policies over the round engine (Deciders) decide on the instance the
// round loop builds: the loop's and the simulator's tests run them.
func TestPoliciesRespectRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	for _, name := range Names() {
		p, _ := New(name, Options{Seed: 9})
		if _, ok := p.(Decider); ok {
			continue
		}
		for round := 0; round < 30; round++ {
			b := newSnap(round, "v100", 1+rng.IntN(8), "p100", 1+rng.IntN(8), "k80", rng.IntN(8))
			if b.s.Models[2].GPUs == 0 {
				b.s.Models[2].GPUs = 1
			}
			for k := 0; k < 1+rng.IntN(15); k++ {
				gpus := []int{1, 1, 1, 2, 4}[rng.IntN(5)]
				b.job(fmt.Sprintf("j%d", k), gpus, 1000, "v100", 3+rng.Float64(), "p100", 2*rng.Float64(), "k80", rng.Float64())
				if rng.IntN(3) == 0 {
					b.s.Jobs[k].Running = b.s.Models[rng.IntN(3)].Name
				}
			}
			// Keep only running flags that are consistent with capacity.
			used := map[string]int{}
			for k := range b.s.Jobs {
				j := &b.s.Jobs[k]
				if j.Running != "" {
					m := &b.s.Models[map[string]int{"v100": 0, "p100": 1, "k80": 2}[j.Running]]
					if !j.Fits(m) || used[m.Name]+j.GPUs > m.GPUs {
						j.Running = ""
					} else {
						used[m.Name] += j.GPUs
					}
				}
				j.LastModel = j.Running
			}
			a, err := p.Schedule(context.Background(), b.obj())
			if err != nil {
				t.Fatalf("%s round %d: %v", name, round, err)
			}
			if err := Check(b.obj(), a); err != nil {
				t.Fatalf("%s round %d: %v", name, round, err)
			}
		}
	}
}

func TestFIFO(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *Snapshot
		want Assignment
	}{
		{"running keeps its model; head takes the fastest free",
			newSnap(1, "fast", 2, "slow", 2).job("a", 1, 10, "fast", 2.0, "slow", 1.0).job("b", 2, 10, "fast", 2.0, "slow", 1.0).running("a", "slow").obj(),
			Assignment{"a": "slow", "b": "fast"}},
		{"head that fits nowhere blocks the queue",
			newSnap(0, "fast", 2).job("a", 1, 10, "fast", 2.0).job("b", 2, 10, "fast", 2.0).job("c", 1, 10, "fast", 2.0).running("a", "fast").obj(),
			Assignment{"a": "fast"}},
	} {
		a, _ := NewFIFOPerf(Options{}).Schedule(context.Background(), tc.s)
		if d := cmp.Diff(tc.want, a); d != "" {
			t.Errorf("%s (-want,+got):\n%s", tc.name, d)
		}
	}
}

func TestBinpack(t *testing.T) {
	s := newSnap(0, "a", 4, "b", 4).job("x", 2, 10, "a", 1.0, "b", 1.0).job("y", 1, 10, "a", 1.0, "b", 1.0).job("z", 4, 10, "a", 1.0, "b", 1.0).running("x", "b").obj()
	a, _ := Binpack{}.Schedule(context.Background(), s)
	// y goes to the fuller model b; z then only fits a.
	if d := cmp.Diff(Assignment{"x": "b", "y": "b", "z": "a"}, a); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

func TestTiresias(t *testing.T) {
	// One model, one GPU: the job over the threshold yields to the new one.
	p := NewTiresias(Options{})
	s := newSnap(5, "m", 1).job("old", 1, 1e6, "m", 1.0).job("new", 1, 1e6, "m", 1.0).attained("old", 2*TiresiasThreshold).running("old", "m").obj()
	a, _ := p.Schedule(context.Background(), s)
	if d := cmp.Diff(Assignment{"new": "m"}, a); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

// TestGavelTimeShares: two identical jobs on one GPU under max-min
// fairness each get half the rounds.
func TestGavelTimeShares(t *testing.T) {
	for _, name := range []string{LASName, GavelLASName, FTFName, GavelFTFName, IsolatedName} {
		p, _ := New(name, Options{})
		got := map[string]int{}
		for round := 0; round < 20; round++ {
			s := newSnap(round, "m", 1).job("a", 1, 1e9, "m", 1.0).job("b", 1, 1e9, "m", 1.0).obj()
			a, err := p.Schedule(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			for id := range a {
				got[id]++
			}
			p.(Observer).Observe(s, a, nil)
		}
		if got["a"] != 10 || got["b"] != 10 {
			t.Errorf("%s: rounds per job %v, want 10 each", name, got)
		}
	}
}

func TestIsolatedSharesFitCapacity(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for trial := 0; trial < 50; trial++ {
		b := newSnap(0, "v100", 1+rng.IntN(10), "k80", 1+rng.IntN(10))
		for k := 0; k < 1+rng.IntN(30); k++ {
			b.job(fmt.Sprint(k), []int{1, 2, 4}[rng.IntN(3)], 10, "v100", 1.0, "k80", 0.5)
		}
		x := isolatedShares(b.obj())
		for i, m := range b.s.Models {
			use := 0.0
			for k := range b.s.Jobs {
				use += x[k][i] * float64(b.s.Jobs[k].GPUs)
			}
			if use > float64(m.GPUs)+1e-9 {
				t.Fatalf("trial %d: model %s used %v > %d", trial, m.Name, use, m.GPUs)
			}
		}
		for k := range x {
			if sum := x[k][0] + x[k][1]; sum > 1+1e-9 {
				t.Fatalf("trial %d: job %d shares sum to %v", trial, k, sum)
			}
		}
	}
}

// TestAlloXSingleGPU: the short job goes first on the fast GPU.
func TestAlloXSingleGPU(t *testing.T) {
	s := newSnap(0, "fast", 1, "slow", 1).job("long", 1, 100, "fast", 1.0, "slow", 0.5).job("short", 1, 10, "fast", 1.0, "slow", 0.5).job("mid", 1, 30, "fast", 1.0, "slow", 0.9).obj()
	a, _ := NewAlloX(Options{}).Schedule(context.Background(), s)
	if a["short"] != "fast" || len(a) != 2 {
		t.Errorf("assignment %v: want short on fast and two jobs running", a)
	}
}

func TestFFTSticky(t *testing.T) {
	p, err := New(FFTStickyName, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := allocator.DefaultConfig()
	want.PricePreemption = true
	if got := p.(*FFT).cfg; got != want {
		t.Errorf("fft-sticky config %+v, want the paper's with price_preemption: %+v", got, want)
	}
	if NewFFT(Options{}).(*FFT).cfg.PricePreemption {
		t.Error("the paper's fft prices preemption")
	}
}

// TestEveryPolicyDescribed: every registered policy has a one-line
// description and every description a policy, so `fftctl simulate -list`
// describes them all.
func TestEveryPolicyDescribed(t *testing.T) {
	for _, n := range Names() {
		if d := Describe(n); d == "" || len(d) > 80 {
			t.Errorf("policy %q: description %q: want 1 to 80 characters (add it to Descriptions)", n, d)
		}
	}
	for n := range Descriptions {
		if _, ok := Builtin[n]; !ok {
			t.Errorf("description of %q, which is not in Builtin", n)
		}
	}
}

// TestFFTRestartSeconds: the unit-free configurations price restarts at
// the cost the runtime says it charges; the paper's fft ignores it and
// keeps the engine's default, so its decisions stay as they were.
func TestFFTRestartSeconds(t *testing.T) {
	opt := Options{RestartSeconds: 60}
	if got := NewFFT(opt).(*FFT).cfg; got != allocator.DefaultConfig() {
		t.Errorf("fft config %+v, want the paper's %+v", got, allocator.DefaultConfig())
	}
	for _, name := range []string{FFTRateName, FFTUnitsName, FFTLagName, FFTLateName, FFTRateLowName, FFTRateHighName, FFTRateW16Name, FFTRateW0Name} {
		p, err := New(name, opt)
		if err != nil {
			t.Fatal(err)
		}
		c := p.(*FFT).cfg
		if c.RestartSeconds != 60 || !c.PricePreemption || c.Objective != allocator.ObjectiveUnits || p.Name() != name {
			t.Errorf("%s: config %+v, want objective units with restarts priced at 60 s", name, c)
		}
	}
	for name, w := range map[string]float64{FFTRateName: 1, FFTRateLowName: 0.25, FFTRateHighName: 4, FFTRateW16Name: 16, FFTRateW0Name: 0} {
		p, _ := New(name, opt)
		if c := p.(*FFT).cfg; c.Volume != allocator.VolumeRate || c.Debt != allocator.DebtFTF || c.Weights.Fairness != w || c.Weights.JCT != 0 {
			t.Errorf("%s config %+v, want volume rate, debt ftf, fairness weight %v, no wait term", name, c, w)
		}
	}
}

// Each baseline runs on its own system's placement; the rest on the paper's Placer.
func TestPlacementOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		want placement.Style
	}{
		{GavelFTFName, placement.StyleGavel},
		{GavelLASName, placement.StyleGavel},
		{FIFOName, placement.StyleGavel},
		{FTFName, placement.StyleGavel},
		{IsolatedName, placement.StyleGavel},
		{SiaName, placement.StyleSia},
		{FFTName, placement.StyleFFT},
		{DefaultName, placement.StyleFFT},
		{TiresiasName, placement.StyleFFT},
		{AlloXName, placement.StyleFFT},
		{"no-such-policy", placement.StyleFFT},
	} {
		if got := PlacementOf(tc.name); got != tc.want {
			t.Errorf("PlacementOf(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
