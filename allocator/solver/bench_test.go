package solver_test

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/instancegen"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

// BenchmarkSolve times the solver alone (K(t) and the exact solve) on the
// same instances as allocator's BenchmarkDecide, priced once outside the
// loop. Reproduce with:
//
//	go test -run '^$' -bench Solve -benchmem -count 5 ./allocator/solver/
func BenchmarkSolve(b *testing.B) {
	for _, s := range instancegen.BenchmarkSpecs {
		b.Run(s.BenchmarkName(), func(b *testing.B) {
			in := instancegen.Generate(instancegen.SeedFor(s), s)
			p, err := in.Problem()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var gap float64
			var st solver.Stats
			for b.Loop() {
				p.MinUsage = 0
				pack, err := solver.MaxUsage(context.Background(), p, solver.Options{})
				if err != nil {
					b.Fatal(err)
				}
				p.MinUsage = pack.Usage
				res, err := solver.Solve(context.Background(), p, solver.Options{Start: pack.Choice})
				if err != nil {
					b.Fatal(err)
				}
				gap = max(gap, res.Gap)
				st = res.Stats
			}
			// The search's work does not depend on the machine's load:
			// compare it when timings are noisy.
			b.ReportMetric(gap, "max-gap")
			b.ReportMetric(float64(st.Nodes), "nodes")
			b.ReportMetric(float64(st.ColdStarts), "cold-starts")
			b.ReportMetric(float64(st.Augmentations), "augs")
			b.ReportMetric(float64(st.Work), "work")
		})
	}
}
