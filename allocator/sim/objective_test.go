package sim_test

import (
	"context"
	"math"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// TestRateBeatsGavelWithRestarts is the make-test-sized check of issue 10:
// on a fixed small workload (120 jobs of Gavel's multi-GPU generator on
// 4 V100 + 4 P100 + 4 K80, the headline's load per GPU) with 60 s charged
// per resume and model change, and the policies told so, fft-rate-w0.25's
// average JCT is lower than gavel-las's and gavel-ftf's, and it preempts
// less than either.
func TestRateBeatsGavelWithRestarts(t *testing.T) {
	const restart = 60
	cl := []allocator.Model{{Name: "v100", GPUs: 4}, {Name: "p100", GPUs: 4}, {Name: "k80", GPUs: 4}}
	run := func(name string) metrics.Summary {
		pol, err := policy.New(name, policy.Options{RestartSeconds: restart})
		if err != nil {
			t.Fatal(err)
		}
		src := workload.NewGenerator(workload.GenConfig{Rate: 0.2, Seed: 7, MultiGPU: true, Jobs: 120})
		lg, err := sim.Run(context.Background(), pol, src, sim.Config{Cluster: cl, RestartSeconds: restart})
		if err != nil {
			t.Fatal(err)
		}
		_, s := metrics.Analyse(lg, nil)
		if s.Unfinished != 0 {
			t.Fatalf("%s: %d of %d jobs unfinished", name, s.Unfinished, s.Measured)
		}
		return s
	}
	rate := run(policy.FFTRateLowName)
	for _, name := range []string{policy.GavelLASName, policy.GavelFTFName} {
		s := run(name)
		t.Logf("%s: JCT %.1f h, max FTF %.2f, preemptions %d; fft-rate-w0.25: %.1f h, %.2f, %d",
			name, s.JCT.Mean/3600, s.FTF.Max, s.Preemptions, rate.JCT.Mean/3600, rate.FTF.Max, rate.Preemptions)
		if rate.JCT.Mean >= s.JCT.Mean || rate.Preemptions >= s.Preemptions {
			t.Errorf("fft-rate-w0.25: JCT %.1f h, %d preemptions; %s: %.1f h, %d; want fft-rate-w0.25 lower on both",
				rate.JCT.Mean/3600, rate.Preemptions, name, s.JCT.Mean/3600, s.Preemptions)
		}
	}
}

// TestRateReplayIsUnitFree is issue 10's replay check on 150 generated
// jobs with 60 s restarts: the same workload with every other job's work
// and rates multiplied by 1024 (its work counted in a unit 1024 times
// smaller) gives every job the same finish time under fft-rate-w0.25; the
// paper's fft is not invariant and changes some.
func TestRateReplayIsUnitFree(t *testing.T) {
	const restart = 60
	cl := []allocator.Model{{Name: "v100", GPUs: 6}, {Name: "p100", GPUs: 6}, {Name: "k80", GPUs: 6}}
	gen := workload.NewGenerator(workload.GenConfig{Rate: 0.3, Seed: 3, MultiGPU: true, Jobs: 150})
	var plain, scaled []workload.JobSpec
	for {
		j, err := gen.Next()
		if err != nil {
			break
		}
		plain = append(plain, j)
		if j.Index%2 == 1 {
			j.Work *= 1024
			rate := make(map[string]float64, len(j.Rate))
			for m, r := range j.Rate {
				rate[m] = r * 1024
			}
			j.Rate = rate
		}
		scaled = append(scaled, j)
	}
	finish := func(name string, jobs []workload.JobSpec) []float64 {
		pol, err := policy.New(name, policy.Options{RestartSeconds: restart})
		if err != nil {
			t.Fatal(err)
		}
		lg, err := sim.Run(context.Background(), pol, &workload.SliceSource{Jobs: jobs}, sim.Config{Cluster: cl, RestartSeconds: restart})
		if err != nil {
			t.Fatal(err)
		}
		res, _ := metrics.Analyse(lg, nil)
		out := make([]float64, len(res))
		for k, r := range res {
			out[k] = r.Finish
		}
		return out
	}
	differ := func(name string) int {
		a, b := finish(name, plain), finish(name, scaled)
		n := 0
		for k := range a {
			if a[k] != b[k] && !(math.IsNaN(a[k]) && math.IsNaN(b[k])) {
				n++
			}
		}
		return n
	}
	if n := differ(policy.FFTRateLowName); n != 0 {
		t.Errorf("fft-rate-w0.25: %d of %d finish times changed with the work unit", n, len(plain))
	}
	if n := differ(policy.FFTName); n == 0 {
		t.Errorf("fft: no finish time changed with the work unit; the check cannot tell")
	}
}
