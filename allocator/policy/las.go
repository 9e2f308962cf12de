package policy

import (
	"cmp"
	"math"
	"slices"
)

// LAS names: the heterogeneity-agnostic max-min fairness (Gavel's
// "max_min_fairness", least attained service in GPU-time) and Gavel's
// heterogeneity-aware version ("max_min_fairness_perf").
const (
	LASName      = "las"
	GavelLASName = "gavel-las"
)

// Gavel's programs (policies/max_min_fairness.py and
// finish_time_fairness.py of stanford-futuredata/gavel) have no secondary
// objective, and neither has ours: a throughput tie-break is a
// heterogeneity-aware optimisation Gavel does not make (it put every
// non-bottleneck job on its fastest model and made our gavel-las/gavel-ftf
// 20-30% faster than Gavel's at 2 jobs/hour). Among the optima we return
// the one that gives every job exactly the max-min value (shareLP);
// Gavel's interior-point solver (ECOS via cvxpy) returns a central optimum
// instead, which spreads non-bottleneck jobs over all models. Neither
// choice favours fast models; Gavel's round mechanism (gavel), being work
// conserving, hands out what the allocation leaves.

// NewLAS is the heterogeneity-agnostic max-min fairness policy.
// Gavel's name has no "Perf": its round mechanism fills the models in a
// shuffled order (see gavel).
func NewLAS(opt Options) Policy { return newGavelPolicy(LASName, maxMin(false), false, opt.Seed) }

// NewGavelLAS is Gavel's heterogeneity-aware max-min fairness policy.
func NewGavelLAS(opt Options) Policy {
	return newGavelPolicy(GavelLASName, maxMin(true), true, opt.Seed)
}

// maxMin returns Gavel's max-min fairness allocation:
//
//	maximise   min_j  sum_i w_ji x_ji,   w_ji = theta_ji * d_j / theta_j(proportional)
//	subject to sum_i x_ji <= 1,  sum_j d_j x_ji <= Y_i,  x >= 0
//
// Agnostic: theta is the job's mean rate on every model it fits and the
// normaliser its rate under proportionalShares, which leaves w_ji = d_j
// times a factor common to all jobs: Gavel's MaxMinFairnessPolicy (all
// throughputs 1, weight = scale factor; policies/max_min_fairness.py of
// stanford-futuredata/gavel). Heterogeneity-aware (MaxMinFairnessPolicyWithPerf):
// the normaliser is the job's throughput under the agnostic max-min
// allocation, which weighs jobs by their GPUs (equal GPU shares), not under
// an equal time share per job; we take isolatedShares, the symmetric
// optimum of the agnostic program (Gavel's solver returns some optimum of
// it; with equal model sizes its central one splits the models evenly).
func maxMin(aware bool) fractional {
	return func(s *Snapshot, g *gavel) [][]float64 {
		n, m := len(s.Jobs), len(s.Models)
		w := make([][]float64, n)
		var iso [][]float64
		if aware {
			iso = isolatedShares(s)
		}
		for k := range s.Jobs {
			j := &s.Jobs[k]
			r := rates(s, j, aware)
			norm := proportionalShares(s, j)
			if aware {
				norm = iso[k]
			}
			prop := 0.0
			for i, x := range norm {
				prop += r[i] * x
			}
			w[k] = make([]float64, m)
			if prop <= 0 {
				continue
			}
			for i := range r {
				w[k][i] = r[i] * float64(j.GPUs) / prop
			}
		}
		x, _, err := solveShares(s, w, aware, func(k int) float64 { return 1 }, nil)
		if err != nil {
			g.Fallbacks++
			return isolatedShares(s)
		}
		return x
	}
}

// shareColumn is one LP variable of a job: the job runs split[i] of the
// variable's value on model i.
type shareColumn struct {
	split []float64
	w     float64 // sum_i split[i] * w[i]
}

// columns gives each job its variables. Heterogeneity-aware: one per model
// it fits. Agnostic: a single one whose split is proportional to the sizes
// of the models the job fits. A policy blind to speed sees the models as
// interchangeable, so the symmetric split is its natural optimum (what an
// interior-point solver returns on the symmetric program); letting the
// simplex pick a vertex instead would favour whichever model is listed
// first, an accidental heterogeneity-awareness.
func columns(s *Snapshot, w [][]float64, aware bool) [][]shareColumn {
	m := len(s.Models)
	out := make([][]shareColumn, len(w))
	for k := range w {
		if aware {
			for i := range w[k] {
				if w[k][i] > 0 {
					split := make([]float64, m)
					split[i] = 1
					out[k] = append(out[k], shareColumn{split, w[k][i]})
				}
			}
			continue
		}
		total := 0.0
		for i := range w[k] {
			if w[k][i] > 0 {
				total += float64(s.Models[i].GPUs)
			}
		}
		if total == 0 {
			continue
		}
		col := shareColumn{split: make([]float64, m)}
		for i := range w[k] {
			if w[k][i] > 0 {
				col.split[i] = float64(s.Models[i].GPUs) / total
				col.w += col.split[i] * w[k][i]
			}
		}
		out[k] = []shareColumn{col}
	}
	return out
}

// solveShares solves  maximise t  subject to t <= r_j / need_j for each job,
// where r_j = sum over the job's columns of w_c v_c, sum_c v_c <= 1 (1a)
// and capacity, v >= 0 (shareLP, by column generation); it returns the
// shares x[j][i] = sum_c split_c[i] v_c.
//
// warm, when not nil, are capacity prices of a similar program (the last
// step of ftf's descent) to start from; the prices solveShares ends with
// are returned for the next.
func solveShares(s *Snapshot, w [][]float64, aware bool, need func(k int) float64, warm []float64) ([][]float64, []float64, error) {
	n, m := len(s.Jobs), len(s.Models)
	cols := columns(s, w, aware)
	p := &shareLP{m: m, cap: make([]float64, m), start: make([]int, n+1), tmax: math.Inf(1)}
	for i := range s.Models {
		p.cap[i] = float64(s.Models[i].GPUs)
	}
	p.rs = append(p.rs, 0)
	order := make([]int, 0, m)
	for k := range cols {
		nk := need(k)
		order = order[:0]
		for c := range cols[k] {
			order = append(order, c)
		}
		rate := func(c int) float64 { return cols[k][c].w / nk }
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rate(a), rate(b)) })
		best := 0.0
		for _, c := range order {
			col := cols[k][c]
			p.rate = append(p.rate, rate(c))
			p.gpus = append(p.gpus, float64(s.Jobs[k].GPUs))
			for i, f := range col.split {
				if f != 0 {
					p.idx = append(p.idx, i)
					p.val = append(p.val, f)
				}
			}
			p.rs = append(p.rs, len(p.idx))
			best = math.Max(best, rate(c))
		}
		p.start[k+1] = len(p.rate)
		if len(order) > 0 {
			p.tmax = math.Min(p.tmax, best)
		}
	}
	v, err := p.solve(warm)
	if err != nil {
		return nil, nil, err
	}
	out := make([][]float64, n)
	for k := range cols {
		out[k] = make([]float64, m)
		for c := p.start[k]; c < p.start[k+1]; c++ {
			if v[c] <= 0 {
				continue
			}
			for e := p.rs[c]; e < p.rs[c+1]; e++ {
				out[k][p.idx[e]] += p.val[e] * v[c]
			}
		}
	}
	return out, p.prices, nil
}
