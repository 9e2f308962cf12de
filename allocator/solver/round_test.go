package solver

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// roundAllOptions is round as it was before it set options that cannot fit
// aside: every option of every item the LP did not place whole is sorted
// and offered in order. round must choose exactly as it does.
func roundAllOptions(sub *Problem, lp *lpSolution) ([]int, bool) {
	m, n := sub.M(), sub.N()
	choice := make([]int, n)
	load := make([]int, m)
	usage := 0
	var cand []option
	for j := 0; j < n; j++ {
		choice[j] = -1
		if i := lpModel(lp, j, m, sub.Size[j]); i >= 0 {
			choice[j] = i
			load[i] += sub.Size[j]
			usage += sub.Size[j]
			continue
		}
		cand = modelOptions(cand, sub, lp, j)
	}
	slices.SortFunc(cand, lpPreference)
	for _, o := range cand {
		d := sub.Size[o.j]
		if choice[o.j] >= 0 || load[o.i]+d > sub.Capacity[o.i] {
			continue
		}
		if usage < sub.MinUsage || sub.Cost[o.j*m+o.i] < 0 {
			choice[o.j] = o.i
			load[o.i] += d
			usage += d
		}
	}
	return choice, usage >= sub.MinUsage
}

// TestRoundSkipsOnlyOptionsThatCannotFit checks that the rounding
// heuristic, which sorts only the options that fit beside the LP's whole
// items, offers the same assignment as sorting every option, on random
// small and medium instances with their LP optima.
func TestRoundSkipsOnlyOptionsThatCannotFit(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 3))
	ar := takeArena()
	defer putArena(ar)
	checked := 0
	for inst := 0; inst < 3000; inst++ {
		var p *Problem
		if inst%2 == 0 {
			p = randomProblem(r)
		} else {
			p = mediumProblem(r)
		}
		if r.IntN(2) == 0 {
			total := 0
			for _, y := range p.Capacity {
				total += y
			}
			p.MinUsage = r.IntN(total + 1)
		}
		lp := solveLP(p, nil, ar)
		if lp == nil || !lp.feasible || lp.stalled {
			if lp != nil {
				ar.release(lp)
			}
			continue
		}
		want, ok := roundAllOptions(p, lp)
		s := newSearch(context.Background(), p, Options{}, math.Inf(-1), ar)
		idx := make([]int, p.N())
		for j := range idx {
			idx[j] = j
		}
		s.round(p, idx, lp, 0)
		ar.release(lp)
		switch {
		case !ok && s.best != nil:
			t.Fatalf("instance %d: round offered %v, the full sort reaches no usage bound", inst, s.best)
		case ok && !slices.Equal(s.best, want):
			t.Fatalf("instance %d: round offered %v, the full sort %v", inst, s.best, want)
		}
		if ok {
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d instances offered an assignment", checked)
	}
}
