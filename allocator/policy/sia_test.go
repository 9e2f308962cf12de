package policy

import (
	"context"
	"math"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
)

// TestSiaGapTolerance checks that the engine config's gap tolerance
// reaches Sia's solver: with it, rounds stop short of a proof, within the
// tolerance of the exact answer; without an engine instance, Sia proves.
func TestSiaGapTolerance(t *testing.T) {
	const tolerance = 0.5
	ctx, short, loosePolicy := context.Background(), 0, &Sia{}
	for _, n := range []int{60, 120, 240} {
		s := largeSnapshot(n, 8)
		_, exact := (&Sia{}).schedule(ctx, s)
		if exact == nil || exact.Status != solver.Optimal {
			t.Fatalf("%d jobs: exact Sia round %+v, want a proven one", n, exact)
		}
		s.Instance = &allocator.Instance{Config: allocator.Config{GapTolerance: tolerance}}
		_, loose := loosePolicy.schedule(ctx, s)
		if loose == nil {
			t.Fatalf("%d jobs: Sia fell back to greedy under a tolerance", n)
		}
		slack := tolerance * math.Max(1, math.Abs(loose.Objective))
		if loose.Gap > tolerance || loose.Objective > exact.Objective+slack || loose.Objective < exact.Objective-1e-9*math.Max(1, math.Abs(exact.Objective)) {
			t.Fatalf("%d jobs: tolerance %g gave objective %v gap %v; the optimum is %v", n, tolerance, loose.Objective, loose.Gap, exact.Objective)
		}
		if loose.Status != solver.Optimal {
			short++
		}
	}
	if short == 0 {
		t.Error("no Sia round stopped within the tolerance: the engine's GapTolerance does not reach Sia's solver")
	}
	if got := loosePolicy.PolicyStats()["rounds_within_tolerance"]; got != float64(short) {
		t.Errorf("PolicyStats rounds_within_tolerance = %v, want %d", got, short)
	}
}

// TestSearchCounts checks which rounds PolicyStats counts: every round
// not proven optimal, and apart those proven within a tolerance above 0.
func TestSearchCounts(t *testing.T) {
	var c searchCounts
	for _, r := range []struct {
		status         solver.Status
		gap, tolerance float64
	}{
		{solver.Optimal, 0, 1e-3},
		{solver.Feasible, 5e-4, 1e-3}, // within the tolerance
		{solver.Feasible, 2e-3, 1e-3}, // stopped at a limit
		{solver.Feasible, 4e-4, 0},    // stopped at a limit, no tolerance
	} {
		c.add(r.status, r.gap, r.tolerance)
	}
	got := c.stats(map[string]float64{"other": 1})
	want := map[string]float64{"other": 1, "rounds_not_optimal": 3, "rounds_within_tolerance": 1, "max_gap": 2e-3}
	if len(got) != len(want) {
		t.Fatalf("stats = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stats[%q] = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := (&searchCounts{}).stats(map[string]float64{})["rounds_within_tolerance"]; ok {
		t.Error("rounds_within_tolerance reported without any such round")
	}
}
