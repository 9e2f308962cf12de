package policy

import (
	"math/rand/v2"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// BenchmarkGavelAllocation times one allocation (the LP work of a reset)
// of every LP-based baseline at the FFT paper's scale: 4,000 jobs of
// Gavel's generator on 8 models of 125 GPUs (HEADLINE.md's large-cluster
// setting), two hours in, each job up to half done. gavel-ftf's is its
// whole finish-time-fairness descent (up to ftfIterations LPs). AlloX's
// matching, an assignment LP solved as a flow, is BenchmarkAlloXMatch's.
//
//	go test -run '^$' -bench GavelAllocation -count 5 ./allocator/policy/
func BenchmarkGavelAllocation(b *testing.B) {
	s := largeSnapshot(4000, 125)
	for _, c := range []struct {
		name string
		f    fractional
	}{
		{GavelFTFName, finishTime(true)},
		{GavelLASName, maxMin(true)},
		{FTFName, finishTime(false)},
		{LASName, maxMin(false)},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := newGavel(c.name, c.f)
			b.ReportAllocs()
			for b.Loop() {
				c.f(s, g)
			}
			b.ReportMetric(float64(g.Fallbacks), "lp-fallbacks")
		})
	}
}

// largeSnapshot is n jobs of Gavel's generator (multi-GPU, the gavel-8
// table) on its 8 models of gpus GPUs each, at 7,200 s, each job a random
// part (under half) done.
func largeSnapshot(n, gpus int) *Snapshot {
	table := workload.Gavel8Throughputs()
	s := &Snapshot{Now: 7200, RoundSeconds: GavelRoundSeconds}
	for _, m := range table.Models {
		s.Models = append(s.Models, Model{Name: m, GPUs: gpus})
	}
	gen := workload.NewGenerator(workload.GenConfig{Rate: 20, Seed: 0, MultiGPU: true, Burst: n, Table: table})
	rng := rand.New(rand.NewPCG(4, 0))
	for k := 0; k < n; k++ {
		j, err := gen.Next()
		if err != nil {
			panic(err)
		}
		s.Jobs = append(s.Jobs, Job{ID: j.ID, GPUs: j.GPUs, Work: j.Work, Done: j.Work * rng.Float64() / 2, RatePerSecond: j.Rate})
	}
	return s
}
