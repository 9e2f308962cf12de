package solver

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/internal/keyheap"
)

// The functions below are the node evaluation as it was before solveFull
// built a node in one pass (issue 21, sia's large rounds): kept as the
// reference the new one must match bit for bit, on cold and warm starts.

func solveFullRef(p *Problem, warm *warmStart, ar *arena) *lpSolution {
	m, n := p.M(), p.N()
	s := &lpSolver{
		p: p, m: m, n: n, ar: ar,
		unit: ar.float64s(n * m),
		sol: &lpSolution{
			flow:     ar.zeroInts(n * m),
			assigned: ar.zeroInts(n),
			load:     make([]int, m),
			q:        make([]float64, m),
		},
		lpBufs: ar.lpBufs(m),
	}
	s.heaps = ar.heapSet(m * m)
	for i := range s.dirty {
		s.dirty[i] = true
	}
	for j, k := 0, 0; j < n; j++ {
		// One division per item, not per option: this loop runs at every
		// node. For gang sizes that are powers of two (nearly all) the
		// product is exactly the quotient.
		d := p.Size[j]
		inv := 1 / float64(d)
		for i := 0; i < m; i, k = i+1, k+1 {
			s.unit[k] = math.Inf(1)
			if c := p.Cost[k]; !math.IsInf(c, 1) && d <= p.Capacity[i] {
				s.unit[k] = c * inv
			}
		}
	}
	if warm != nil {
		s.startRef(warm.flow)
	}
	// Items a warm start placed whole never have GPUs left to place, so
	// they stay out of the source heaps. Each model's heap holds at most n.
	srcBuf := ar.entries(n * m)[:n*m]
	for i := range s.srcs {
		s.srcs[i] = srcBuf[i*n : i*n : (i+1)*n]
	}
	defer func() {
		ar.putFloats(s.unit)
		ar.putEntries(srcBuf)
		ar.putHeapSet(s.heaps)
	}()
	for j, k := 0, 0; j < n; j, k = j+1, k+m {
		if s.sol.assigned[j] >= p.Size[j] {
			continue
		}
		for i, u := range s.unit[k : k+m] {
			if !math.IsInf(u, 1) {
				s.srcs[i] = append(s.srcs[i], keyheap.Entry{Key: u, Item: int32(j)})
			}
		}
	}
	for i := range s.srcs {
		s.srcs[i].Init()
	}
	if warm != nil {
		s.repair(warm.pi)
	}
	s.run()
	s.duals()
	// Primal and dual can only agree to within the rounding of their
	// terms, however small the values themselves are.
	s.sol.noise = noiseTol * (s.sol.valueMag + s.sol.boundMag)
	agree := optTol*math.Abs(s.sol.value) + s.sol.noise
	s.sol.optimal = !s.sol.stalled && math.Abs(s.sol.value-s.sol.bound) <= agree
	// An infeasible end needs no second solve: whether usage can grow
	// does not depend on costs, and every path was searched.
	if warm != nil && s.sol.feasible && !s.sol.optimal {
		ar.release(s.sol)
		return nil
	}
	return s.sol
}

func (s *lpSolver) startRef(warm []int) {
	m, sol := s.m, s.sol
	for k, f := range warm {
		if f <= 0 || math.IsInf(s.unit[k], 1) {
			continue
		}
		j, i := k/m, k%m
		s.add(j, i, f)
		sol.assigned[j] += f
		sol.load[i] += f
		sol.total += f
	}
}

// fitWarmRef is fitWarm as first written: a copy of the carried flow, then the options that
// no longer fit cleared one by one. The trimming over capacity is the same code.
func fitWarmRef(p *Problem, carried []int, ar *arena) []int {
	m := p.M()
	warm := ar.zeroInts(len(carried))
	copy(warm, carried)
	load := make([]int, m)
	for k, f := range warm {
		if f > 0 && (math.IsInf(p.Cost[k], 1) || p.Size[k/m] > p.Capacity[k%m]) {
			warm[k] = 0
			continue
		}
		load[k%m] += f
	}
	trimToCapacity(p, warm, load)
	return warm
}

