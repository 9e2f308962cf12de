package solver

import (
	"math"
	"slices"
)

// lagrangeRepair turns the knapsacks of one ascent step into an assignment
// of node sub (item j is original item idx[j]; fixedCost is what the
// node's fixings cost) and offers it: each item the knapsacks took runs on
// the cheapest model that took it, which keeps every model within its
// GPUs; then each model's GPUs left free are filled, model by model, with
// the items left out, by a knapsack that must use exactly the GPUs it
// chooses (so that K(t) is met when it can be), cheapest first; then
// exchanges of equal-sized items (exchange) polish a result that comes
// near the incumbent. picked is knapsackBound's. It reports whether it
// offered an assignment.
//
// On the late rounds of the large setting, where every one of 1,000 GPUs
// must be filled with gangs, the rounding heuristics leave the incumbent
// far from the optimum (60% on one of testdata's), and an ascent aimed at
// it moves its multipliers in steps too large to approach the bound: this
// repair, as the multipliers improve, brings the incumbent within about
// 1e-4 (relative) of the optimum in a few dozen steps.
func (s *search) lagrangeRepair(sub *Problem, idx []int, fixedCost float64, picked []int) bool {
	m, n := sub.M(), sub.N()
	s.repChoice = grown(s.repChoice, n)
	choice := s.repChoice
	copy(choice, picked)
	load := s.ar.zeroInts(m)
	defer s.ar.putInts(load)
	total := 0
	for j, i := range choice {
		if i >= 0 {
			load[i] += sub.Size[j]
			total += sub.Size[j]
		}
	}
	need := sub.MinUsage - total
	for i := range m {
		if r := sub.Capacity[i] - load[i]; r > 0 {
			need -= s.fill(sub, choice, i, r, max(0, need))
		}
	}
	if need > 0 || !sub.feasible(choice) {
		return false
	}
	v := sub.objective(choice)
	// Exchanges cost a pass over pairs of items: worth it only near the
	// incumbent.
	if math.IsInf(s.bestVal, 1) || fixedCost+v <= s.bestVal+repairPolish*max(1, math.Abs(s.bestVal)) {
		s.exchange(sub, choice)
	}
	s.offerSub(sub, idx, fixedCost, func(j int) int { return choice[j] })
	return true
}

// repairPolish is how far above the incumbent (relative) a repaired
// assignment is still polished by exchanges.
const repairPolish = 1e-3

// fill puts items of sub that choice leaves out (-1) on model i, whose r
// GPUs are free, and returns the GPUs it used: the cheapest set whose
// sizes sum to exactly w GPUs, for the w between min(need, r) and r with
// the least cost, or the most GPUs below need when none reaches it.
func (s *search) fill(sub *Problem, choice []int, i, r, need int) int {
	m, n := sub.M(), sub.N()
	best := grown(s.repFill.best, r+1)
	s.repFill.best = best
	for w := 1; w <= r; w++ {
		best[w] = math.Inf(1)
	}
	pick := grown(s.repFill.pick, n*(r+1))
	s.repFill.pick = pick
	steps := 0
	for j := range n {
		c, d := sub.Cost[j*m+i], sub.Size[j]
		if choice[j] >= 0 || math.IsInf(c, 1) || d > r {
			continue
		}
		steps += r - d + 1
		knapsackItem(best, c, d, pick[j*(r+1):(j+1)*(r+1)])
	}
	s.work += steps / 20 // as knapsackWork counts a step
	lo := min(r, need)
	bw := -1
	for w := lo; w <= r; w++ {
		if !math.IsInf(best[w], 1) && (bw < 0 || best[w] < best[bw]) {
			bw = w
		}
	}
	for w := lo - 1; bw < 0 && w >= 0; w-- {
		if !math.IsInf(best[w], 1) {
			bw = w
		}
	}
	for j, w := n-1, bw; j >= 0 && w > 0; j-- {
		if pick[j*(r+1)+w] {
			choice[j] = i
			w -= sub.Size[j]
		}
	}
	return bw
}

// exchange improves choice by swapping the models (or a model and "left
// out") of two items of the same size while a swap lowers the cost: the
// GPUs each model uses stay the same, so the assignment stays feasible.
// At most repairPasses passes.
func (s *search) exchange(sub *Problem, choice []int) {
	m, n := sub.M(), sub.N()
	cost := func(j, i int) float64 {
		if i < 0 {
			return 0
		}
		return sub.Cost[j*m+i]
	}
	order := s.ar.zeroInts(n)
	defer s.ar.putInts(order)
	for j := range order {
		order[j] = j
	}
	// Items of one size are next to each other.
	slices.SortFunc(order, func(a, b int) int { return sub.Size[a] - sub.Size[b] })
	for range repairPasses {
		improved, pairs := false, 0
		for x := 0; x < n; x++ {
			a := order[x]
			for y := x + 1; y < n && sub.Size[order[y]] == sub.Size[a]; y++ {
				b := order[y]
				ia, ib := choice[a], choice[b]
				if ia == ib {
					continue
				}
				pairs++
				// +Inf where a model cannot take the other item: never a gain.
				if d := cost(a, ib) + cost(b, ia) - cost(a, ia) - cost(b, ib); d < -s.tol {
					choice[a], choice[b] = ib, ia
					improved = true
				}
			}
		}
		s.work += pairs / 4
		if !improved {
			return
		}
	}
}

// repairPasses bounds exchange's passes over the pairs.
const repairPasses = 3
