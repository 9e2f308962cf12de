package policy

import (
	"context"
	"fmt"

	"github.com/nomad-fft/nomad-fft/allocator"
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
	// FFTRateW16Name and FFTRateW0Name end the weight sweep of
	// HEADLINE.md: weight 16, and 0 (no fairness credit at all, the
	// rate volume and the restart prices alone).
	FFTRateW16Name = "fft-rate-w16"
	FFTRateW0Name  = "fft-rate-w0"
	// FFTStarveName and FFTRateLowStarveName add StarveRounds to the
	// paper's FFT and to the default: a job DefaultStarveRounds late may win
	// GPUs against the work-conserving bound (allocator.Config.StarveRounds).
	FFTStarveName        = "fft-starve"
	FFTRateLowStarveName = "fft-rate-w0.25-starve"
)

// DefaultStarveRounds is the lateness, in rounds against the equal-share
// finish time, from which the -starve variants let a job's credit win GPUs
// against (7): two rounds is short enough that a 1-GPU job never waits long
// beside gangs that tile its model, long enough that a job that just lost
// its GPUs does not lower K at once.
const DefaultStarveRounds = 2

// FFT decides each round with the round engine (allocator.Decide) on the
// instance the round loop built, with the ledger the loop keeps (Eq. 5 is
// applied there, once, for every policy). A configuration of the engine
// makes a variant.
type FFT struct {
	name string
	cfg  allocator.Config
	// searched counts the rounds the solver did not prove optimal.
	searched searchCounts
}

var (
	_ Policy   = (*FFT)(nil)
	_ Decider  = (*FFT)(nil)
	_ Rounder  = (*FFT)(nil)
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

// NewFFTRateW16 is RateConfig with fairness weight 16.
func NewFFTRateW16(opt Options) Policy { return NewFFTWith(FFTRateW16Name, RateConfig(opt, 16)) }

// NewFFTStarve is the paper's FFT with StarveRounds (our variant).
func NewFFTStarve(Options) Policy {
	c := allocator.DefaultConfig()
	c.StarveRounds = DefaultStarveRounds
	return NewFFTWith(FFTStarveName, c)
}

// NewFFTRateLowStarve is the default (fft-rate-w0.25) with StarveRounds.
func NewFFTRateLowStarve(opt Options) Policy {
	c := RateConfig(opt, 0.25)
	c.StarveRounds = DefaultStarveRounds
	return NewFFTWith(FFTRateLowStarveName, c)
}

// NewFFTRateW0 is RateConfig with no fairness credit: what the rate volume
// term does alone.
func NewFFTRateW0(opt Options) Policy { return NewFFTWith(FFTRateW0Name, RateConfig(opt, 0)) }

// NewFFTWith builds an FFT policy with any engine configuration. The
// facts of the cluster (round length, restart time, transfer bandwidth)
// are the loop's, whatever cfg says: see allocator.Config.WithWorld.
func NewFFTWith(name string, cfg allocator.Config) *FFT {
	return &FFT{name: name, cfg: cfg}
}

func (p *FFT) Name() string          { return p.name }
func (p *FFT) RoundSeconds() float64 { return p.cfg.RoundSeconds }

// Config is the engine configuration the policy decides with.
func (p *FFT) Config() allocator.Config { return p.cfg }

// Decide solves the round on the loop's instance with the policy's
// objective.
func (p *FFT) Decide(ctx context.Context, s *Snapshot) (*allocator.Decision, error) {
	if s.Instance == nil {
		return nil, fmt.Errorf("fft round %d: the snapshot has no engine instance (the round loop builds it)", s.Round)
	}
	in := *s.Instance
	in.Config = p.cfg.WithWorld(s.Instance.Config)
	d, err := allocator.Decide(ctx, &in)
	if err != nil {
		return nil, fmt.Errorf("fft round %d: %w", s.Round, err)
	}
	p.searched.add(d.Status, d.Gap, in.Config.GapTolerance)
	return d, nil
}

// Schedule is Decide's assignment.
func (p *FFT) Schedule(ctx context.Context, s *Snapshot) (Assignment, error) {
	d, err := p.Decide(ctx, s)
	if err != nil {
		return nil, err
	}
	return Assignment(d.Assignment()), nil
}

// PolicyStats reports rounds not solved to optimality, those of them
// proven within the gap tolerance, and their worst gap.
func (p *FFT) PolicyStats() map[string]float64 {
	return p.searched.stats(map[string]float64{})
}
