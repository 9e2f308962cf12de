package solver

import (
	"cmp"
	"context"
	"math"
	"math/bits"
	"slices"
)

// Packing is the answer to K(t): the most GPUs any feasible assignment
// keeps busy, with one assignment that does.
type Packing struct {
	Usage  int
	Choice []int
	// Proven is false only when the node limit stopped the search before
	// it closed the gap; Usage is then the best found (still feasible, so
	// (7) with K = Usage is never infeasible).
	Proven bool
	// Bound is the proven upper bound on the usage.
	Bound int
}

// MaxUsage computes K(t) for p: the largest sum_ji Size[j] x_ji over all
// x satisfying (1a), (1b) and the exclusions (p.Cost's +Inf entries; the
// finite costs and p.MinUsage are ignored). Most rounds close at once: an
// upper bound (the LP's max flow and, per model, the largest subset sum of
// the sizes it admits) meets a greedy packing. Otherwise branch and bound
// on the packing program decides.
func MaxUsage(ctx context.Context, p *Problem, opt Options) (Packing, error) {
	if err := p.check(); err != nil {
		return Packing{}, err
	}
	best := bestFit(p)
	// Most rounds stop here: the packing fills every GPU, or places every
	// item that fits anywhere.
	bound := 0
	for _, y := range p.Capacity {
		bound += y
	}
	bound = min(bound, fittingUsage(p))
	if p.usage(best) == bound {
		return Packing{Usage: bound, Choice: best, Proven: true, Bound: bound}, nil
	}
	q := packingProblem(p)
	bound = min(bound, solveLP(q, nil, nil).total, subsetSumBound(q))
	if u := q.usage(best); u < bound {
		res, err := solve(ctx, q, Options{NodeLimit: opt.NodeLimit, WorkLimit: opt.WorkLimit, Start: best, noDP: opt.noDP}, -float64(bound))
		if err != nil && res.Choice == nil {
			return Packing{}, err
		}
		best = res.Choice
		if res.Status == Optimal {
			bound = res.Usage
		} else {
			bound = min(bound, int(math.Floor(-res.Bound+1e-9)))
		}
	}
	u := q.usage(best)
	return Packing{Usage: u, Choice: best, Proven: u == bound, Bound: bound}, nil
}

// packingProblem is p's packing program: every admissible option that fits
// its model costs minus its size.
func packingProblem(p *Problem) *Problem {
	m, n := p.M(), p.N()
	q := &Problem{Capacity: p.Capacity, Size: p.Size, Cost: make([]float64, n*m)}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			q.Cost[j*m+i] = math.Inf(1)
			if p.fits(j, i) {
				q.Cost[j*m+i] = -float64(p.Size[j])
			}
		}
	}
	return q
}

// fits reports whether item j may use model i and fits its capacity.
func (p *Problem) fits(j, i int) bool { return p.Allowed(j, i) && p.Size[j] <= p.Capacity[i] }

// fittingUsage is the GPUs of every item that fits some model (ignoring
// capacity sums): it bounds any packing.
func fittingUsage(p *Problem) int {
	u := 0
	for j := 0; j < p.N(); j++ {
		for i := 0; i < p.M(); i++ {
			if p.fits(j, i) {
				u += p.Size[j]
				break
			}
		}
	}
	return u
}

// bestFit packs items largest first, each onto the admissible model with
// the least room that still fits it; it is optimal for the common case of
// many small items.
func bestFit(p *Problem) []int {
	m, n := p.M(), p.N()
	order := make([]int32, n) // half an []int: it is as long as the round
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(p.Size[b], p.Size[a]) })
	room := slices.Clone(p.Capacity)
	choice := make([]int, n)
	for _, j := range order {
		choice[j] = -1
		for i := 0; i < m; i++ {
			if p.Allowed(int(j), i) && p.Size[j] <= room[i] && (choice[j] < 0 || room[i] < room[choice[j]]) {
				choice[j] = i
			}
		}
		if i := choice[j]; i >= 0 {
			room[i] -= p.Size[j]
		}
	}
	return choice
}

// subsetSumBound is sum_i of the largest sum <= Y_i of sizes of items
// model i admits (each item counted on every model it admits).
func subsetSumBound(p *Problem) int {
	m, n := p.M(), p.N()
	total := 0
	for i := 0; i < m; i++ {
		y := p.Capacity[i]
		count := map[int]int{}
		sum := 0
		for j := 0; j < n; j++ {
			if p.Allowed(j, i) && p.Size[j] <= y {
				count[p.Size[j]]++
				sum += p.Size[j]
			}
		}
		if sum <= y || y > maxBitsetCapacity {
			// Everything fits, or the capacity is too large for the
			// bitset to pay off: count the plain bound.
			total += min(sum, y)
			continue
		}
		set := newBitset(y + 1)
		set.set(0)
		for size, c := range count {
			// Binary splitting: chunks 1, 2, 4, ... and the rest
			// reach every multiplicity 0..c.
			for k := 1; c > 0; k *= 2 {
				t := min(k, c)
				set.orShifted(t * size)
				c -= t
			}
		}
		total += set.highest()
	}
	return total
}

// maxBitsetCapacity bounds the subset-sum bitset (2 MiB); beyond it the
// bound falls back to min(capacity, sum of sizes).
const maxBitsetCapacity = 1 << 24

type bitset struct {
	w []uint64
	n int
}

func newBitset(n int) *bitset { return &bitset{w: make([]uint64, (n+63)/64), n: n} }

func (b *bitset) set(k int) { b.w[k/64] |= 1 << (k % 64) }

// orShifted sets bit k+s for every set bit k (bits past n are dropped).
func (b *bitset) orShifted(s int) {
	if s >= b.n {
		return
	}
	ws, bs := s/64, uint(s%64)
	for k := len(b.w) - 1; k >= ws; k-- {
		v := b.w[k-ws] << bs
		if bs != 0 && k-ws-1 >= 0 {
			v |= b.w[k-ws-1] >> (64 - bs)
		}
		b.w[k] |= v
	}
	if r := b.n % 64; r != 0 {
		b.w[len(b.w)-1] &= (1 << uint(r)) - 1
	}
}

func (b *bitset) highest() int {
	for k := len(b.w) - 1; k >= 0; k-- {
		if b.w[k] != 0 {
			return k*64 + 63 - bits.LeadingZeros64(b.w[k])
		}
	}
	return -1
}
