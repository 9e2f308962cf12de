package progress

import (
	"math"
	"math/rand/v2"
	"testing"
)

// run is a synthetic training run: warm-up lines at a slow rate, then steady lines at rate
// with multiplicative jitter on each interval.
func run(seed uint64, start, restart float64, warmup, steady int, rate, jitter float64) []Point {
	rng := rand.New(rand.NewPCG(seed, 1))
	t, done := start+restart, 0.0
	var pts []Point
	for i := 0; i < warmup+steady; i++ {
		pts = append(pts, Point{TimeUnix: t, Done: done})
		dt := 1 + rng.Float64()
		r := rate * (1 + jitter*(2*rng.Float64()-1))
		if i < warmup {
			r = rate / 10
		}
		t, done = t+dt, done+r*dt
	}
	return pts
}

func TestRateProperties(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		rate := 0.1 + 100*rng.Float64()
		warmup := rng.IntN(5)
		tr := NewTracker(1000, warmup)
		for _, p := range run(seed, 1000, 7, warmup, 30+rng.IntN(100), rate, 0.1) {
			tr.Add(p)
		}
		got, ok := tr.Rate()
		if !ok || math.Abs(got-rate)/rate > 0.05 {
			t.Errorf("seed %d: rate %g (%v), want %g within 5%% (warm-up %d dropped)", seed, got, ok, rate, warmup)
		}
		if r, ok := tr.RestartSeconds(); !ok || r != 7 {
			t.Errorf("seed %d: restart %g, %v; want 7", seed, r, ok)
		}
		// Shifting time or scaling the work unit moves the rate as it should.
		pts := tr.Window
		shifted, scaled := make([]Point, len(pts)), make([]Point, len(pts))
		for i, p := range pts {
			shifted[i] = Point{TimeUnix: p.TimeUnix + 5e8, Done: p.Done}
			scaled[i] = Point{TimeUnix: p.TimeUnix, Done: 3 * p.Done}
		}
		if s, _ := SteadyRate(shifted); math.Abs(s-got) > 1e-6*got {
			t.Errorf("seed %d: rate %g after a time shift, want %g", seed, s, got)
		}
		if s, _ := SteadyRate(scaled); math.Abs(s-3*got) > 1e-9*got {
			t.Errorf("seed %d: rate %g with work x3, want %g", seed, s, 3*got)
		}
	}
}

func TestRateIgnoresOutliers(t *testing.T) {
	pts := run(3, 0, 0, 0, 40, 10, 0)
	// Four lines in ten report far too much (a line half-written, a unit mix-up): a least
	// squares slope would move, the median of slopes does not.
	for _, i := range []int{5, 17, 18, 30} {
		pts[i].Done *= 3
	}
	if got, _ := SteadyRate(pts); math.Abs(got-10) > 0.2 {
		t.Errorf("rate with outliers = %g, want 10 within 2%%", got)
	}
	// A short stall (an evaluation, a checkpoint) is not the training speed.
	stalled := run(3, 0, 0, 0, 40, 10, 0)
	for i := 35; i < len(stalled); i++ {
		stalled[i].TimeUnix += 10
	}
	if got, _ := SteadyRate(stalled); math.Abs(got-10) > 0.2 {
		t.Errorf("rate with a late stall = %g, want 10 within 2%%", got)
	}
}

func TestTracker(t *testing.T) {
	tr := NewTracker(100, 1)
	if _, ok := tr.Rate(); ok {
		t.Error("a rate before any line")
	}
	if _, ok := tr.RestartSeconds(); ok {
		t.Error("a restart time before any line")
	}
	for _, p := range []Point{{110, 500}, {111, 510}, {112, 520}, {111.5, 9999}, {113, 530}} {
		tr.Add(p)
	}
	if r, ok := tr.Rate(); !ok || r != 10 {
		t.Errorf("rate %g, %v; want 10 (the warm-up line and the one back in time ignored)", r, ok)
	}
	if tr.Done() != 530 || tr.Lines != 4 {
		t.Errorf("done %g after %d lines, want 530 after 4", tr.Done(), tr.Lines)
	}
	// Back to a checkpoint: done drops, the window restarts.
	tr.Add(Point{120, 400})
	if _, ok := tr.Rate(); ok || tr.Done() != 400 {
		t.Errorf("after going back to a checkpoint: done %g, window %v", tr.Done(), tr.Window)
	}
	for i := 0; i < 3*WindowPoints; i++ {
		tr.Add(Point{TimeUnix: 121 + float64(i), Done: 400 + 2*float64(i)})
	}
	if len(tr.Window) != WindowPoints {
		t.Errorf("window holds %d points, want %d", len(tr.Window), WindowPoints)
	}
	if r, _ := tr.Rate(); r != 2 {
		t.Errorf("rate %g after the change of speed, want 2", r)
	}
}
