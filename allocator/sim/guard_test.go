package sim_test

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// guardCluster is the headline's 12 V100 + 12 P100 + 12 K80.
var guardCluster = []allocator.Model{{Name: "v100", GPUs: 12}, {Name: "p100", GPUs: 12}, {Name: "k80", GPUs: 12}}

// avg is a policy's average JCT and mean FTF over the guard's seeds.
type avg struct{ jct, ftf float64 }

// TestPublishedOrdering guards the ordering HEADLINE.md publishes, on a workload small enough
// for every `make test`: 200 jobs of Gavel's multi-GPU generator at 0.6 jobs/hour, seeds 0
// and 1 averaged, restarts free (Gavel's setting). The allocator's default policy must keep a
// lower average JCT than Gavel's heterogeneity-aware LAS and FTF, and so must the paper's
// FFT (the ordering HEADLINE.md publishes for it), and a mean finish-time
// fairness no worse than theirs by more than 5%. Measured on 2026-12-01 (seeds 0-3, one at a
// time): fft's JCT is 4-6% below both, its mean FTF 7-14% below, so the margins here are
// what a regression must eat through, not noise. Seeds other than these were checked by hand
// (HEADLINE.md); this test is a tripwire, not the evidence.
func TestPublishedOrdering(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 6 simulations")
	}
	run := func(name string) avg {
		var a avg
		seeds := []uint64{0, 1}
		for _, seed := range seeds {
			p, err := policy.New(name, policy.Options{Seed: int64(seed)})
			if err != nil {
				t.Fatal(err)
			}
			lg, err := sim.Run(context.Background(), p, workload.NewGenerator(workload.GenConfig{Rate: 0.6, Seed: seed, MultiGPU: true, Jobs: 200}), sim.Config{Cluster: guardCluster})
			if err != nil {
				t.Fatalf("%s seed %d: %v", name, seed, err)
			}
			_, s := metrics.Analyse(lg, nil)
			if s.Unfinished != 0 {
				t.Fatalf("%s seed %d: %d jobs unfinished", name, seed, s.Unfinished)
			}
			a.jct += s.JCT.Mean / float64(len(seeds))
			a.ftf += s.FTF.Mean / float64(len(seeds))
		}
		return a
	}
	bases := map[string]avg{}
	for _, base := range []string{policy.GavelLASName, policy.GavelFTFName} {
		bases[base] = run(base)
	}
	for _, name := range []string{policy.FFTName, policy.DefaultName} {
		guardOrdering(t, name, run(name), bases)
	}
}

// guardOrdering checks one FFT configuration's averages against the Gavel baselines'.
func guardOrdering(t *testing.T, name string, def avg, bases map[string]avg) {
	t.Helper()
	for _, base := range []string{policy.GavelLASName, policy.GavelFTFName} {
		b := bases[base]
		if !(def.jct < 0.99*b.jct) {
			t.Errorf("%s average JCT %.0f s is not below %s's %.0f s by 1%%", name, def.jct, base, b.jct)
		}
		if !(def.ftf <= 1.05*b.ftf) {
			t.Errorf("%s mean FTF %.3f is more than 5%% above %s's %.3f", name, def.ftf, base, b.ftf)
		}
		t.Logf("%s: JCT %.0f s against %s's %.0f s (%.3fx); mean FTF %.3f against %.3f", name, def.jct, base, b.jct, b.jct/def.jct, def.ftf, b.ftf)
	}
}
