package policy

import (
	"cmp"
	"errors"
	"math"
	"slices"
)

// shareLP is the max-min program of Gavel's policies (solveShares):
//
//	maximise   t
//	subject to sum_c a_kc v_kc >= t          for every job k with columns
//	           sum_c v_kc <= 1               for every job k
//	           sum_k sum_c g_kci v_kc <= Y_i for every model i
//	           v >= 0
//
// Only the M capacity rows couple the jobs, so it is solved by column
// generation (Dantzig-Wolfe) on the set T of pairs (t, r): a common rate t
// and the resources r in R^M that all jobs use to reach it. The master is
// an LP over convex combinations of generated pairs with M+1 rows (a small
// dense tableau); the pricing problem, given the master's capacity prices
// lambda, is
//
//	max_t  t - sum_k f_k(t),  f_k(t) = min { lambda.g_k v : a_k.v >= t, sum v <= 1, v >= 0 },
//
// where f_k is the lower convex hull of the origin and the job's columns
// (rate a_kc, cost lambda.g_kc), so the maximiser is where the summed
// slopes cross 1: one sort of the hulls' breakpoints. Every pricing gives
// a Lagrangian upper bound, every master a feasible allocation; the loop
// stops when they meet (relative gap shareGapTol), which proves the master
// optimal for the whole program. The work per iteration is linear in the
// jobs (plus the sort): a 4,000-job, 8-model program, whose dense tableau
// would be 8,000 rows by 40,000 columns, takes tens of iterations.
//
// Every generated pair gives each job exactly rate t, so the answer gives
// every job exactly the max-min rate t*: capacity the max-min value does
// not need stays unallocated (Gavel's round mechanism is work conserving
// and hands it out). A simplex vertex would give some jobs more,
// arbitrarily; an interior point solver spreads it; all are optima.
type shareLP struct {
	m   int
	cap []float64
	// Job k's columns are start[k]:start[k+1], by rate ascending.
	start []int
	rate  []float64
	// Column c uses gpus[c]*split[i] GPUs of model i for i in
	// idx[rs[c]:rs[c+1]], split in val[rs[c]:rs[c+1]].
	gpus []float64
	rs   []int
	idx  []int
	val  []float64
	// tmax is the largest t every job can reach: min_k max_c a_kc.
	tmax float64
	// prices are the capacity prices of the best bound found by solve: a
	// warm start for a similar program.
	prices []float64
}

// Tolerances and limits of the column generation.
const (
	// shareGapTol: stop when the Lagrangian bound is within this fraction
	// of the master's value (or within shareGapTol absolutely, for t* near
	// 0). Well below the tableau's own pivot tolerance of 1e-9 in effect.
	shareGapTol = 1e-9
	// shareMaxIterations bounds the column generation; it has not been
	// near this on any program we ran (a few dozen iterations).
	shareMaxIterations = 2000
	// shareSmoothing is the weight of the best-bound prices in the
	// pricing point (Wentges smoothing).
	shareSmoothing = 0.5
)

// errNoJobs: no job has a column, t is unbounded.
var errNoJobs = errors.New("policy: lp has no job that can run")

// hullPoint is a vertex of a job's cost hull: column col (-1: the origin)
// at rate r and cost c.
type hullPoint struct {
	col  int
	r, c float64
}

// pairBuf holds one pricing's work, reused across iterations.
type pairBuf struct {
	hulls  [][]hullPoint
	events []hullEvent
	cost   []float64
}

// hullEvent: at rate r the slope of a job's hull grows by d.
type hullEvent struct{ r, d float64 }

// hull builds job k's lower hull under prices lambda into out.
func (p *shareLP) hull(k int, lambda []float64, out []hullPoint) []hullPoint {
	out = append(out[:0], hullPoint{col: -1})
	for c := p.start[k]; c < p.start[k+1]; c++ {
		cost := 0.0
		for e := p.rs[c]; e < p.rs[c+1]; e++ {
			cost += lambda[p.idx[e]] * p.val[e]
		}
		q := hullPoint{col: c, r: p.rate[c], c: cost * p.gpus[c]}
		if last := out[len(out)-1]; last.r == q.r {
			if q.c >= last.c {
				continue // same rate, not cheaper
			}
			out = out[:len(out)-1]
		}
		// Pop vertices on or above the chord to q (cross product <= 0).
		for len(out) >= 2 {
			a, b := out[len(out)-2], out[len(out)-1]
			if (b.r-a.r)*(q.c-a.c)-(b.c-a.c)*(q.r-a.r) > 0 {
				break
			}
			out = out[:len(out)-1]
		}
		out = append(out, q)
	}
	return out
}

// at returns the hull's point at rate t (0 <= t <= the hull's last rate)
// as the two vertices bracketing it and the weight of the upper one.
func at(h []hullPoint, t float64) (lo, hi hullPoint, w float64) {
	l := 1
	for l < len(h)-1 && h[l].r < t {
		l++
	}
	lo, hi = h[l-1], h[l]
	if hi.r > lo.r {
		w = (t - lo.r) / (hi.r - lo.r)
	}
	return lo, hi, min(1, max(0, w))
}

