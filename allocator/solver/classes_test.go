package solver

import (
	"math"
	"testing"
)

// TestClassLPMatchesItemLP checks the class search's network (flow.go)
// against the item LP (lp.go) and the optimum. With no count bounded the
// class LP is the item LP with each (model, size) arc held to a whole
// number of items' GPUs, so it is never below the item LP, equals it where
// every capacity is a multiple of every size, and never exceeds the
// optimum. From no flow and from the item LP's optimum it reaches the same
// value, and its dual bound equals its flow's cost. Small and mid-sized
// instances of every kind the brute-force sweeps draw.
func TestClassLPMatchesItemLP(t *testing.T) {
	instances, r := sweep(t, 3000, 21, 22)
	for it := 0; it < instances; it++ {
		var p *Problem
		if it%2 == 0 {
			p = randomProblem(r)
		} else {
			p = mediumProblem(r)
		}
		pack, err := MaxUsage(t.Context(), p, Options{})
		if err != nil {
			t.Fatalf("instance %d: MaxUsage: %v\n%s", it, err, dump(p))
		}
		p.MinUsage = r.IntN(pack.Usage + 1)
		opt, err := Solve(t.Context(), p, Options{})
		if err != nil {
			t.Fatalf("instance %d: Solve: %v\n%s", it, err, dump(p))
		}
		lp := solveLP(p, nil, nil)
		if !lp.feasible {
			t.Fatalf("instance %d: item LP infeasible at MinUsage %d <= K %d\n%s", it, p.MinUsage, pack.Usage, dump(p))
		}
		tol := tolFor(p)
		var values []float64
		for _, start := range []*lpSolution{nil, lp} {
			s := newSearch(t.Context(), p, Options{}, math.Inf(-1), takeArena())
			cs := newClassSearch(s, p, start)
			if cs == nil {
				t.Fatalf("instance %d (start %v): class LP infeasible\n%s", it, start != nil, dump(p))
			}
			v, _ := cs.g.value()
			b, _ := cs.g.bound()
			if math.Abs(v-b) > tol || v < lp.value-tol || b > opt.Objective+tol || divides(p) && math.Abs(v-lp.value) > tol {
				t.Fatalf("instance %d (start %v): class LP value %v bound %v, item LP %v, optimum %v\n%s", it, start != nil, v, b, lp.value, opt.Objective, dump(p))
			}
			for v, e := range cs.g.excess {
				if e != 0 {
					t.Fatalf("instance %d (start %v): node %d keeps excess %d", it, start != nil, v, e)
				}
			}
			values = append(values, v)
		}
		if math.Abs(values[0]-values[1]) > tol {
			t.Fatalf("instance %d: class LP %v from no flow, %v from the item LP\n%s", it, values[0], values[1], dump(p))
		}
	}
}

// divides reports whether every size of p divides every capacity.
func divides(p *Problem) bool {
	for _, y := range p.Capacity {
		for _, d := range p.Size {
			if y%d != 0 {
				return false
			}
		}
	}
	return true
}
