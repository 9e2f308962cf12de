package sim_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/sim/metrics"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// BenchmarkLargeCluster runs the first rounds of HEADLINE.md's
// large-cluster setting (the FFT paper's scalability point): 1,000 GPUs,
// 125 of each of the gavel-8 table's 8 models, a burst of 4,000 jobs at
// time 0 and Gavel's stream at 20 jobs/hour after it, restarts charged at
// 60 s. It reports each round's solve time (p50, p99, max, in ms; the
// paper: 1.53 s a round), the jobs per round and the rounds not proven
// optimal. The LP baselines (gavel-ftf, gavel-las, ftf, las) run their
// first round, one allocation of all 4,000 jobs.
//
//	go test ./allocator/sim -run '^$' -bench LargeCluster -benchtime 1x
func BenchmarkLargeCluster(b *testing.B) {
	cases := []struct {
		policy      string
		jobs, round int
	}{
		{policy.DefaultName, 4000, 10},
		{policy.FFTName, 4000, 10},
		{policy.GavelFTFName, 4000, 1},
		{policy.GavelLASName, 4000, 1},
		{policy.FTFName, 4000, 1},
		{policy.LASName, 4000, 1},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("%s/jobs=%d/rounds=%d", c.policy, c.jobs, c.round), func(b *testing.B) {
			for b.Loop() {
				p, _ := policy.New(c.policy, policy.Options{RestartSeconds: 60})
				gen := workload.NewGenerator(workload.GenConfig{Rate: 20, Seed: 0, MultiGPU: true, Burst: c.jobs,
					Table: workload.Gavel8Throughputs()})
				lg, err := sim.Run(context.Background(), p, gen, sim.Config{Cluster: largeCluster(125), RestartSeconds: 60,
					Window: sim.Window{Lo: 0, Hi: c.jobs}, MaxRounds: c.round})
				if err != nil {
					b.Fatal(err)
				}
				_, s := metrics.Analyse(lg, nil)
				b.ReportMetric(s.Solve.P50*1000, "p50-solve-ms")
				b.ReportMetric(s.Solve.P99*1000, "p99-solve-ms")
				b.ReportMetric(s.Solve.Max*1000, "max-solve-ms")
				b.ReportMetric(s.Active.Mean, "jobs/round")
				b.ReportMetric(s.PolicyStats["rounds_not_optimal"], "not-optimal")
			}
		})
	}
}

// largeCluster is gpus GPUs of each model of the gavel-8 table.
func largeCluster(gpus int) []allocator.Model {
	var out []allocator.Model
	for _, m := range workload.Gavel8Throughputs().Models {
		out = append(out, allocator.Model{Name: m, GPUs: gpus})
	}
	return out
}

// BenchmarkLargeClusterDrain runs a smaller large-ish setting to
// completion: a burst of 1,000 jobs (and Gavel's stream at 5 jobs/hour)
// on 32 GPUs of each of the gavel-8 table's 8 models, restarts at 60 s.
// Its late rounds are the hard ones of a long large run (a few hundred
// multi-GPU jobs that can fill every GPU; HEADLINE.md, issue 21): it
// reports the solve percentiles over the whole run and the rounds not
// proven optimal, with the largest gap.
//
//	go test ./allocator/sim -run '^$' -bench LargeClusterDrain -benchtime 1x
func BenchmarkLargeClusterDrain(b *testing.B) {
	for b.Loop() {
		p, _ := policy.New(policy.DefaultName, policy.Options{RestartSeconds: 60})
		gen := workload.NewGenerator(workload.GenConfig{Rate: 5, Seed: 0, MultiGPU: true, Burst: 1000,
			Table: workload.Gavel8Throughputs()})
		lg, err := sim.Run(context.Background(), p, gen, sim.Config{Cluster: largeCluster(32), RestartSeconds: 60,
			Window: sim.Window{Lo: 0, Hi: 1000}})
		if err != nil {
			b.Fatal(err)
		}
		if lg.Stopped != "" {
			b.Fatalf("stopped: %s", lg.Stopped)
		}
		_, s := metrics.Analyse(lg, nil)
		b.ReportMetric(float64(len(lg.Rounds)), "rounds")
		b.ReportMetric(s.Solve.P50*1000, "p50-solve-ms")
		b.ReportMetric(s.Solve.P99*1000, "p99-solve-ms")
		b.ReportMetric(s.Solve.Max*1000, "max-solve-ms")
		b.ReportMetric(s.PolicyStats["rounds_not_optimal"], "not-optimal")
		b.ReportMetric(s.PolicyStats["max_gap"], "max-gap")
	}
}
