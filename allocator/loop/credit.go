package loop

import (
	"math"
	"time"
)

// How early rounds count for fairness and progress.
//
// Eq. 5 and the progress estimate assume rounds of length R. A round
// credits its decision for a whole round when it is recorded: the Eq. 5
// step rho += mu(t) * (f - achieved) and, for a selected job, its
// throughput on the chosen model added to the estimated progress. When the
// next round is early, the decision ran for less than R, so that round
// first cuts the credit to kept = elapsed / R:
//
//	rho  = max(0, rho_from + kept * rho_step)
//	done = done - (1 - kept) * credited
//
// and the fairness clock advances by kept instead of 1. Regular rounds and
// manual ones (fft-allocator -once) keep the credit whole, as before, also
// when they come late (after a failed round or an outage, time the
// allocator did not run is not counted). Arrivals, mu and the wait term read
// the clock's whole part, so a burst of early rounds neither ages jobs nor
// inflates rho and progress faster than time passes.
//
// A start Nomad has not placed when the next round looks (startInFlight) ran
// for none of the round that chose it, whatever its length: that round takes
// back all of its progress and service, and its Eq. 5 step is the one of a
// job that waited, rho = max(0, rho_from + kept * (rho_step + rho_ran)).
// Without it, a job whose start Nomad is slow to place would gain progress,
// and lose its claim on the GPUs, for rounds it did not run.

// clockEpsilon absorbs float error when the clock is a sum of fractions (0.1
// + 0.9 must read as round 1).
const clockEpsilon = 1e-9

// creditKept is the share of the previous round's credit a round keeps:
// the time since the previous round started over R, within [0, 1], for an
// early round; 1 for any other round, or when the previous start is unknown.
func creditKept(early bool, prevStart, start time.Time, roundSeconds float64) float64 {
	if !early || prevStart.IsZero() || !(roundSeconds > 0) {
		return 1
	}
	return math.Max(0, math.Min(1, start.Sub(prevStart).Seconds()/roundSeconds))
}

// fairRound is the fairness round a clock reading falls in.
func fairRound(clock float64) int { return int(math.Floor(clock + clockEpsilon)) }

// settle returns the job records with each one's last credit settled: cut to
// kept of a round (kept = 1 leaves it whole), or, for the unplaced starts,
// taken back as if the job had waited; then cleared, so that it is never cut
// twice. It is pure.
func settle(jobs map[string]JobRecord, kept float64, unplaced map[string]bool) map[string]JobRecord {
	out := make(map[string]JobRecord, len(jobs))
	for id, r := range jobs {
		c := r.Credit
		switch {
		case c != nil && unplaced[id]:
			r.Rho = math.Max(0, c.RhoFrom+kept*(c.RhoStep+c.RhoRan))
			takeBack(&r, c, 1)
		case c != nil && kept < 1:
			r.Rho = math.Max(0, c.RhoFrom+kept*c.RhoStep)
			takeBack(&r, c, 1-kept)
		}
		r.Credit = nil
		out[id] = r
	}
	return out
}

// takeBack removes share of the progress and service credit c gave r.
func takeBack(r *JobRecord, c *Credit, share float64) {
	r.Done = math.Max(0, r.Done-share*c.Done)
	r.Earned = math.Max(0, r.Earned-share*c.Done)
	r.Overrun = math.Max(0, r.Overrun-share*c.Overrun)
	r.AttainedGPUSeconds = math.Max(0, r.AttainedGPUSeconds-share*c.GPUSeconds)
}

// unplacedStarts are the jobs whose start the last round (prev, its records)
// asked for and Nomad has not placed (startInFlight).
func unplacedStarts(jobs []Job, prev map[string]JobRecord) map[string]bool {
	out := map[string]bool{}
	for k := range jobs {
		if rec, ok := prev[jobs[k].ID]; ok && sameJob(rec, &jobs[k]) && startInFlight(&jobs[k], &rec) {
			out[jobs[k].ID] = true
		}
	}
	return out
}
