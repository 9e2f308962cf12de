package allocator_test

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/instancegen"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// BenchmarkDecide times one full round (K(t) and the exact solve) on
// realistic instances. Reproduce with:
//
//	go test -run '^$' -bench Decide -benchmem -count 5 ./allocator/
func BenchmarkDecide(b *testing.B) {
	for _, s := range instancegen.BenchmarkSpecs {
		b.Run(s.BenchmarkName(), func(b *testing.B) {
			in := instancegen.Generate(instancegen.SeedFor(s), s)
			b.ReportAllocs()
			var gap float64
			var nodes, core int
			for b.Loop() {
				d, err := allocator.Decide(context.Background(), in)
				if err != nil {
					b.Fatal(err)
				}
				gap = max(gap, d.Gap)
				nodes, core = d.Stats.Nodes, d.Stats.Core
			}
			b.ReportMetric(gap, "max-gap")
			b.ReportMetric(float64(nodes), "nodes")
			b.ReportMetric(float64(core), "core")
		})
	}
}

// BenchmarkDecideRate is BenchmarkDecide under the proposed unit-free
// objective (volume "rate", debt "ftf", restarts priced at 60 s), with
// the ledger's reference computed for the instance's jobs (Reconcile), so
// the debts are those the round loop would see:
//
//	go test -run '^$' -bench DecideRate -benchmem ./allocator/
func BenchmarkDecideRate(b *testing.B) {
	for _, s := range instancegen.BenchmarkSpecs[:2] {
		b.Run(s.BenchmarkName(), func(b *testing.B) {
			in := instancegen.Generate(instancegen.SeedFor(s), s)
			in.Config = rateConfig(1)
			active := make([]fairness.Job, len(in.Jobs))
			capacity := map[string]int{}
			for _, m := range in.Models {
				capacity[m.Name] = m.GPUs
			}
			for k, j := range in.Jobs {
				active[k] = fairness.Job{ID: j.ID, Arrival: j.Arrival, Work: j.Work, GPUs: j.GPUs, Throughput: j.Throughput}
			}
			in.Fairness.Jobs = nil
			in.Fairness.Reconcile(active, capacity)
			b.ReportAllocs()
			var gap float64
			for b.Loop() {
				d, err := allocator.Decide(context.Background(), in)
				if err != nil {
					b.Fatal(err)
				}
				gap = max(gap, d.Gap)
			}
			b.ReportMetric(gap, "max-gap")
		})
	}
}
