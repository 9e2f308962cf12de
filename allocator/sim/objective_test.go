package sim

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/policy"
)

// TestRateBeatsGavelWithRestarts is the make-test-sized check of issue 10:
// on a fixed small workload (120 jobs of Gavel's multi-GPU generator on
// 4 V100 + 4 P100 + 4 K80, the headline's load per GPU) with 60 s charged
// per resume and model change, and the policies told so, fft-rate's
// average JCT is lower than gavel-las's and gavel-ftf's, and it preempts
// less than either.
func TestRateBeatsGavelWithRestarts(t *testing.T) {
	const restart = 60
	cl := []ClusterModel{{Name: "v100", GPUs: 4}, {Name: "p100", GPUs: 4}, {Name: "k80", GPUs: 4}}
	run := func(name string) Summary {
		pol, err := policy.New(name, policy.Options{RestartSeconds: restart})
		if err != nil {
			t.Fatal(err)
		}
		src := NewGenerator(GenConfig{Rate: 0.2, Seed: 7, MultiGPU: true, Jobs: 120})
		lg, err := Run(context.Background(), pol, src, Config{Cluster: cl, RestartSeconds: restart})
		if err != nil {
			t.Fatal(err)
		}
		_, s := Analyse(lg, nil)
		if s.Unfinished != 0 {
			t.Fatalf("%s: %d of %d jobs unfinished", name, s.Unfinished, s.Measured)
		}
		return s
	}
	rate := run(policy.FFTRateName)
	for _, name := range []string{policy.GavelLASName, policy.GavelFTFName} {
		s := run(name)
		t.Logf("%s: JCT %.1f h, max FTF %.2f, preemptions %d; fft-rate: %.1f h, %.2f, %d",
			name, s.JCT.Mean/3600, s.FTF.Max, s.Preemptions, rate.JCT.Mean/3600, rate.FTF.Max, rate.Preemptions)
		if rate.JCT.Mean >= s.JCT.Mean || rate.Preemptions >= s.Preemptions {
			t.Errorf("fft-rate: JCT %.1f h, %d preemptions; %s: %.1f h, %d; want fft-rate lower on both",
				rate.JCT.Mean/3600, rate.Preemptions, name, s.JCT.Mean/3600, s.Preemptions)
		}
	}
}