// TestNodeLPMatchesReference checks that solveFull, and the warm starts
// fitWarm builds for it, give exactly what the reference gives (flow,
// duals, bound, status and the number of augmentations), on random nodes:
// cold roots, and children of them warm-started from their parent's
// optimum as the search builds them (the branched item out, a capacity
// cut, the usage bound lowered), and from random flows that repair must
// first make min-cost.
func TestNodeLPMatchesReference(t *testing.T) {
	instances, r := sweep(t, 3000, 21, 4)
	ar := &arena{}
	warmChecked := 0
	for it := 0; it < instances; it++ {
		p := nodeProblem(r)
		got, want := solveFull(p, nil, ar), solveFullRef(p, nil, nil)
		sameLP(t, it, "cold", p, got, want)
		if !want.feasible || want.stalled {
			ar.release(got)
			continue
		}
		// A child: drop an item (the LP's fractional one when there is
		// one), maybe place it on a model.
		m := p.M()
		jb := r.IntN(p.N())
		for j := 0; j < p.N(); j++ {
			if a := want.assigned[j]; a != 0 && lpModel(want, j, m, p.Size[j]) < 0 {
				jb = j
				break
			}
		}
		idx := make([]int, p.N())
		for j := range idx {
			idx[j] = j
		}
		child := restrict(p, idx, jb, nil)
		if o := r.IntN(m+1) - 1; o >= 0 && p.fits(jb, o) {
			child.Capacity[o] -= p.Size[jb]
			child.MinUsage = max(0, child.MinUsage-p.Size[jb])
		}
		carried := make([]int, 0, child.N()*m)
		for j := 0; j < p.N(); j++ {
			if j != jb {
				carried = append(carried, want.row(j, m)...)
			}
		}
		if r.IntN(4) == 0 {
			// A random flow within supplies and exclusions, over
			// capacity at times: fitWarm cuts it, repair cancels its
			// cycles.
			for j := 0; j < child.N(); j++ {
				clear(carried[j*m : (j+1)*m])
				if i := r.IntN(m); r.IntN(2) == 0 && child.fits(j, i) {
					carried[j*m+i] = 1 + r.IntN(child.Size[j])
				}
			}
		}
		wf := fitWarm(child, carried, ar)
		if rf := fitWarmRef(child, carried, nil); !slices.Equal(wf, rf) {
			t.Fatalf("instance %d: fitWarm %v, reference %v\n%s", it, wf, rf, dump(child))
		}
		warm := &warmStart{flow: wf, pi: want.pi, owned: r.IntN(2) == 0}
		got2 := solveFull(child, warm, ar)
		want2 := solveFullRef(child, &warmStart{flow: fitWarmRef(child, carried, nil), pi: want.pi}, nil)
		if (got2 == nil) != (want2 == nil) {
			t.Fatalf("instance %d: warm LP nil %v, reference nil %v\n%s", it, got2 == nil, want2 == nil, dump(child))
		}
		if got2 != nil {
			warmChecked++
			sameLP(t, it, "warm", child, got2, want2)
			ar.release(got2)
		}
		if warm.flow != nil {
			ar.putInts(warm.flow)
		}
		ar.release(got)
	}
	if warmChecked < instances/4 {
		t.Errorf("only %d of %d warm starts were compared", warmChecked, instances)
	}
}

// nodeProblem draws a node's problem: up to 8 models and 120 items, loose
// or tight, with or without a usage bound.
func nodeProblem(r *rand.Rand) *Problem {
	m := 1 + r.IntN(8)
	n := 1 + r.IntN(120)
	p := &Problem{Capacity: make([]int, m), Size: make([]int, n), Cost: make([]float64, n*m)}
	capMax := 2 + r.IntN(60)
	for i := range p.Capacity {
		p.Capacity[i] = r.IntN(capMax)
	}
	drawItems(r, p, []int{1, 1, 2, 2, 4, 4, 8})
	if r.IntN(2) == 0 {
		if pack, err := MaxUsage(context.Background(), p, Options{}); err == nil {
			p.MinUsage = r.IntN(pack.Usage + 1)
		}
	}
	return p
}

// sameLP fails unless two LP solutions agree bit for bit.
func sameLP(t *testing.T, it int, what string, p *Problem, got, want *lpSolution) {
	t.Helper()
	m := p.M()
	same := got.feasible == want.feasible && got.optimal == want.optimal && got.stalled == want.stalled &&
		got.total == want.total && got.augs == want.augs && eqFloat(got.value, want.value) &&
		eqFloat(got.bound, want.bound) && eqFloat(got.nu, want.nu) && eqFloat(got.noise, want.noise) &&
		slices.EqualFunc(got.q, want.q, eqFloat) && slices.EqualFunc(got.pi, want.pi, eqFloat) &&
		slices.Equal(got.load, want.load) && slices.Equal(got.assigned[:p.N()], want.assigned[:p.N()])
	for j := 0; same && j < p.N(); j++ {
		same = slices.Equal(got.row(j, m), want.row(j, m))
	}
	if !same {
		t.Fatalf("instance %d (%s): LP differs from the reference: value %v/%v bound %v/%v augs %d/%d optimal %v/%v\n%s",
			it, what, got.value, want.value, got.bound, want.bound, got.augs, want.augs, got.optimal, want.optimal, dump(p))
	}
}

func eqFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
