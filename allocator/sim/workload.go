package sim

import (
	"io"
	"math"
	"math/rand/v2"
	"strconv"
)

// JobSpec is one job of a workload.
type JobSpec struct {
	// Index is the job's position in the workload (0-based); measurement
	// windows are ranges of it.
	Index int    `json:"index"`
	ID    string `json:"id"`
	Type  string `json:"type"`
	// Arrival is in seconds from the start of the run.
	Arrival float64 `json:"arrival_s"`
	GPUs    int     `json:"gpus"`
	// Work is total steps; Rate is steps/s per model with GPUs GPUs.
	Work float64            `json:"work"`
	Rate map[string]float64 `json:"rate"`
	// Source is "file:line" for a job read from a trace.
	Source string `json:"source,omitempty"`
}

// Source yields a workload's jobs in arrival order; Next returns io.EOF at
// the end (a generator in continuous mode never ends).
type Source interface {
	Next() (JobSpec, error)
}

// SliceSource replays a fixed list of jobs (sorted by arrival by the caller).
type SliceSource struct {
	Jobs []JobSpec
	pos  int
}

func (s *SliceSource) Next() (JobSpec, error) {
	if s.pos >= len(s.Jobs) {
		return JobSpec{}, io.EOF
	}
	s.pos++
	return s.Jobs[s.pos-1], nil
}

// GenConfig are the parameters of Gavel's Philly-like generator, as
// published (Narayanan et al., OSDI'20; evaluation.md): Poisson arrivals at
// Rate jobs/hour; duration 60*10^U(1.5,3) s with probability 0.8, else
// 60*10^U(3,4) s; with MultiGPU, 1/2/4/8 GPUs with probability
// 0.70/0.10/0.15/0.05 for every job, then a job type uniform over the
// table's types (over the distributed ones when GPUs > 1);
// total steps = duration x V100 (Reference) throughput for (type, GPUs).
type GenConfig struct {
	Rate     float64 // jobs per hour
	Seed     uint64
	MultiGPU bool
	// Jobs caps the stream (0 = endless, continuous mode).
	Jobs int
	// Reference is the model whose throughput converts duration to steps.
	Reference string
	Table     *Throughputs
}

// Generator is the Philly-like workload generator; it is a Source.
type Generator struct {
	cfg  GenConfig
	rng  *rand.Rand
	next int
	t    float64
}

// NewGenerator seeds a generator; the same config gives the same jobs.
func NewGenerator(cfg GenConfig) *Generator {
	if cfg.Table == nil {
		cfg.Table = GavelThroughputs()
	}
	if cfg.Reference == "" {
		cfg.Reference = "v100"
	}
	return &Generator{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x7068696c6c79))}
}

// Next draws the next job.
func (g *Generator) Next() (JobSpec, error) {
	if g.cfg.Jobs > 0 && g.next >= g.cfg.Jobs {
		return JobSpec{}, io.EOF
	}
	if g.next > 0 && g.cfg.Rate > 0 {
		g.t += g.rng.ExpFloat64() * 3600 / g.cfg.Rate
	}
	// Gavel's generate_job (scheduler/utils.py, stanford-futuredata/gavel,
	// always_generate_scale_factor=True, its default) draws the scale
	// factor first for every job, then draws the job type uniformly and
	// redraws until the type is distributed when the scale factor is > 1.
	// So 30% of all jobs use several GPUs (not 30% of the distributed
	// types' jobs), and multi-GPU jobs are spread over the distributed
	// types only.
	types := g.cfg.Table.Types
	gpus := 1
	if g.cfg.MultiGPU {
		switch u := g.rng.Float64(); {
		case u < 0.70:
			gpus = 1
		case u < 0.80:
			gpus = 2
		case u < 0.95:
			gpus = 4
		default:
			gpus = 8
		}
	}
	typ := types[g.rng.IntN(len(types))]
	for gpus > 1 && !g.cfg.Table.Distributed[typ] {
		typ = types[g.rng.IntN(len(types))]
	}
	var minutes float64
	if g.rng.Float64() < 0.8 {
		minutes = math.Pow(10, 1.5+1.5*g.rng.Float64())
	} else {
		minutes = math.Pow(10, 3+g.rng.Float64())
	}
	rates, _ := g.cfg.Table.Rates(typ, gpus)
	j := JobSpec{
		Index: g.next, ID: jobID(g.next), Type: typ, Arrival: g.t, GPUs: gpus,
		Work: math.Round(60 * minutes * rates[g.cfg.Reference]), Rate: rates,
	}
	if j.Work < 1 {
		j.Work = 1
	}
	g.next++
	return j, nil
}

func jobID(k int) string { return "j" + strconv.Itoa(k) }
