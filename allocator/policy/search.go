package policy

import "github.com/nomad-fft/nomad-fft/allocator/solver"

// searchCounts counts, for PolicyStats, the rounds an exact search (FFT's
// or Sia's) did not prove optimal: all of them, those proven within the
// operator's gap tolerance (the stop it asked for, not a limit), and the
// largest gap any of them proved.
type searchCounts struct {
	notOptimal, withinTolerance int
	maxGap                      float64
}

// add counts one round's search, solved under the gap tolerance.
func (c *searchCounts) add(status solver.Status, gap, tolerance float64) {
	if status == solver.Optimal {
		return
	}
	c.notOptimal++
	c.maxGap = max(c.maxGap, gap)
	if solver.WithinGapTolerance(gap, tolerance) {
		c.withinTolerance++
	}
}

// stats adds the counts to a policy's stats under their keys:
// rounds_not_optimal, max_gap, and rounds_within_tolerance when a
// tolerance stopped any round.
func (c *searchCounts) stats(into map[string]float64) map[string]float64 {
	into["rounds_not_optimal"], into["max_gap"] = float64(c.notOptimal), c.maxGap
	if c.withinTolerance > 0 {
		into["rounds_within_tolerance"] = float64(c.withinTolerance)
	}
	return into
}
