package policy

import "math"

// FTF names: finish-time fairness, heterogeneity-agnostic (a stand-in for
// Themis, Gavel's "finish_time_fairness") and Gavel's heterogeneity-aware
// version ("finish_time_fairness_perf").
const (
	FTFName      = "ftf"
	GavelFTFName = "gavel-ftf"
)

// ftfIterations bounds the descent on the finish-time-fairness target
// (each step is one LP); ftfTol stops it once a step improves the largest
// rho by less than this fraction.
const (
	ftfIterations = 8
	ftfTol        = 1e-3
)

// NewFTF is the heterogeneity-agnostic finish-time fairness policy.
func NewFTF(opt Options) Policy { return newGavelPolicy(FTFName, finishTime(false), false, opt.Seed) }

// NewGavelFTF is Gavel's heterogeneity-aware finish-time fairness policy.
func NewGavelFTF(opt Options) Policy {
	return newGavelPolicy(GavelFTFName, finishTime(true), true, opt.Seed)
}

// finishTime minimises the largest rho_j = (e_j + R_j / r_j(x)) / T_j, with
// e_j the time since arrival, R_j the remaining work, r_j(x) the rate under
// allocation x and T_j = e_j + R_j / r_j(isolated) the job's expected
// finish on its isolated share from now on, as in Gavel's
// FinishTimeFairnessPolicyWithPerf (policies/finish_time_fairness.py of
// stanford-futuredata/gavel: times_since_start + num_steps_remaining /
// isolated throughput, the isolated allocation being the agnostic max-min
// one, for which we take isolatedShares, its symmetric optimum; see
// maxMin). rho_j <= z is r_j(x) >= q_j(z) =
// R_j / (z T_j - e_j), linear for fixed z. Starting from z = the largest
// rho of the isolated allocation (always feasible), each step solves the
// max-min LP  max_x min_j r_j(x) / q_j(z)  and moves z to the largest rho
// of its answer, which never increases z (a Dinkelbach-style descent); it
// stops when a step gains less than ftfTol.
func finishTime(aware bool) fractional {
	return func(s *Snapshot, g *gavel) [][]float64 {
		n := len(s.Jobs)
		iso := isolatedShares(s)
		w := make([][]float64, n)
		e, rem, T := make([]float64, n), make([]float64, n), make([]float64, n)
		for k := range s.Jobs {
			j := &s.Jobs[k]
			w[k] = rates(s, j, aware)
			risol := 0.0
			for i, r := range w[k] {
				risol += r * iso[k][i]
			}
			if risol <= 0 {
				w[k] = make([]float64, len(s.Models))
				continue
			}
			e[k] = math.Max(0, s.Now-j.ArrivalSeconds)
			rem[k] = j.Remaining()
			// Gavel's reference is the expected finish under the isolated
			// allocation from now on: time since arrival + remaining / rate.
			T[k] = e[k] + rem[k]/risol
		}
		worst := func(x [][]float64) float64 {
			z := 0.0
			for k := range x {
				if T[k] == 0 {
					continue
				}
				r := 0.0
				for i := range x[k] {
					r += w[k][i] * x[k][i]
				}
				if r <= 0 {
					return math.Inf(1)
				}
				z = math.Max(z, (e[k]+rem[k]/r)/T[k])
			}
			return z
		}
		best, z := iso, worst(iso)
		var prices []float64
		for it := 0; it < ftfIterations; it++ {
			q := func(k int) float64 {
				if T[k] == 0 || rem[k] == 0 {
					return 1
				}
				return rem[k] / math.Max(z*T[k]-e[k], 1e-9*T[k])
			}
			x, next, err := solveShares(s, w, aware, q, prices)
			if err != nil {
				g.Fallbacks++
				break
			}
			prices = next
			nz := worst(x)
			if !(nz < z) {
				break
			}
			gain := (z - nz) / z
			best, z = x, nz
			if gain < ftfTol {
				break
			}
		}
		return best
	}
}
