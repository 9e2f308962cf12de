package solver

import "math"

// Small clusters are solved outright by dynamic programming over the
// vector of GPUs used per model: a state is (load_1, ..., load_M), and
// items are added one at a time. The number of states is prod_i (Y_i+1):
// 2,197 for three models of 12 GPUs. Branch and bound on the LP struggles
// exactly there, when the usage bound (7) forces a parity or packing that
// the relaxation ignores (a simulated round of 13 jobs on 36 GPUs needed
// over 100,000 nodes); the DP needs none and is exact.

// dpStateLimit bounds the DP's states. Its work, states x items x models,
// is bounded by the caller: dpRootWork to solve a round by DP outright (a
// millisecond or two), dpFallbackWork to settle a round that branch and
// bound could not prove within dpTryNodes nodes (tens of milliseconds, far
// less than a stalled search), and dpNodeWork inside branch and bound,
// where it must cost no more than the LP it replaces.
const (
	dpStateLimit   = 1 << 18
	dpRootWork     = 1 << 20
	dpFallbackWork = 1 << 25
	dpNodeWork     = 1 << 16
	dpTryNodes     = 2000
)

// dpSize returns the number of load states of p, or 0 when the DP would
// exceed its limits (work as above) for p.
func dpSize(p *Problem, work int) int {
	states := 1
	for _, y := range p.Capacity {
		states *= y + 1
		if states > dpStateLimit {
			return 0
		}
	}
	if states*max(1, p.N())*max(1, p.M()) > work {
		return 0
	}
	return states
}

// solveDP returns an optimal assignment of p and its objective, or ok =
// false when no assignment reaches p.MinUsage. The caller checks dpSize.
// Costs are summed in item order, as Problem.objective does, so the value
// is the objective of the returned assignment to the last bit.
func solveDP(p *Problem, states int) (choice []int, obj float64, ok bool) {
	m, n := p.M(), p.N()
	radix := make([]int, m)
	r := 1
	for i, y := range p.Capacity {
		radix[i] = r
		r *= y + 1
	}
	inf := math.Inf(1)
	cur := make([]float64, states)
	next := make([]float64, states)
	for s := range cur {
		cur[s] = inf
	}
	cur[0] = 0
	// pick[j*states+s] is the option item j took to reach state s: 0 for
	// none, i+1 for model i.
	pick := make([]uint8, n*states)
	load := make([]int, m)
	for j := 0; j < n; j++ {
		copy(next, cur)
		d := p.Size[j]
		row := p.Cost[j*m : (j+1)*m]
		for s, v := range cur {
			if math.IsInf(v, 1) {
				continue
			}
			decode(s, radix, p.Capacity, load)
			for i, c := range row {
				if math.IsInf(c, 1) || load[i]+d > p.Capacity[i] {
					continue
				}
				ns := s + d*radix[i]
				if nv := v + c; nv < next[ns] {
					next[ns] = nv
					pick[j*states+ns] = uint8(i + 1)
				}
			}
		}
		cur, next = next, cur
	}
	best, bestS := inf, -1
	for s, v := range cur {
		if v < best && usageOf(s, radix, p.Capacity) >= p.MinUsage {
			best, bestS = v, s
		}
	}
	if bestS < 0 {
		return nil, 0, false
	}
	choice = make([]int, n)
	for j, s := n-1, bestS; j >= 0; j-- {
		choice[j] = int(pick[j*states+s]) - 1
		if i := choice[j]; i >= 0 {
			s -= p.Size[j] * radix[i]
		}
	}
	return choice, p.objective(choice), true
}

func decode(s int, radix, capacity []int, load []int) {
	for i := range load {
		load[i] = s / radix[i] % (capacity[i] + 1)
	}
}

func usageOf(s int, radix, capacity []int) int {
	u := 0
	for i := range radix {
		u += s / radix[i] % (capacity[i] + 1)
	}
	return u
}
