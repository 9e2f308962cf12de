package sim_test

import (
	"context"
	"fmt"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// Two one-GPU jobs on one fast and one slow GPU under heterogeneity-aware
// FIFO: the first takes the fast GPU, the second the slow one.
func ExampleRun() {
	jobs := []workload.JobSpec{
		{ID: "a", Arrival: 0, GPUs: 1, Work: 600, Rate: map[string]float64{"fast": 2, "slow": 1}},
		{ID: "b", Arrival: 0, GPUs: 1, Work: 600, Rate: map[string]float64{"fast": 2, "slow": 1}},
	}
	cluster := []allocator.Model{{Name: "fast", GPUs: 1}, {Name: "slow", GPUs: 1}}
	lg, err := sim.Run(context.Background(), policy.NewFIFOPerf(policy.Options{}), &workload.SliceSource{Jobs: jobs},
		sim.Config{Cluster: cluster, RoundSeconds: 300})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, sum := metrics.Analyse(lg, nil)
	for _, r := range res {
		fmt.Printf("%s: JCT %.0f s, %d switches\n", r.ID, r.JCT, r.Switches)
	}
	fmt.Printf("mean JCT %.0f s, utilisation %.2f\n", sum.JCT.Mean, sum.Utilisation)
	// Output:
	// a: JCT 300 s, 0 switches
	// b: JCT 600 s, 0 switches
	// mean JCT 450 s, utilisation 0.75
}
