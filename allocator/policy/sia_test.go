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
	ctx, short := context.Background(), 0
	for _, n := range []int{60, 120, 240} {
		s := largeSnapshot(n, 8)
		_, exact := (&Sia{}).schedule(ctx, s)
		if exact == nil || exact.Status != solver.Optimal {
			t.Fatalf("%d jobs: exact Sia round %+v, want a proven one", n, exact)
		}
		s.Instance = &allocator.Instance{Config: allocator.Config{GapTolerance: tolerance}}
		_, loose := (&Sia{}).schedule(ctx, s)
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
}
