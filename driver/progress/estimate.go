package progress

import (
	"math"
	"sort"
)

// DefaultWarmupPoints is how many first lines of a run the rate ignores (start-up, data
// loading, compilation).
const DefaultWarmupPoints = 2

// WindowPoints bounds the points the rate is measured over (the latest ones): it follows a
// change of speed and keeps the slope's cost (pairs) small.
const WindowPoints = 64

// Tracker follows one run of a task. It is plain data so that the driver can persist it in
// the task directory and resume it after a restart without counting a line twice.
type Tracker struct {
	// StartUnix is when the task started (seconds since 1970).
	StartUnix float64 `json:"start_unix"`
	// WarmupPoints first lines are left out of the rate.
	WarmupPoints int `json:"warmup_points"`
	// Lines is how many points were added.
	Lines int `json:"lines"`
	// First and Last are the run's first and latest points.
	First Point `json:"first"`
	Last  Point `json:"last"`
	// Window holds the latest points after warm-up, oldest first.
	Window []Point `json:"window,omitempty"`
}

// NewTracker starts tracking a run that started at startUnix.
func NewTracker(startUnix float64, warmupPoints int) *Tracker {
	return &Tracker{StartUnix: startUnix, WarmupPoints: warmupPoints}
}

// Add records a point. A point older than the last one is ignored (a clock step back or a
// repeated line); a point may report less done than before (the task went back to a
// checkpoint), which starts the rate's window afresh.
func (tr *Tracker) Add(p Point) {
	if tr.Lines > 0 && p.TimeUnix < tr.Last.TimeUnix {
		return
	}
	if tr.Lines == 0 {
		tr.First = p
	}
	if tr.Lines > 0 && p.Done < tr.Last.Done {
		tr.Window = tr.Window[:0]
	}
	tr.Lines++
	tr.Last = p
	if tr.Lines <= tr.WarmupPoints {
		return
	}
	tr.Window = append(tr.Window, p)
	if len(tr.Window) > WindowPoints {
		tr.Window = append(tr.Window[:0], tr.Window[len(tr.Window)-WindowPoints:]...)
	}
}

// Done is the work done at the latest point (0 before any).
func (tr *Tracker) Done() float64 { return tr.Last.Done }

// RestartSeconds is the time from the task's start to its first progress line, and false
// before that line.
func (tr *Tracker) RestartSeconds() (float64, bool) {
	if tr.Lines == 0 {
		return 0, false
	}
	return math.Max(0, tr.First.TimeUnix-tr.StartUnix), true
}

// Rate is the steady throughput in work units per second over the window (see SteadyRate),
// and false until there are two points after warm-up.
func (tr *Tracker) Rate() (float64, bool) { return SteadyRate(tr.Window) }

// SteadyRate is the Theil-Sen slope of done over time: the median of the slopes between
// every two points. It ignores up to ~29% of outliers (a short stall for an evaluation, a
// burst of lines written at once), where a mean or least squares rate would not. False with fewer than two points at distinct times.
func SteadyRate(points []Point) (float64, bool) {
	slopes := make([]float64, 0, len(points)*(len(points)-1)/2)
	for i := range points {
		for j := i + 1; j < len(points); j++ {
			if dt := points[j].TimeUnix - points[i].TimeUnix; dt > 0 {
				slopes = append(slopes, (points[j].Done-points[i].Done)/dt)
			}
		}
	}
	if len(slopes) == 0 {
		return 0, false
	}
	sort.Float64s(slopes)
	n := len(slopes)
	if n%2 == 1 {
		return slopes[n/2], true
	}
	return (slopes[n/2-1] + slopes[n/2]) / 2, true
}
