package instancegen

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// modelKind is a GPU model with its speed relative to a K80 and memory.
// Speeds follow the ratios of Gavel's V100/P100/K80 throughput table
// (roughly 1 : 2.5 : 4 for K80 : P100 : V100, see
// ../shared/data/gavel/isolated_throughputs.csv) and extend it to later
// generations by public peak-throughput ratios (a documented rule of
// thumb, not a measurement).
type modelKind struct {
	name     string
	speed    float64
	memoryGB float64
}

var kinds = []modelKind{
	{"Tesla K80", 1.0, 12},
	{"Tesla P100-PCIE-16GB", 2.5, 16},
	{"Tesla T4", 1.9, 16},
	{"Tesla V100-SXM2-16GB", 4.0, 16},
	{"NVIDIA A10", 3.2, 24},
	{"NVIDIA L4", 3.0, 24},
	{"NVIDIA A100-SXM4-40GB", 7.5, 40},
	{"NVIDIA H100 80GB HBM3", 14.0, 80},
}

// BenchmarkSpecs are the round sizes the solver's speed targets name: the
// paper's scalability point and two larger ones. Both the engine's and
// the solver's benchmarks use them, with the seed SeedFor gives.
var BenchmarkSpecs = []Spec{
	{Jobs: 4000, Models: 8, GPUs: 1000},
	{Jobs: 20000, Models: 16, GPUs: 10000},
	{Jobs: 100000, Models: 16, GPUs: 10000},
}

// BenchmarkName names a benchmark case after its spec.
func (s Spec) BenchmarkName() string {
	return fmt.Sprintf("jobs=%d/models=%d/gpus=%d", s.Jobs, s.Models, s.GPUs)
}

// SeedFor returns the generator a benchmark of s draws its instance from.
func SeedFor(s Spec) *rand.Rand { return rand.New(rand.NewPCG(42, uint64(s.Jobs))) }

// Spec sizes an instance.
type Spec struct {
	Jobs   int
	Models int
	GPUs   int
	// Round is the current round; arrivals spread over [0, Round].
	Round int
}

// Generate draws an instance from r. Each job type scales the models'
// speeds by its own noise (affinity differs per workload, as in Gavel's
// table), gang sizes are 1/2/4/8 with probability 0.70/0.10/0.15/0.05
// (Gavel's Philly-like generator), work is 1 to 1000 rounds' worth on the
// fastest model, and rho is exponential with a spread across jobs.
func Generate(r *rand.Rand, s Spec) *allocator.Instance {
	if s.Round == 0 {
		s.Round = 500
	}
	in := &allocator.Instance{
		Round:    s.Round,
		Config:   allocator.DefaultConfig(),
		Fairness: fairness.State{Round: s.Round, Jobs: make(map[string]fairness.JobState, s.Jobs)},
	}
	per := s.GPUs / s.Models
	for i := 0; i < s.Models; i++ {
		k := kinds[i%len(kinds)]
		name := k.name
		if i >= len(kinds) {
			name = fmt.Sprintf("%s #%d", k.name, i/len(kinds)+1)
		}
		gpus := per
		if i < s.GPUs%s.Models {
			gpus++
		}
		in.Models = append(in.Models, allocator.Model{Name: name, GPUs: gpus, MemoryGB: k.memoryGB})
	}
	const jobTypes = 26
	affinity := make([][]float64, jobTypes)
	for t := range affinity {
		affinity[t] = make([]float64, s.Models)
		for i := range affinity[t] {
			affinity[t][i] = math.Exp(r.NormFloat64() * 0.3)
		}
	}
	for j := 0; j < s.Jobs; j++ {
		d := gang(r)
		t := r.IntN(jobTypes)
		job := allocator.Job{
			ID:         fmt.Sprintf("job-%06d", j),
			Arrival:    r.IntN(s.Round + 1),
			GPUs:       d,
			Throughput: make(map[string]float64, s.Models),
		}
		if r.IntN(10) == 0 {
			// A large model: it needs as much memory per GPU as some
			// model of the instance has, which excludes the smaller ones.
			job.MemoryGB = in.Models[r.IntN(s.Models)].MemoryGB
		}
		best := 0.0
		for i, m := range in.Models {
			// Scaling to d GPUs is sub-linear (0.85 efficiency per doubling).
			theta := kinds[i%len(kinds)].speed * affinity[t][i] * float64(d) * math.Pow(0.85, math.Log2(float64(d)))
			job.Throughput[m.Name] = theta
			best = math.Max(best, theta)
		}
		job.Work = best * math.Pow(10, 3*r.Float64())
		job.Done = job.Work * r.Float64() * 0.5
		job.StateGB = r.Float64() * 20
		if r.IntN(3) == 0 {
			job.LastModel = in.Models[r.IntN(s.Models)].Name
		}
		in.Jobs = append(in.Jobs, job)
		in.Fairness.Jobs[job.ID] = fairness.JobState{Arrival: job.Arrival, Work: job.Work, Rho: r.ExpFloat64() * 0.5}
	}
	return in
}

func gang(r *rand.Rand) int {
	switch x := r.Float64(); {
	case x < 0.70:
		return 1
	case x < 0.80:
		return 2
	case x < 0.95:
		return 4
	default:
		return 8
	}
}
