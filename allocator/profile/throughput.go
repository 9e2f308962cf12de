package profile

import (
	"fmt"
	"math"
)

// Source says where a throughput value comes from. The order is the order
// of trust the estimator applies: a declared value overrides a measured one,
// a measurement replaces any estimate.
type Source uint8

const (
	// SourceUnknown: no value (the job has no data and the model no factor).
	SourceUnknown Source = iota
	// SourcePrior: an estimate whose model factor comes from the prior table
	// alone, because no job has been measured or declared on that model yet.
	SourcePrior
	// SourceEstimated: an estimate from the model learned across jobs.
	SourceEstimated
	// SourceMeasured: the EMA of this job's own measurements on this model.
	SourceMeasured
	// SourceDeclared: the job's fft.throughput value, taken as exact.
	SourceDeclared
)

var sourceNames = [...]string{"unknown", "prior", "estimated", "measured", "declared"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// MarshalText writes the source's name, so JSON records read "measured".
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a name written by MarshalText.
func (s *Source) UnmarshalText(b []byte) error {
	for i, n := range sourceNames {
		if n == string(b) {
			*s = Source(i)
			return nil
		}
	}
	return fmt.Errorf("profile: unknown throughput source %q: want one of %q", b, sourceNames[:])
}

// Throughput is one job's rate on one GPU model with all the job's GPUs.
// The rate is log-normal: log(rate) has median log(UnitsPerRound) and
// standard deviation LogSD.
type Throughput struct {
	// UnitsPerRound is the median rate, in the job's work units per round.
	UnitsPerRound float64 `json:"units_per_round"`
	// LogSD is the standard deviation of log(rate): 0.1 means about +-10%.
	// A declared value has 0: it is taken as exact.
	LogSD  float64 `json:"log_sd"`
	Source Source  `json:"source"`
	// Measurements counts the pair's own measurements for a measured or
	// declared value, and the observed pairs (measured or declared) behind
	// the whole fit for an estimate.
	Measurements int `json:"measurements"`
}

// Expected is the mean rate of the log-normal, UnitsPerRound*exp(LogSD²/2).
// The round uses this value (see README.md, "Decision use").
func (t Throughput) Expected() float64 {
	return t.UnitsPerRound * math.Exp(t.LogSD*t.LogSD/2)
}

// Optimistic is the upper confidence value UnitsPerRound*exp(z*LogSD), for
// a policy that explores by optimism; z = 1 is about the 84th percentile.
func (t Throughput) Optimistic(z float64) float64 {
	return t.UnitsPerRound * math.Exp(z*t.LogSD)
}

// RelativeError is |estimate-truth|/truth, the error the leave-one-out
// evaluation reports.
func RelativeError(estimate, truth float64) float64 {
	return math.Abs(estimate-truth) / truth
}
