package sim

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/policy"
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
				lg, err := Run(context.Background(), p, NewGenerator(GenConfig{Rate: 2, Seed: 0, MultiGPU: true, Jobs: 5000}), Config{Cluster: gavelCluster})
				if err != nil {
					b.Fatal(err)
				}
				_, s := Analyse(lg, nil)
				b.ReportMetric(float64(s.Rounds), "rounds")
				b.ReportMetric(s.Solve.Max*1000, "max-solve-ms")
			}
		})
	}
}
