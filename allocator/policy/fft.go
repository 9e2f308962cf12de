package policy

import (
	"context"
	"fmt"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

// FFT registry names: the paper's configuration and our variants. A
// variant is a named configuration; it never changes the faithful one.
const (
	FFTName          = "fft"
	FFTRemainingName = "fft-remaining"
	FFTStickyName    = "fft-sticky"
)

// FFT decides each round with the round engine (allocator.Decide) on the
// instance the round loop built, with the ledger the loop keeps (Eq. 5 is
// applied there, once, for every policy). A configuration of the engine
// makes a variant.
type FFT struct {
	name string
	cfg  allocator.Config
	// notOptimal counts rounds the solver stopped at its node limit;
	// maxGap is the largest gap it proved then.
	notOptimal int
	maxGap     float64
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
	if d.Status != solver.Optimal {
		p.notOptimal++
		p.maxGap = max(p.maxGap, d.Gap)
	}
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

// PolicyStats reports rounds not solved to optimality and their worst gap.
func (p *FFT) PolicyStats() map[string]float64 {
	return map[string]float64{"rounds_not_optimal": float64(p.notOptimal), "max_gap": p.maxGap}
}
