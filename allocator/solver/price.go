package solver

import (
	"math"
	"slices"
)

// A large round leaves most items out: 100,000 jobs compete for 10,000
// GPUs. Its relaxation is then solved on a few of them (column
// generation): the items likeliest to be placed, found cheaply, and then
// every item whose reduced cost under the duals found says it should have
// been among them, until none does. Items left out with non-negative
// reduced costs add nothing to the Lagrangian bound, so the duals of the
// last round are optimal for the whole problem and its LP is the whole
// problem's. Most of the work and memory of a full solve (a heap entry per
// option, moves indexed per item) is spent on items that never move.

// pricedShare is how many items per GPU a problem needs before its cold LP
// is priced: with fewer, most items matter and the rounds cost more than
// they save.
const pricedShare = 4

// pricedCover is how many items per GPU of a model the first round takes
// among those cheapest per GPU there.
const pricedCover = 2

// priced reports whether p's cold LP is solved by pricing.
func priced(p *Problem) bool {
	gpus := 0
	for _, y := range p.Capacity {
		gpus += y
	}
	return p.N() > pricedShare*gpus
}

// solvePriced solves the relaxation of p as solveLP does, with a priced set
// of items. It returns nil when a round's LP is infeasible or stalls: the
// items left out may be what usage needs, and the caller solves in full.
func solvePriced(p *Problem, ar *arena) *lpSolution {
	return solveColumns(p, firstColumns(p), ar)
}

// solveColumns prices from the items in (ascending) on.
func solveColumns(p *Problem, in []int, ar *arena) *lpSolution {
	var warm *warmStart
	for round := 0; round < maxPricing && len(in) < p.N(); round++ {
		cols := p.columns(in, ar)
		lp := solveFull(cols, warm, ar)
		if lp == nil {
			lp = solveFull(cols, nil, ar)
		}
		if warm != nil {
			ar.putInts(warm.flow)
		}
		ar.putFloats(cols.Cost)
		ar.putInts(cols.Size)
		if lp.stalled || !lp.feasible {
			ar.release(lp)
			return nil
		}
		more := violators(p, in, lp.q)
		if len(more) == 0 {
			return expand(p, in, lp, ar)
		}
		// The next round starts from this optimum: the new items wait
		// with no GPUs placed, and repair takes in those worth it.
		merged := mergeSorted(in, more)
		warm = &warmStart{flow: carryColumns(lp.flow, in, merged, p.M(), ar), pi: lp.pi}
		ar.release(lp)
		in = merged
	}
	if warm != nil {
		ar.putInts(warm.flow)
	}
	return nil
}

// maxPricing bounds the rounds; a problem that needs more is solved in
// full.
const maxPricing = 20

// firstColumns returns, ascending, the items among the pricedCover*Y_i
// cheapest per GPU on some model i. The cut-off per model comes from a
// sample: pricing makes up for any item it misses.
func firstColumns(p *Problem) []int {
	m, n := p.M(), p.N()
	step := max(1, n/4096)
	cut := make([]float64, m)
	sample := make([]float64, 0, n/step+1)
	for i, y := range p.Capacity {
		sample = sample[:0]
		for j := 0; j < n; j += step {
			if p.fits(j, i) {
				sample = append(sample, p.Cost[j*m+i]/float64(p.Size[j]))
			}
		}
		cut[i] = math.Inf(-1)
		if len(sample) > 0 {
			slices.Sort(sample)
			cut[i] = sample[min(len(sample)-1, pricedCover*y/step)]
		}
	}
	// One pass in item order: the costs are stored by item.
	var in []int
	for j := 0; j < n; j++ {
		inv := 1 / float64(p.Size[j])
		for i, c := range p.Cost[j*m : (j+1)*m] {
			if c*inv <= cut[i] && p.Size[j] <= p.Capacity[i] {
				in = append(in, j)
				break
			}
		}
	}
	return in
}

// columns is p restricted to the items in (ascending): their sizes and
// cost rows, from ar.
func (p *Problem) columns(in []int, ar *arena) *Problem {
	m := p.M()
	q := &Problem{Capacity: p.Capacity, MinUsage: p.MinUsage}
	q.Size = ar.zeroInts(len(in))
	q.Cost = ar.float64s(len(in) * m)
	for k, j := range in {
		q.Size[k] = p.Size[j]
		copy(q.Cost[k*m:(k+1)*m], p.Cost[j*m:(j+1)*m])
	}
	return q
}

// violators returns, ascending, the items not in (ascending) that some
// model prices below leaving them out: reduced cost c_ji - d_j q_i < 0.
func violators(p *Problem, in []int, q []float64) []int {
	m := p.M()
	var out []int
	k := 0
	for j := 0; j < p.N(); j++ {
		if k < len(in) && in[k] == j {
			k++
			continue
		}
		// The reduced cost as lagrangeBound computes it, so that an item
		// left out adds exactly nothing to the bound.
		d := float64(p.Size[j])
		inv := 1 / d
		for i, c := range p.Cost[j*m : (j+1)*m] {
			if !math.IsInf(c, 1) && p.Size[j] <= p.Capacity[i] && d*(c*inv-q[i]) < 0 {
				out = append(out, j)
				break
			}
		}
	}
	return out
}

// mergeSorted merges two ascending lists without common elements.
func mergeSorted(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// carryColumns maps a flow over the items from to one over the items to
// (both ascending, from a subset of to).
func carryColumns(flow []int, from, to []int, m int, ar *arena) []int {
	out := ar.zeroInts(len(to) * m)
	k := 0
	for t, j := range to {
		if k < len(from) && from[k] == j {
			copy(out[t*m:(t+1)*m], flow[k*m:(k+1)*m])
			k++
		}
	}
	return out
}

// expand turns the LP over the items in into p's: the items left out hold
// no GPUs and, their reduced costs being non-negative, change neither the
// value nor the bound. It keeps lp's flow, its rows indexed by rows, and
// gives lp's other buffers back to ar.
func expand(p *Problem, in []int, lp *lpSolution, ar *arena) *lpSolution {
	sol := *lp
	sol.rows = ar.zeroInts(p.N())
	sol.assigned = ar.zeroInts(p.N())
	for j := range sol.rows {
		sol.rows[j] = -1
	}
	for k, j := range in {
		sol.rows[j] = k
		sol.assigned[j] = lp.assigned[k]
	}
	ar.putInts(lp.assigned)
	return &sol
}
