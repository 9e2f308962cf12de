package solver

import (
	"math"
	"slices"
)

// A Lagrangian bound for small, tight rounds. The LP relaxation may split
// a gang across models (or run part of it), and on rounds where a few
// hundred multi-GPU jobs compete for every GPU that split is what keeps
// its bound below the optimum: options then differ by less than the gap,
// reduced-cost fixing leaves nearly every item free and branch and bound
// needed up to 100,000 nodes. Relaxing (1a) and (7) instead, with a
// multiplier u_j >= 0 per item and mu >= 0 for (7), leaves one 0/1
// knapsack per model, which keeps gangs whole:
//
//	L(u, mu) = sum_i min { sum_j (c_ji + u_j - mu d_j) x_ji : sum_j d_j x_ji <= Y_i }
//	           - sum_j u_j + mu MinUsage
//
// a lower bound for every u >= 0, mu >= 0.
// At the LP's duals it equals the LP bound; a subgradient ascent at the
// first branching node closes much of the rest (73% of the root gap on a
// 166-job round late in a large run), and every node is then also cut by
// L, restricted to the node's items and capacities, at multipliers each
// node improves by a few steps of its own (lagrangeNode). The ascent's
// multipliers also fix (lagrangeFix): forcing an item onto a model, or
// out, raises L by what its knapsacks lose, read from their prefix and
// suffix tables. On the late rounds of the large setting (400-650 jobs,
// mostly gangs, every one of 1,000 GPUs to fill) the LP's duals fix
// nothing until a good incumbent exists, so such rounds are searched in
// two phases (branchAndBound): the second restarts from the root with the
// first's incumbent, the ascent aimed at it.

// lagrangeMaxWork bounds the knapsacks' size, items times GPUs, for which
// the bound is used: it costs about that many steps a node.
const lagrangeMaxWork = 1 << 17

// lagrangeIterations bounds the subgradient ascent at the root.
const lagrangeIterations = 150

// knapsackWork is what one pass over p's knapsacks adds to a search's
// work (Options.WorkLimit): a step of a knapsack (one item, one capacity)
// costs about a twentieth of what an option costs a node.
func knapsackWork(p *Problem) int {
	total := 0
	for _, y := range p.Capacity {
		total += max(0, y)
	}
	return p.N() * total / 20
}

// lagrangeSize reports whether p is small enough for the bound.
func lagrangeSize(p *Problem) bool {
	total := 0
	for _, y := range p.Capacity {
		total += max(0, y)
	}
	return p.N()*total <= lagrangeMaxWork
}

// knapsackScratch is knapsackBound's scratch, kept by a search across calls:
// best is a knapsack's table by capacity, pick its choices by item and
// capacity.
type knapsackScratch struct {
	best []float64
	pick []bool
}

// knapsackBound returns L(u, mu) for sub, whose item j is original item
// idx[j] (u is indexed by original items). If take is not nil it also
// sets take[j] to the number of knapsacks that chose item j (the
// subgradient is take[j] - 1) and returns the GPUs they use; picked, when
// not nil, gets the cheapest of those knapsacks' models for each item (-1:
// none), which lagrangeRepair turns into an assignment.
func knapsackBound(sub *Problem, idx []int, u []float64, mu float64, take, picked []int, ks *knapsackScratch) (float64, int) {
	m, n := sub.M(), sub.N()
	L := mu * float64(sub.MinUsage)
	used := 0
	for j := 0; j < n; j++ {
		L -= u[idx[j]]
	}
	for j := range take {
		take[j] = 0
	}
	for j := range picked {
		picked[j] = -1
	}
	for i := 0; i < m; i++ {
		y := sub.Capacity[i]
		if y <= 0 {
			continue
		}
		w1 := y + 1
		b := grown(ks.best, w1)
		ks.best = b
		pick := grown(ks.pick, n*w1)
		ks.pick = pick
		for j := 0; j < n; j++ {
			c := sub.Cost[j*m+i]
			d := sub.Size[j]
			if math.IsInf(c, 1) || d > y {
				continue
			}
			v := c + u[idx[j]] - mu*float64(d)
			if v >= 0 {
				continue
			}
			knapsackItem(b, v, d, pick[j*w1:(j+1)*w1])
		}
		L += b[y]
		if take != nil {
			w := y
			for j := n - 1; j >= 0 && w > 0; j-- {
				if pick[j*w1+w] {
					take[j]++
					if picked != nil && (picked[j] < 0 || sub.Cost[j*m+i] < sub.Cost[j*m+picked[j]]) {
						picked[j] = i
					}
					used += sub.Size[j]
					w -= sub.Size[j]
				}
			}
		}
	}
	return L, used
}

