package allocator_test

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/instancegen"
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
