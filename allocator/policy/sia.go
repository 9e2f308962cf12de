package policy

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

// SiaName is the registry name of the Sia-like rigid program.
const SiaName = "sia"

// Sia's objective parameters (Jayaram Subramanya et al., SOSP'23), fixed
// for rigid jobs: goodput raised to SiaPower (Sia's p = -0.5), a penalty
// SiaLambda for every job left without GPUs, and SiaRestartFactor
// multiplying the goodput of a job that would change model.
const (
	SiaPower         = -0.5
	SiaLambda        = 1.1
	SiaRestartFactor = 0.9
)

// Sia is a Sia-like integer program for rigid jobs (gang size fixed, so the
// only choice is the model): each round it minimises
//
//	sum_{j allocated} (g_ji * restart_ji)^p + lambda * #unallocated
//
// where g_ji is the job's rate on model i over its slowest feasible rate.
// It is solved exactly by the round engine's solver (same constraints as
// FFT's round without (7)), or within the engine config's GapTolerance
// when the operator sets one. Without (7) its LP gap stays about 1e-4 on
// rounds of thousands of jobs, so in HEADLINE.md's large setting most
// rounds from about 2,200 jobs down stop at the solver's work limit,
// reported with their gap (PolicyStats; allocator/sim/HEADLINE.md).
type Sia struct {
	// Fallbacks counts rounds the exact solver failed and the greedy
	// fallback decided.
	Fallbacks int
	// searched counts the rounds the solver did not prove optimal, as
	// FFT's PolicyStats reports them.
	searched searchCounts
}

var (
	_ Policy   = (*Sia)(nil)
	_ Reporter = (*Sia)(nil)
	_ Decider  = (*Sia)(nil)
)

// NewSia is the Sia-like policy's factory.
func NewSia(Options) Policy { return &Sia{} }

func (*Sia) Name() string { return SiaName }

// PolicyStats reports the solver fallbacks, and the rounds not solved to
// optimality with their worst gap (FFT's keys).
func (p *Sia) PolicyStats() map[string]float64 {
	return p.searched.stats(map[string]float64{"solver_fallbacks": float64(p.Fallbacks)})
}

func (sia *Sia) Schedule(ctx context.Context, s *Snapshot) (Assignment, error) {
	a, _ := sia.schedule(ctx, s)
	return a, nil
}

// Decide is Schedule's assignment as a decision that also keeps the
// search's status, gap and stats, so that the round's record says whether
// it was proven (a greedy fallback round keeps none).
func (sia *Sia) Decide(ctx context.Context, s *Snapshot) (*allocator.Decision, error) {
	if s.Instance == nil {
		return nil, fmt.Errorf("sia round %d: the snapshot has no engine instance (the round loop builds it)", s.Round)
	}
	a, res := sia.schedule(ctx, s)
	if err := Check(s, a); err != nil {
		return nil, fmt.Errorf("sia round %d: %w", s.Round, err)
	}
	d := DecisionOf(s, a)
	if res != nil {
		d.Objective, d.Bound, d.Gap, d.Status, d.Stats = res.Objective, res.Bound, res.Gap, res.Status, res.Stats
	}
	return d, nil
}

// schedule decides the round; res is the search's result, nil when the
// greedy fallback decided.
func (sia *Sia) schedule(ctx context.Context, s *Snapshot) (Assignment, *solver.Result) {
	n, m := len(s.Jobs), len(s.Models)
	p := &solver.Problem{Capacity: make([]int, m), Size: make([]int, n), Cost: make([]float64, n*m)}
	for i := range s.Models {
		p.Capacity[i] = s.Models[i].GPUs
	}
	for k := range s.Jobs {
		j := &s.Jobs[k]
		p.Size[k] = j.GPUs
		slow := math.Inf(1)
		for i := range s.Models {
			if j.Fits(&s.Models[i]) {
				slow = math.Min(slow, j.RatePerSecond[s.Models[i].Name])
			}
		}
		for i := range s.Models {
			c := math.Inf(1)
			if mod := &s.Models[i]; j.Fits(mod) {
				g := j.RatePerSecond[mod.Name] / slow
				if j.Running != "" && j.Running != mod.Name {
					g *= SiaRestartFactor
				}
				c = math.Pow(g, SiaPower) - SiaLambda
			}
			p.Cost[k*m+i] = c
		}
	}
	a := make(Assignment, n)
	var opt solver.Options
	if s.Instance != nil {
		// The operator's gap tolerance (engine config, 0 by default)
		// holds for every policy the exact solver decides.
		opt.GapTolerance = s.Instance.Config.GapTolerance
	}
	res, err := solveSafe(ctx, p, opt)
	if err != nil {
		sia.Fallbacks++
		return siaGreedy(s, p), nil
	}
	sia.searched.add(res.Status, res.Gap, opt.GapTolerance)
	for k, c := range res.Choice {
		if c >= 0 {
			a[s.Jobs[k].ID] = s.Models[c].Name
		}
	}
	return a, &res
}

// siaGreedy is the fallback when the exact solver fails: cheapest cost per
// GPU first.
func siaGreedy(s *Snapshot, p *solver.Problem) Assignment {
	m := len(s.Models)
	type opt struct {
		k, i int
		c    float64
	}
	var opts []opt
	for k := range s.Jobs {
		for i := 0; i < m; i++ {
			if c := p.Cost[k*m+i]; !math.IsInf(c, 1) && c < 0 {
				opts = append(opts, opt{k, i, c / float64(s.Jobs[k].GPUs)})
			}
		}
	}
	sort.SliceStable(opts, func(a, b int) bool { return opts[a].c < opts[b].c })
	a, f := make(Assignment, len(s.Jobs)), newFree(s)
	for _, o := range opts {
		if _, ok := a[s.Jobs[o.k].ID]; !ok {
			f.place(a, &s.Jobs[o.k], &s.Models[o.i])
		}
	}
	return a
}

// solveSafe runs the exact solver and turns a panic into an error, so a
// solver fault degrades Sia to its greedy fallback instead of failing.
func solveSafe(ctx context.Context, p *solver.Problem, opt solver.Options) (res solver.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("solver panicked: %v", r)
		}
	}()
	return solver.Solve(ctx, p, opt)
}