// knapsackItem adds an item of value v and size d to the 0/1 knapsack table
// b (b[w]: the best value within, or, where b starts at +Inf above 0,
// exactly at w GPUs), marking in pick (as long as b) the capacities where it
// improves the table. Capacities fall so that the item is counted once; the
// slices are cut to one length so that the loop runs without bounds
// checks, the knapsacks' hottest loop. knapsackBound and the repair's fill
// both add their items with it.
func knapsackItem(b []float64, v float64, d int, pick []bool) {
	dst := b[d:]
	src := b[:len(dst)]
	row := pick[d:]
	row = row[:len(dst)]
	for k := len(dst) - 1; k >= 0; k-- {
		if nv := src[k] + v; nv < dst[k] {
			dst[k] = nv
			row[k] = true
		}
	}
}

// grown is b resized to n zeroed elements, reusing its array when it is large enough.
func grown[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	b = b[:n]
	clear(b)
	return b
}

// lagrangeRoot runs the subgradient ascent on node p (the first that
// branches once an incumbent exists, usually the root; idx maps its items
// to the original ones, fixedCost is what its fixings cost), from the
// LP's duals, with Polyak steps towards the incumbent's value. Each step's
// knapsacks are also repaired into an assignment (lagrangeRepair): on a
// round that must fill every GPU with gangs the rounding heuristics find
// poor incumbents, and a step aimed at a poor one overshoots. When the
// incumbent improves the steps aim at it afresh. It sets s.lagU and
// s.lagMu to the best multipliers and returns their bound for p,
// fixedCost excluded.
func (s *search) lagrangeRoot(p *Problem, idx []int, lp *lpSolution, fixedCost float64) float64 {
	m, n := p.M(), p.N()
	u := make([]float64, s.p.N())
	mu := max(0, lp.nu)
	for j := 0; j < n; j++ {
		d := float64(p.Size[j])
		for i := 0; i < m; i++ {
			if c := p.Cost[j*m+i]; !math.IsInf(c, 1) && p.Size[j] <= p.Capacity[i] {
				u[idx[j]] = max(u[idx[j]], d*lp.q[i]-c)
			}
		}
	}
	take, picked := make([]int, n), make([]int, n)
	bestU, bestMu := append([]float64(nil), u...), mu
	s.work += knapsackWork(p)
	bestL, used := knapsackBound(p, idx, u, mu, take, picked, &s.lagScratch)
	L := bestL
	theta, stale := 1.0, 0
	for it := 0; it < lagrangeIterations; it++ {
		if before := s.bestVal; s.lagrangeRepair(p, idx, fixedCost, picked) && s.bestVal < before {
			theta, stale = 1, 0
		}
		target := s.bestVal - fixedCost
		norm := 0.0
		for j := 0; j < n; j++ {
			g := float64(take[j] - 1)
			if u[idx[j]] == 0 && g < 0 {
				g = 0 // u_j stays at 0
			}
			norm += g * g
		}
		gmu := float64(p.MinUsage - used)
		if mu == 0 && gmu < 0 {
			gmu = 0
		}
		norm += gmu * gmu
		if norm == 0 || target-L <= s.tol {
			break // L is the optimum, or (u, mu) is optimal
		}
		step := theta * (target - L) / norm
		for j := 0; j < n; j++ {
			u[idx[j]] = max(0, u[idx[j]]+step*float64(take[j]-1))
		}
		mu = max(0, mu+step*gmu)
		s.work += knapsackWork(p)
		L, used = knapsackBound(p, idx, u, mu, take, picked, &s.lagScratch)
		if L > bestL {
			bestL, bestMu = L, mu
			copy(bestU, u)
			stale = 0
		} else if stale++; stale >= 5 {
			theta /= 2
			stale = 0
		}
	}
	s.lagU, s.lagMu = bestU, bestMu
	return bestL
}

