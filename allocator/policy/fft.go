package policy

import (
	"context"
	"fmt"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// FFT registry names: the paper's configuration and our variants. A
// variant is a named configuration; it never changes the faithful one.
const (
	FFTName          = "fft"
	FFTRemainingName = "fft-remaining"
	FFTStickyName    = "fft-sticky"
	FFTUnitsName     = "fft-units"
	FFTLagName       = "fft-lag"
	FFTLateName      = "fft-late"
	FFTRateName      = "fft-rate"
	// FFTRateLowName is RateConfig with fairness weight 0.25: the
	// configuration HEADLINE.md proposes as the default.
	FFTRateLowName  = "fft-rate-w0.25"
	FFTRateHighName = "fft-rate-w4"
)

// FFT runs the round engine (allocator.Decide) each round and keeps the
// fairness ledger across rounds: Reconcile before the round, Advance with
// the work each job actually got after it (paper Eq. 5).
type FFT struct {
	name     string
	cfg      allocator.Config
	state    fairness.State
	rejected map[string]string
	// Last is the most recent decision, for explanations and tests;
	// LastInstance the most recent input handed to the engine (after a
	// failure, the one that failed).
	Last         *allocator.Decision
	LastInstance *allocator.Instance
	// notOptimal counts rounds the solver stopped at its node limit;
	// maxGap is the largest gap it proved then.
	notOptimal int
	maxGap     float64
	// perRoundCache holds each active job's throughput per round; rates
	// and round length do not change during a job's life.
	perRoundCache map[string]map[string]float64
}

var (
	_ Policy   = (*FFT)(nil)
	_ Observer = (*FFT)(nil)
	_ Rounder  = (*FFT)(nil)
	_ Rejecter = (*FFT)(nil)
	_ Reporter = (*FFT)(nil)
)

// NewFFT is the paper's FFT: allocator.DefaultConfig unchanged.
func NewFFT(Options) Policy { return NewFFTWith(FFTName, allocator.DefaultConfig()) }

// NewFFTRemaining is FFT with the volume term on remaining work
// (allocator.VolumeRemaining), our variant.
func NewFFTRemaining(Options) Policy {
	c := allocator.DefaultConfig()
	c.Volume = allocator.VolumeRemaining
	return NewFFTWith(FFTRemainingName, c)
}

// NewFFTSticky is FFT that prices preemption
// (allocator.Config.PricePreemption), our variant: parking a running job
// and resuming a parked one each cost the restart overhead. The volume term
// stays the paper's, so it differs from "fft" in that alone.
func NewFFTSticky(Options) Policy {
	c := allocator.DefaultConfig()
	c.PricePreemption = true
	return NewFFTWith(FFTStickyName, c)
}

// UnitsConfig is the engine configuration of the unit-free variants
// (allocator.ObjectiveUnits) with the given debt and fairness weight:
// restarts priced at opt.RestartSeconds for a park, a resume and a model
// change (PricePreemption), the volume term on remaining work and no wait
// term, so every term is in GPU-rounds.
func UnitsConfig(opt Options, debt allocator.Debt, fairness float64) allocator.Config {
	c := allocator.DefaultConfig()
	c.Objective, c.Debt = allocator.ObjectiveUnits, debt
	c.Volume = allocator.VolumeRemaining
	c.Weights.JCT, c.Weights.Fairness = 0, fairness
	c.PricePreemption, c.RestartSeconds = true, opt.RestartSeconds
	return c
}

// NewFFTUnits is the first probe of issue 10: the paper's terms (wait
// term and total volume included) with Eq. 5's rho counted in rounds on
// the job's fastest model, weighted 1000, and restarts priced.
func NewFFTUnits(opt Options) Policy {
	c := allocator.DefaultConfig()
	c.Objective, c.Debt = allocator.ObjectiveUnits, allocator.DebtShortfall
	c.Weights.Fairness = 1000
	c.PricePreemption, c.RestartSeconds = true, opt.RestartSeconds
	return NewFFTWith(FFTUnitsName, c)
}

// NewFFTLag is UnitsConfig with the debt measured as the work behind the
// equal-share reference (allocator.DebtLag), weight 1.
func NewFFTLag(opt Options) Policy {
	return NewFFTWith(FFTLagName, UnitsConfig(opt, allocator.DebtLag, 1))
}

// NewFFTLate is UnitsConfig with the debt measured as lateness against
// the fair finish time (allocator.DebtLate), weight 1.
func NewFFTLate(opt Options) Policy {
	return NewFFTWith(FFTLateName, UnitsConfig(opt, allocator.DebtLate, 1))
}

// RateConfig is UnitsConfig with the volume term as the job's completion
// rate (allocator.VolumeRate) and the debt as the finish-time fairness
// lost so far (allocator.DebtFTF), weighted fairness.
func RateConfig(opt Options, fairness float64) allocator.Config {
	c := UnitsConfig(opt, allocator.DebtFTF, fairness)
	c.Volume = allocator.VolumeRate
	return c
}

// NewFFTRate is RateConfig with fairness weight 1.
func NewFFTRate(opt Options) Policy { return NewFFTWith(FFTRateName, RateConfig(opt, 1)) }

// NewFFTRateLow is RateConfig with fairness weight 0.25, the proposed
// default (HEADLINE.md).
func NewFFTRateLow(opt Options) Policy { return NewFFTWith(FFTRateLowName, RateConfig(opt, 0.25)) }

// NewFFTRateHigh is RateConfig with fairness weight 4.
func NewFFTRateHigh(opt Options) Policy { return NewFFTWith(FFTRateHighName, RateConfig(opt, 4)) }

// NewFFTWith builds an FFT policy with any engine configuration.
func NewFFTWith(name string, cfg allocator.Config) *FFT {
	return &FFT{name: name, cfg: cfg, rejected: map[string]string{}}
}

func (p *FFT) Name() string          { return p.name }
func (p *FFT) RoundSeconds() float64 { return p.cfg.RoundSeconds }

// Rejected returns jobs refused at admission (fair rate 0) with the reason,
// and forgets them.
func (p *FFT) Rejected() map[string]string {
	out := p.rejected
	p.rejected = map[string]string{}
	return out
}

// Instance builds the round engine's input from a snapshot and the ledger
// (after Reconcile). Throughputs are per round of s.RoundSeconds.
func (p *FFT) Instance(s *Snapshot) *allocator.Instance {
	cfg := p.cfg
	cfg.RoundSeconds = s.RoundSeconds
	in := &allocator.Instance{Round: s.Round, Models: make([]allocator.Model, len(s.Models)), Fairness: p.state, Config: cfg}
	for i, m := range s.Models {
		in.Models[i] = allocator.Model{Name: m.Name, GPUs: m.GPUs, MemoryGB: m.MemoryGB}
	}
	for k := range s.Jobs {
		j := &s.Jobs[k]
		if _, ok := p.state.Jobs[j.ID]; !ok || !fitsAny(s, j) {
			// Not admitted, or no model can take it this round (capacity
			// shrank): it waits; the engine rejects such jobs outright.
			continue
		}
		in.Jobs = append(in.Jobs, allocator.Job{
			ID: j.ID, Arrival: j.ArrivalRound, GPUs: j.GPUs, Work: j.Work, Done: j.Done,
			Throughput: p.perRound(s, j), MemoryGB: j.MemoryGB, StateGB: j.StateGB, LastModel: j.LastModel,
			Running: j.Running != "",
		})
	}
	return in
}

func (p *FFT) perRound(s *Snapshot, j *Job) map[string]float64 {
	if th, ok := p.perRoundCache[j.ID]; ok {
		return th
	}
	if p.perRoundCache == nil {
		p.perRoundCache = map[string]map[string]float64{}
	}
	th := make(map[string]float64, len(s.Models))
	for i := range s.Models {
		if m := &s.Models[i]; j.Fits(m) {
			th[m.Name] = j.Rate[m.Name] * s.RoundSeconds
		}
	}
	p.perRoundCache[j.ID] = th
	return th
}

func (p *FFT) Schedule(ctx context.Context, s *Snapshot) (Assignment, error) {
	active := make([]fairness.Job, 0, len(s.Jobs))
	for k := range s.Jobs {
		j := &s.Jobs[k]
		active = append(active, fairness.Job{ID: j.ID, Arrival: j.ArrivalRound, Work: j.Work, GPUs: j.GPUs, Throughput: p.perRound(s, j)})
	}
	for _, id := range p.state.Reconcile(active, s.Capacity()) {
		p.rejected[id] = "fair rate 0: fits no GPU model of the cluster"
	}
	if len(p.perRoundCache) > 2*len(s.Jobs)+64 {
		live := make(map[string]bool, len(s.Jobs))
		for k := range s.Jobs {
			live[s.Jobs[k].ID] = true
		}
		for id := range p.perRoundCache {
			if !live[id] {
				delete(p.perRoundCache, id)
			}
		}
	}
	in := p.Instance(s)
	if len(in.Jobs) == 0 {
		return Assignment{}, nil
	}
	p.LastInstance = in
	d, err := allocator.Decide(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("fft round %d: %w", s.Round, err)
	}
	p.Last = d
	if d.Status != solver.Optimal {
		p.notOptimal++
		p.maxGap = max(p.maxGap, d.Gap)
	}
	return Assignment(d.Assignment()), nil
}

// PolicyStats reports rounds not solved to optimality and their worst gap.
func (p *FFT) PolicyStats() map[string]float64 {
	return map[string]float64{"rounds_not_optimal": float64(p.notOptimal), "max_gap": p.maxGap}
}

// Observe advances the ledger with the work each job got (work units).
func (p *FFT) Observe(s *Snapshot, _ Assignment, achieved map[string]float64) {
	p.state.Advance(s.Round, achieved)
}

func fitsAny(s *Snapshot, j *Job) bool {
	for i := range s.Models {
		if j.Fits(&s.Models[i]) {
			return true
		}
	}
	return false
}
