package solver

import "math"

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
// L at those multipliers, restricted to the node's items and capacities.
// Reduced-cost fixing still uses the LP's bound and duals only (fixing
// by L would need the knapsacks' own reduced costs): the cut alone took
// that round from 48,167 to 27,645 nodes, and a few others by 2-30x, but
// most hard rounds by less than 10%.

// lagrangeMaxWork bounds the knapsacks' size, items times GPUs, for which
// the bound is used: it costs about that many steps a node.
const lagrangeMaxWork = 1 << 17

// lagrangeIterations bounds the subgradient ascent at the root.
const lagrangeIterations = 150

// lagrangeSize reports whether p is small enough for the bound.
func lagrangeSize(p *Problem) bool {
	total := 0
	for _, y := range p.Capacity {
		total += max(0, y)
	}
	return p.N()*total <= lagrangeMaxWork
}

// knapsackBound returns L(u, mu) for sub, whose item j is original item
// idx[j] (u is indexed by original items). If take is not nil it also
// sets take[j] to the number of knapsacks that chose item j (the
// subgradient is take[j] - 1) and returns the GPUs they use. best is
// scratch of at least max(Y)+1.
func knapsackBound(sub *Problem, idx []int, u []float64, mu float64, take []int, best []float64) (float64, int) {
	m, n := sub.M(), sub.N()
	L := mu * float64(sub.MinUsage)
	used := 0
	for j := 0; j < n; j++ {
		L -= u[idx[j]]
	}
	for j := range take {
		take[j] = 0
	}
	var pick []bool
	for i := 0; i < m; i++ {
		y := sub.Capacity[i]
		if y <= 0 {
			continue
		}
		b := best[:y+1]
		clear(b)
		if take != nil {
			pick = growBools(pick, n*(y+1))
		}
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
			for w := y; w >= d; w-- {
				if nv := b[w-d] + v; nv < b[w] {
					b[w] = nv
					if take != nil {
						pick[j*(y+1)+w] = true
					}
				}
			}
		}
		L += b[y]
		if take != nil {
			w := y
			for j := n - 1; j >= 0 && w > 0; j-- {
				if pick[j*(y+1)+w] {
					take[j]++
					used += sub.Size[j]
					w -= sub.Size[j]
				}
			}
		}
	}
	return L, used
}

func growBools(b []bool, n int) []bool {
	if cap(b) < n {
		return make([]bool, n)
	}
	b = b[:n]
	clear(b)
	return b
}

// lagrangeRoot runs the subgradient ascent on node p (the first that
// branches once an incumbent exists, usually the root; idx maps its items
// to the original ones, fixedCost is what its fixings cost), from the
// LP's duals, with Polyak steps towards the incumbent's value. It sets
// s.lagU and s.lagMu to the best multipliers and returns their bound for p,
// fixedCost excluded.
func (s *search) lagrangeRoot(p *Problem, idx []int, lp *lpSolution, fixedCost float64) float64 {
	target := s.bestVal - fixedCost
	m, n := p.M(), p.N()
	maxY := 0
	for _, y := range s.p.Capacity { // no node has more
		maxY = max(maxY, y)
	}
	s.lagBest = make([]float64, maxY+1)
	u := make([]float64, s.p.N())
	mu := math.Max(0, lp.nu)
	for j := 0; j < n; j++ {
		d := float64(p.Size[j])
		for i := 0; i < m; i++ {
			if c := p.Cost[j*m+i]; !math.IsInf(c, 1) && p.Size[j] <= p.Capacity[i] {
				u[idx[j]] = math.Max(u[idx[j]], d*lp.q[i]-c)
			}
		}
	}
	take := make([]int, n)
	bestU, bestMu := append([]float64(nil), u...), mu
	bestL, used := knapsackBound(p, idx, u, mu, take, s.lagBest)
	L := bestL
	theta, stale := 1.0, 0
	for it := 0; it < lagrangeIterations; it++ {
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
			u[idx[j]] = math.Max(0, u[idx[j]]+step*float64(take[j]-1))
		}
		mu = math.Max(0, mu+step*gmu)
		L, used = knapsackBound(p, idx, u, mu, take, s.lagBest)
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