// lagrangeFix is reduced-cost fixing with the Lagrangian bound at the
// multipliers lagrangeRoot found (s.lagU, s.lagMu), for node sub (item j is
// original item idx[j]; fixedCost is what the node's fixings cost). The
// bound of the node with item j on model i is L plus what forcing j into
// knapsack i and out of the others costs; with j left out, what taking it
// out of every knapsack costs. Each knapsack gives these for every item
// from its prefix and suffix tables (best value of the items before j, and
// after j, within each capacity), in O(items x GPUs). An option whose
// bound reaches the incumbent plus the tolerance is dropped: no assignment
// that uses it is better. dropped[j*(M+1)+i] marks model i, and
// dropped[j*(M+1)+M] leaving j out. It returns the node's Lagrangian bound
// (fixedCost included) and how many options it dropped.
func (s *search) lagrangeFix(sub *Problem, idx []int, fixedCost float64, dropped []bool) (float64, int) {
	m, n := sub.M(), sub.N()
	u, mu := s.lagU, s.lagMu
	s.work += 4 * knapsackWork(sub) // the tables both ways and the combining
	L := fixedCost + mu*float64(sub.MinUsage)
	for j := 0; j < n; j++ {
		L -= u[idx[j]]
	}
	// out[j] is what leaving j out of every knapsack costs; in[j*m+i] what
	// forcing it into knapsack i costs beyond that (+Inf: not an option).
	out := make([]float64, n)
	in := make([]float64, n*m)
	for k := range in {
		in[k] = math.Inf(1)
	}
	var pre, suf []float64
	for i := 0; i < m; i++ {
		y := sub.Capacity[i]
		if y <= 0 {
			continue
		}
		w1 := y + 1
		pre = grown(pre, (n+1)*w1)
		suf = grown(suf, (n+1)*w1)
		v := func(j int) (float64, bool) {
			c := sub.Cost[j*m+i]
			if math.IsInf(c, 1) || sub.Size[j] > y {
				return 0, false
			}
			return c + u[idx[j]] - mu*float64(sub.Size[j]), true
		}
		// pre[j*w1+w]: best of items < j within w GPUs; suf[j*w1+w]: of items >= j.
		for j := 0; j < n; j++ {
			a, b := pre[j*w1:(j+1)*w1], pre[(j+1)*w1:(j+2)*w1]
			copy(b, a)
			if vj, ok := v(j); ok && vj < 0 {
				for w := sub.Size[j]; w <= y; w++ {
					b[w] = min(b[w], a[w-sub.Size[j]]+vj)
				}
			}
		}
		for j := n - 1; j >= 0; j-- {
			a, b := suf[(j+1)*w1:(j+2)*w1], suf[j*w1:(j+1)*w1]
			copy(b, a)
			if vj, ok := v(j); ok && vj < 0 {
				for w := sub.Size[j]; w <= y; w++ {
					b[w] = min(b[w], a[w-sub.Size[j]]+vj)
				}
			}
		}
		K := pre[n*w1+y]
		L += K
		// others(j, c): best of the items other than j within c GPUs.
		others := func(j, c int) float64 {
			a, b := pre[j*w1:], suf[(j+1)*w1:]
			best := math.Inf(1)
			for w := 0; w <= c; w++ {
				best = min(best, a[w]+b[c-w])
			}
			return best
		}
		for j := 0; j < n; j++ {
			vj, ok := v(j)
			if !ok {
				continue
			}
			ex := K
			if vj < 0 { // j may be in the knapsack's optimum
				ex = others(j, y)
				out[j] += ex - K
			}
			in[j*m+i] = vj + others(j, y-sub.Size[j]) - ex
		}
	}
	limit := s.bestVal + s.tol
	count := 0
	for j := 0; j < n; j++ {
		base := L + out[j]
		if base >= limit {
			dropped[j*(m+1)+m] = true
			count++
		}
		for i := 0; i < m; i++ {
			if c := in[j*m+i]; !math.IsInf(c, 1) && base+c >= limit {
				dropped[j*(m+1)+i] = true
				count++
			}
		}
	}
	return L, count
}

// lagrangeFixMaxWork bounds the knapsacks' size, items times GPUs, for which
// a search runs the ascent and its fixing once, at the root of its second
// phase: about 150 knapsack passes, a tenth of a second at 600 jobs on
// 1,000 GPUs.
const lagrangeFixMaxWork = 1 << 21

// lagrangeFixSize reports whether p is small enough for the fixing.
func lagrangeFixSize(p *Problem) bool {
	total := 0
	for _, y := range p.Capacity {
		total += max(0, y)
	}
	return p.N()*total <= lagrangeFixMaxWork
}

