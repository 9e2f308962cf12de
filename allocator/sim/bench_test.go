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

// BenchmarkContinuous5000 is the speed check of issue 3: 5,000 jobs of the
// multi-GPU generator at 2 jobs/hour on 36 V100 + 36 P100 + 36 K80 (108
// GPUs), run to completion. Run it with
//
//	go test ./allocator/sim -run '^$' -bench Continuous5000/fft -benchtime 1x
//
// and read peak memory with /usr/bin/time -v on the same command.
func BenchmarkContinuous5000(b *testing.B) {
	for _, name := range []string{policy.FFTName, policy.GavelLASName} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				p, _ := policy.New(name, policy.Options{})
				lg, err := sim.Run(context.Background(), p, workload.NewGenerator(workload.GenConfig{Rate: 2, Seed: 0, MultiGPU: true, Jobs: 5000}), sim.Config{Cluster: gavelCluster})
				if err != nil {
					b.Fatal(err)
				}
				_, s := metrics.Analyse(lg, nil)
				b.ReportMetric(float64(s.Rounds), "rounds")
				b.ReportMetric(s.Solve.Max*1000, "max-solve-ms")
			}
		})
	}
}

// gavelCluster is Gavel's simulated cluster: 36 V100 + 36 P100 + 36 K80.
var gavelCluster = []allocator.Model{{Name: "v100", GPUs: 36}, {Name: "p100", GPUs: 36}, {Name: "k80", GPUs: 36}}
