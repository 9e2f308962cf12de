package solver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	for _, s := range []instancegen.Spec{
		{Jobs: 4000, Models: 8, GPUs: 1000},
		{Jobs: 20000, Models: 16, GPUs: 10000},
		{Jobs: 100000, Models: 16, GPUs: 10000},
	} {
		b.Run(fmt.Sprintf("jobs=%d/models=%d/gpus=%d", s.Jobs, s.Models, s.GPUs), func(b *testing.B) {
			in := instancegen.Generate(rand.New(rand.NewPCG(42, uint64(s.Jobs))), s)
			p, _, err := in.Problem()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var gap float64
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
			}
			b.ReportMetric(gap, "max-gap")
		})
	}
}