// price solves the pricing problem under prices lambda: it returns the
// rate t of the best pair and its resources in r (len M) and cost sum_k f_k(t).
func (p *shareLP) price(lambda []float64, buf *pairBuf, r []float64) (t, cost float64) {
	n := len(p.start) - 1
	if buf.hulls == nil {
		// One backing array: job k's hull has at most its columns and
		// the origin, so no hull ever grows into the next.
		flat := make([]hullPoint, len(p.rate)+n)
		buf.hulls = make([][]hullPoint, n)
		for k := range buf.hulls {
			o := p.start[k] + k
			buf.hulls[k] = flat[o : o : o+p.start[k+1]-p.start[k]+1]
		}
	}
	buf.events = buf.events[:0]
	slope := 0.0
	for k := 0; k < n; k++ {
		if p.start[k] == p.start[k+1] {
			continue
		}
		h := p.hull(k, lambda, buf.hulls[k])
		buf.hulls[k] = h
		prev := (h[1].c - h[0].c) / (h[1].r - h[0].r)
		slope += prev
		for l := 1; l+1 < len(h) && h[l].r < p.tmax; l++ {
			s := (h[l+1].c - h[l].c) / (h[l+1].r - h[l].r)
			buf.events = append(buf.events, hullEvent{h[l].r, s - prev})
			prev = s
		}
	}
	// t - sum_k f_k(t) is concave: walk its breakpoints while the summed
	// slope of the f_k stays below 1.
	slices.SortFunc(buf.events, func(a, b hullEvent) int { return cmp.Compare(a.r, b.r) })
	t = 0
	for _, e := range buf.events {
		if slope >= 1 {
			break // t - sum_k f_k falls from t on
		}
		t = e.r
		slope += e.d
	}
	if slope < 1 {
		t = p.tmax
	}
	clear(r)
	for k := 0; k < n; k++ {
		if p.start[k] == p.start[k+1] {
			continue
		}
		lo, hi, w := at(buf.hulls[k], t)
		cost += (1-w)*lo.c + w*hi.c
		p.addResources(r, lo.col, 1-w)
		p.addResources(r, hi.col, w)
	}
	return t, cost
}

// addResources adds weight times column c's GPUs per model to r.
func (p *shareLP) addResources(r []float64, c int, weight float64) {
	if c < 0 || weight == 0 {
		return
	}
	for e := p.rs[c]; e < p.rs[c+1]; e++ {
		r[p.idx[e]] += weight * p.gpus[c] * p.val[e]
	}
}

// pair is a generated element of T: the prices that priced it (to rebuild
// the jobs' shares) and its rate and resources.
type pair struct {
	lambda []float64
	t      float64
	r      []float64
}

// solve runs the column generation. It returns, for every job, the weight
// of each of its columns (indexed like rate), and the proven gap.
func (p *shareLP) solve(warm []float64) ([]float64, error) {
	m := p.m
	if p.tmax == math.Inf(1) {
		return nil, errNoJobs
	}
	var pairs []pair
	var buf pairBuf
	lambda := make([]float64, m) // the master's prices
	sigma, lb := 0.0, 0.0
	// Wentges smoothing: price at a point between the master's prices and
	// the best-bound prices so far (center), which damps the oscillation
	// of plain column generation; a point that yields no improving column
	// is followed by pricing at the master's prices, which either improves
	// or proves optimality, so the loop still terminates.
	center, bestUB := make([]float64, m), math.Inf(1)
	sep := make([]float64, m)
	var alpha []float64
	smooth := 0.0
	for it := 0; ; it++ {
		if it >= shareMaxIterations {
			return nil, errNoConverge
		}
		for i := range sep {
			sep[i] = smooth*center[i] + (1-smooth)*lambda[i]
		}
		if it == 0 && warm != nil {
			copy(sep, warm) // the prices of a similar program: a good first pair
		}
		r := make([]float64, m)
		t, cost := p.price(sep, &buf, r)
		// Lagrangian bound at sep: sep.Y + max(0, t - sep.r).
		ub := math.Max(0, t-cost)
		for i := range sep {
			ub += sep[i] * p.cap[i]
		}
		if ub < bestUB {
			bestUB = ub
			copy(center, sep)
		}
		if it > 0 && bestUB-lb <= shareGapTol*math.Max(1, lb) {
			break
		}
		rc := t - sigma
		for i := range lambda {
			rc -= lambda[i] * r[i]
		}
		if it > 0 && rc <= shareGapTol*math.Max(1, lb) && smooth > 0 {
			smooth = 0 // mis-priced: no column improves the master; price at its prices
			continue
		}
		smooth = shareSmoothing
		pairs = append(pairs, pair{lambda: slices.Clone(sep), t: t, r: r})
		// The master: max sum_j alpha_j t_j s.t. sum_j alpha_j r_j <= Y,
		// sum_j alpha_j <= 1 (the origin, t = 0 and r = 0, is in T).
		obj := make([]float64, len(pairs))
		g := make([][]float64, m+1)
		for i := range g {
			g[i] = make([]float64, len(pairs))
		}
		for j, q := range pairs {
			obj[j] = q.t
			for i := 0; i < m; i++ {
				g[i][j] = q.r[i]
			}
			g[m][j] = 1
		}
		h := append(slices.Clone(p.cap), 1)
		var y []float64
		var err error
		alpha, y, err = tableauMaxDual(obj, g, h)
		if err != nil {
			return nil, err
		}
		copy(lambda, y[:m])
		sigma = y[m]
		lb = 0
		for j, a := range alpha {
			lb += a * pairs[j].t
		}
	}
	p.prices = center
	// Rebuild the shares from the pairs the master uses.
	v := make([]float64, len(p.rate))
	n := len(p.start) - 1
	h := make([]hullPoint, 0, p.m+1)
	for j, a := range alpha {
		if a <= 0 {
			continue
		}
		q := pairs[j]
		for k := 0; k < n; k++ {
			if p.start[k] == p.start[k+1] {
				continue
			}
			h = p.hull(k, q.lambda, h)
			lo, hi, w := at(h, q.t)
			if lo.col >= 0 {
				v[lo.col] += a * (1 - w)
			}
			if hi.col >= 0 {
				v[hi.col] += a * w
			}
		}
	}
	return v, nil
}