// lagrangeDrop applies lagrangeFix to node sub: it returns the node
// without the options the Lagrangian bound rules out (items left with no
// model are left out, items that must run and have one model are fixed
// there, in s.assign, recorded in undo), its items and cost of fixings.
// next is nil when nothing was dropped; ok is false when no assignment of
// the node can beat the incumbent.
func (s *search) lagrangeDrop(sub *Problem, idx []int, fixedCost float64, undo *[]int) (next *Problem, nextIdx []int, fc float64, ok bool) {
	m, n := sub.M(), sub.N()
	dropped := make([]bool, n*(m+1))
	if _, count := s.lagrangeFix(sub, idx, fixedCost, dropped); count == 0 {
		return nil, nil, fixedCost, true
	}
	out := &Problem{Capacity: slices.Clone(sub.Capacity), MinUsage: sub.MinUsage,
		Size: s.ar.zeroInts(n)[:0], Cost: s.ar.float64s(n * m)[:0]}
	outIdx := s.ar.zeroInts(n)[:0]
	fc = fixedCost
	row := make([]float64, m)
	for j := 0; j < n; j++ {
		left, only := 0, -1
		for i := 0; i < m; i++ {
			row[i] = math.Inf(1)
			if c := sub.Cost[j*m+i]; !math.IsInf(c, 1) && sub.Size[j] <= sub.Capacity[i] && !dropped[j*(m+1)+i] {
				row[i] = c
				left++
				only = i
			}
		}
		mustRun := dropped[j*(m+1)+m]
		switch {
		case left == 0 && mustRun:
			s.ar.putFloats(out.Cost)
			s.ar.putInts(out.Size, outIdx)
			return nil, nil, fixedCost, false
		case left == 0:
			// Left out: nothing to record.
		case left == 1 && mustRun:
			fc += sub.Cost[j*m+only]
			out.Capacity[only] -= sub.Size[j]
			out.MinUsage = max(0, out.MinUsage-sub.Size[j])
			s.assign[idx[j]] = only
			*undo = append(*undo, idx[j])
		default:
			out.Size = append(out.Size, sub.Size[j])
			out.Cost = append(out.Cost, row...)
			outIdx = append(outIdx, idx[j])
		}
	}
	if slices.ContainsFunc(out.Capacity, func(y int) bool { return y < 0 }) {
		s.ar.putFloats(out.Cost)
		s.ar.putInts(out.Size, outIdx)
		return nil, nil, fixedCost, false
	}
	return out, outIdx, fc, true
}

// lagrangeNodeSteps is how many subgradient steps a node takes from the
// multipliers the search holds before it gives up on cutting.
const lagrangeNodeSteps = 20

// lagrangeNode returns the Lagrangian bound of node sub (fixedCost
// excluded) at the search's multipliers, improved by up to
// lagrangeNodeSteps Polyak steps towards the incumbent on the node's own
// items: any multipliers give a valid bound for every node, so the
// improved ones are kept for the nodes after it, which a depth-first
// search makes much like it.
func (s *search) lagrangeNode(sub *Problem, idx []int, fixedCost float64) float64 {
	n := sub.N()
	target := s.bestVal - fixedCost
	s.work += knapsackWork(sub)
	take := s.ar.zeroInts(n)
	defer s.ar.putInts(take)
	L, used := knapsackBound(sub, idx, s.lagU, s.lagMu, take, nil, &s.lagScratch)
	for it := 0; it < lagrangeNodeSteps && L < target-s.tol; it++ {
		norm := 0.0
		for j := 0; j < n; j++ {
			g := float64(take[j] - 1)
			if s.lagU[idx[j]] == 0 && g < 0 {
				g = 0
			}
			norm += g * g
		}
		gmu := float64(sub.MinUsage - used)
		if s.lagMu == 0 && gmu < 0 {
			gmu = 0
		}
		norm += gmu * gmu
		if norm == 0 {
			break
		}
		step := (target - L) / norm
		old := s.ar.float64s(n)
		for j := 0; j < n; j++ {
			old[j] = s.lagU[idx[j]]
			s.lagU[idx[j]] = max(0, old[j]+step*float64(take[j]-1))
		}
		oldMu := s.lagMu
		s.lagMu = max(0, oldMu+step*gmu)
		s.work += knapsackWork(sub)
		L2, used2 := knapsackBound(sub, idx, s.lagU, s.lagMu, take, nil, &s.lagScratch)
		if L2 <= L { // no better here: back to where it was
			for j := 0; j < n; j++ {
				s.lagU[idx[j]] = old[j]
			}
			s.lagMu = oldMu
			s.ar.putFloats(old)
			break
		}
		s.ar.putFloats(old)
		L, used = L2, used2
	}
	return L
}
