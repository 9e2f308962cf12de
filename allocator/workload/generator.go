package workload

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
)

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
	// Burst jobs (the first ones) all arrive at time 0; the Poisson
	// stream at Rate follows from there. 0 is Gavel's generator, whose
	// first job alone arrives at 0.
	Burst int
	// Reference is the model whose throughput converts duration to steps.
	Reference string
	Table     *Throughputs
	// Stream is the random stream the draws come from (StreamOurs when
	// empty).
	Stream Stream
}

// Stream names the random numbers a Generator draws.
type Stream string

const (
	// StreamOurs draws from Go's PCG: the same distribution as Gavel's
	// generator, not the same jobs.
	StreamOurs Stream = "ours"
	// StreamGavel draws exactly the jobs Gavel's simulator generates for
	// the same seed: CPython's Mersenne Twister (pyRandom), seeded and
	// drawn in Gavel's order (see nextGavel). Gavel's published numbers
	// are for its seed 0, so this stream compares with them job for job.
	StreamGavel Stream = "gavel"
)

// ParseStream reads "ours" (or "") or "gavel".
func ParseStream(s string) (Stream, error) {
	switch Stream(s) {
	case "", StreamOurs:
		return StreamOurs, nil
	case StreamGavel:
		return StreamGavel, nil
	}
	return "", fmt.Errorf("unknown random stream %q: want ours or gavel", s)
}

// gavelJobTable is Gavel's JobTable in its order (scheduler/job_table.py
// of stanford-futuredata/gavel: ResNet-18, ResNet-50, Transformer, LM,
// Recommendation by growing batch size, then A3C and CycleGAN); its
// choice() draws an index into this list.
var gavelJobTable = func() []string {
	var out []string
	add := func(model string, batches ...int) {
		for _, b := range batches {
			out = append(out, fmt.Sprintf("%s (batch size %d)", model, b))
		}
	}
	add("ResNet-18", 16, 32, 64, 128, 256)
	add("ResNet-50", 16, 32, 64, 128)
	add("Transformer", 16, 32, 64, 128, 256)
	add("LM", 5, 10, 20, 40, 80)
	add("Recommendation", 512, 1024, 2048, 4096, 8192)
	return append(out, "A3C", "CycleGAN")
}()

// Generator is the Philly-like workload generator; it is a Source.
type Generator struct {
	cfg  GenConfig
	rng  *rand.Rand
	next int
	t    float64
	// job and arrivals are Gavel's two streams (StreamGavel only).
	job, arrivals *pyRandom
}

// NewGenerator seeds a generator; the same config gives the same jobs.
func NewGenerator(cfg GenConfig) *Generator {
	if cfg.Table == nil {
		cfg.Table = GavelThroughputs()
	}
	if cfg.Reference == "" {
		cfg.Reference = "v100"
	}
	g := &Generator{cfg: cfg}
	if cfg.Stream == StreamGavel {
		// Scheduler._initialize_seeds (scheduler/scheduler.py of
		// stanford-futuredata/gavel): the job generator is seeded with
		// seed+2, the inter-arrival generator with seed+3.
		g.job, g.arrivals = newPyRandom(cfg.Seed+2), newPyRandom(cfg.Seed+3)
	} else {
		g.rng = rand.New(rand.NewPCG(cfg.Seed, 0x7068696c6c79))
	}
	return g
}

// Next draws the next job.
func (g *Generator) Next() (JobSpec, error) {
	if g.cfg.Jobs > 0 && g.next >= g.cfg.Jobs {
		return JobSpec{}, io.EOF
	}
	next := g.nextOurs
	if g.job != nil {
		next = g.nextGavel
	}
	typ, gpus, seconds := next()
	rates, ok := g.cfg.Table.Rates(typ, gpus)
	if !ok {
		return JobSpec{}, fmt.Errorf("generator: throughput table has no %q with %d GPUs", typ, gpus)
	}
	j := JobSpec{
		Index: g.next, ID: jobID(g.next), Type: typ, Arrival: g.t, GPUs: gpus,
		Work: seconds * rates[g.cfg.Reference], Rate: rates,
	}
	j.SpreadRate = g.cfg.Table.SpreadRates(typ, gpus)
	if g.job == nil {
		j.Work = math.Max(1, math.Round(j.Work))
	}
	g.next++
	return j, nil
}

// nextOurs draws a job from our stream: its type, GPUs and V100 seconds.
func (g *Generator) nextOurs() (string, int, float64) {
	if g.next >= max(1, g.cfg.Burst) && g.cfg.Rate > 0 {
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
	return typ, gpus, 60 * minutes
}

// nextGavel draws a job as Gavel's simulator does (stanford-futuredata/gavel,
// Scheduler.simulate and _sample_arrival_time_delta in scheduler/scheduler.py,
// _generate_scale_factor, _generate_duration and generate_job in
// scheduler/utils.py). The first job arrives at 0; after each job the
// inter-arrival stream gives the gap to the next, -ln(1-u) * 3600/Rate. The
// job stream gives, in this order: u = uniform(0,1) for the scale factor
// (2 if 0.7 <= u <= 0.8, 4 if 0.8 <= u <= 0.95, 8 if u >= 0.95, else 1;
// drawn even without MultiGPU, which then sets 1); random() >= 0.8 for a
// long job, 60*10^uniform(3,4) s, else 60*10^uniform(1.5,3) s; then
// choice(JobTable) until the scale factor is 1 or the type is distributed.
// Gavel keeps the steps as a float (duration x V100 throughput).
func (g *Generator) nextGavel() (string, int, float64) {
	if g.next >= max(1, g.cfg.Burst) && g.cfg.Rate > 0 {
		// Gavel divides by the rate parameter 1/lam, lam = 3600/rate;
		// the same operations give the same rounding.
		lam := 3600 / g.cfg.Rate
		g.t += -math.Log(1-g.arrivals.random()) / (1 / lam)
	}
	u := g.job.uniform(0, 1)
	gpus := 1
	switch {
	case 0.7 <= u && u <= 0.8:
		gpus = 2
	case 0.8 <= u && u <= 0.95:
		gpus = 4
	case 0.95 <= u:
		gpus = 8
	}
	var seconds float64
	if g.job.random() >= 0.8 {
		seconds = 60 * math.Pow(10, g.job.uniform(3, 4))
	} else {
		seconds = 60 * math.Pow(10, g.job.uniform(1.5, 3))
	}
	if !g.cfg.MultiGPU {
		gpus = 1
	}
	for {
		typ := gavelJobTable[g.job.below(len(gavelJobTable))]
		if gpus == 1 || g.cfg.Table.Distributed[typ] {
			return typ, gpus, seconds
		}
	}
}

func jobID(k int) string { return "j" + strconv.Itoa(k) }
