package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator/placement"
)

// Options are what every factory receives.
type Options struct {
	// Seed drives any random tie-break, so a run can be replayed.
	Seed int64
	// RestartSeconds is the time a job loses when it resumes or changes
	// model, as the runtime charges it (the simulator's -restart-seconds,
	// an operator's measured value on a live cluster). The unit-free FFT
	// configurations price restarts with it; the paper's "fft" keeps the
	// engine's default, so it stays as it was.
	RestartSeconds float64
}

// Factory builds a fresh policy instance; each run gets its own.
type Factory func(Options) Policy

// Builtin is the registry of policies by name, shared by the simulator, the
// allocator and `fftctl simulate -policy=`. The paper's FFT keeps its own
// entry ("fft"); variants are separate names and never change it.
var Builtin = map[string]Factory{
	FIFOName:             NewFIFO,
	FIFOPerfName:         NewFIFOPerf,
	BinpackName:          NewBinpack,
	LASName:              NewLAS,
	GavelLASName:         NewGavelLAS,
	FTFName:              NewFTF,
	GavelFTFName:         NewGavelFTF,
	IsolatedName:         NewIsolated,
	TiresiasName:         NewTiresias,
	AlloXName:            NewAlloX,
	SiaName:              NewSia,
	FFTName:              NewFFT,
	FFTRemainingName:     NewFFTRemaining,
	FFTStickyName:        NewFFTSticky,
	FFTUnitsName:         NewFFTUnits,
	FFTLagName:           NewFFTLag,
	FFTLateName:          NewFFTLate,
	FFTRateName:          NewFFTRate,
	FFTRateLowName:       NewFFTRateLow,
	FFTRateHighName:      NewFFTRateHigh,
	FFTRateW16Name:       NewFFTRateW16,
	FFTRateW0Name:        NewFFTRateW0,
	FFTStarveName:        NewFFTStarve,
	FFTRateLowStarveName: NewFFTRateLowStarve,
}

// ownPlacement is the placement each baseline's own system uses, where it is
// not the paper's Placer (allocator/placement/README.md, "Styles"): Gavel's
// policies (its FIFO, LAS, FTF and isolated, all run through Gavel's round
// mechanism) get Gavel's worker assignment, Sia gets Sia's. Tiresias, AlloX
// and binpack keep the paper's Placer: their placers are not modelled.
var ownPlacement = map[string]placement.Style{
	FIFOName: placement.StyleGavel, FIFOPerfName: placement.StyleGavel,
	LASName: placement.StyleGavel, GavelLASName: placement.StyleGavel,
	FTFName: placement.StyleGavel, GavelFTFName: placement.StyleGavel,
	IsolatedName: placement.StyleGavel,
	SiaName:      placement.StyleSia,
}

// PlacementOf is the placement style the named policy runs with: its own
// system's, or the paper's Placer.
func PlacementOf(name string) placement.Style {
	if st, ok := ownPlacement[name]; ok {
		return st
	}
	return placement.StyleFFT
}

// DefaultName is the policy the allocator and `fftctl dev` run unless told
// otherwise: the best-evaluated configuration (allocator/sim/HEADLINE.md),
// the unit-free objective with restarts priced. The paper's FFT is one
// setting away (-policy fft).
const DefaultName = FFTRateLowName

// Names lists the registry's names, sorted.
func Names() []string {
	out := make([]string, 0, len(Builtin))
	for n := range Builtin {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New builds the named policy.
func New(name string, opt Options) (Policy, error) {
	f, ok := Builtin[name]
	if !ok {
		return nil, fmt.Errorf("policy: unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return f(opt), nil
}
