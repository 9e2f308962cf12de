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

// TestStickyStopsTrading is the dev cluster's case: two equal 2-GPU jobs
// on 2 GPUs, one epoch per round. The paper's FFT trades them nearly every
// round; fft-sticky, which prices each trade at two restarts, much less,
// and the restarts it saves finish the pair sooner.
func TestStickyStopsTrading(t *testing.T) {
	run := func(name string) metrics.Summary {
		pol, err := policy.New(name, policy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		jobs := []workload.JobSpec{job("a", 0, 40, 2, "h100", 1.0/300), job("b", 0, 40, 2, "h100", 1.0/300)}
		lg, err := sim.Run(context.Background(), pol, &workload.SliceSource{Jobs: jobs},
			sim.Config{Cluster: []allocator.Model{{Name: "h100", GPUs: 2}}, RestartSeconds: 30})
		if err != nil {
			t.Fatal(err)
		}
		_, s := metrics.Analyse(lg, nil)
		return s
	}
	paper, sticky := run(policy.FFTName), run(policy.FFTStickyName)
	if paper.Preemptions < 60 || 2*sticky.Preemptions > paper.Preemptions || sticky.Makespan >= paper.Makespan {
		t.Fatalf("preemptions %d (fft) and %d (fft-sticky), makespan %.0f s and %.0f s; want fft-sticky under half, and sooner",
			paper.Preemptions, sticky.Preemptions, paper.Makespan, sticky.Makespan)
	}
}
