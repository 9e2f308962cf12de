package fairness

import (
	"math"
	"slices"
)

// FTF is Themis's finish-time fairness of one job: rho = T_shared /
// T_isolated, the job's completion time in the shared cluster over the one
// it would have had alone with a 1/N share. rho > 1 means the job was
// treated worse than its fair share. A non-positive isolated time is not
// meaningful and yields NaN.
func FTF(shared, isolated float64) float64 {
	if !(isolated > 0) {
		return math.NaN()
	}
	return shared / isolated
}

// IsolatedRounds is T_isolated in rounds for a job with a 1/n share of every
// model: W / FairRate. It is +Inf when the job fits no model.
func IsolatedRounds(j Job, capacity map[string]int, n float64) float64 {
	// FairRate takes a whole number of sharers; with the average number of
	// jobs present (fft.md) n is fractional, so scale the shares directly.
	r := fairRate(j, capacity, n)
	if r <= 0 {
		return math.Inf(1)
	}
	return j.Work / r
}

// Summary describes a set of FTF ratios.
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
	// Unfair is the fraction of jobs with rho > 1.
	Unfair float64 `json:"unfair_fraction"`
}

// Summarize returns the mean, max and unfair fraction of ratios; NaN
// ratios are skipped.
func Summarize(ratios []float64) Summary {
	var s Summary
	sum, unfair := 0.0, 0
	for _, r := range ratios {
		if math.IsNaN(r) {
			continue
		}
		s.N++
		sum += r
		if r > s.Max || s.N == 1 {
			s.Max = r
		}
		if r > 1 {
			unfair++
		}
	}
	if s.N > 0 {
		s.Mean = sum / float64(s.N)
		s.Unfair = float64(unfair) / float64(s.N)
	}
	return s
}

// CDF returns the sorted ratios and, for each, the fraction of ratios at or
// below it: the points of the empirical distribution function.
func CDF(ratios []float64) (x, p []float64) {
	x = slices.DeleteFunc(slices.Clone(ratios), math.IsNaN)
	slices.Sort(x)
	p = make([]float64, len(x))
	for k := range x {
		p[k] = float64(k+1) / float64(len(x))
	}
	return x, p
}
