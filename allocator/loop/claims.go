package loop

import (
	"fmt"
	"math"
)

// Claims a job makes about itself (issue 20; README.md, "Threat model").
// Earned credits a round that resumes or moves a job with the round less
// its restart (restartKept), as the simulator charges it.
// Its progress reports, its fft.throughput and the rates measured from its
// reports all come from the job. The round checks them against what it
// observes itself: the GPU time it gave the job, at the rate each round
// used (JobRecord.Earned), and whether the job finishes when its own
// numbers say it must.
//
//   - Progress is capped by Earned: a job is never further along than the
//     rates the rounds used allow over the GPU time it held.
//   - A job that runs a round claiming to finish within it (its remaining
//     work at most its rate on the chosen model) counts an overrun; one
//     that held GPUs for overdueRounds such rounds and is still not done
//     is distrusted for the rest of its life: its progress counts as none,
//     its rho starts over, and its rates are scaled so that its work takes
//     distrustRounds on its fastest model (their ratios between models
//     kept), so the policy runs it on GPUs no other job wants, and it still
//     finishes (the round is work conserving).

// overdueRounds is how many rounds a job may hold GPUs claiming to finish
// within each before it is distrusted: the round it claims plus one of
// grace, for a restart inside the last round or a rate measured high.
const overdueRounds = 2

// overdueSeconds is the least time those rounds must span: Nomad learns
// that a task ended from its client, which after a server restart or a
// missed heartbeat can take tens of seconds, so with short rounds (tests
// run 2 s ones) two rounds are no proof that a job did not finish.
const overdueSeconds = 60

// distrustRounds is how long a distrusted job's work takes at the rates it
// is priced with, in rounds (about a year of 300 s rounds): every objective
// ranks such a job below any job whose claims hold (a smaller rate is a
// longer job, a smaller fairness reference and a smaller credit). The
// rates are in the job's own work unit, so only a bound in its own work
// (not a factor of its claimed rate) undoes a claim of any size.
const distrustRounds = 1e5

// vouch caps a job's reported progress by the work the rounds credited it
// with, bringing a record from before Earned existed up to date first (it
// trusts the progress such a record holds, once).
func vouch(rec *JobRecord, reported float64, ok bool) {
	if !rec.Vouched {
		rec.Earned, rec.Vouched = rec.Done, true
	}
	if ok && reported >= 0 && !math.IsInf(reported, 0) && !math.IsNaN(reported) {
		rec.Done = math.Min(reported, rec.Earned)
	}
	rec.Done = math.Min(rec.Done, rec.Earned)
}

// interrupted takes back the overrun the last round counted when the job
// did not hold GPUs through it: the round ran it, and now Nomad shows no
// live allocation of it, or another run (a drained or lost node, a crashed
// task, or the start the round itself made). A job cannot finish in a round
// it spent restarting, so an honest job is not distrusted for it.
func interrupted(rec *JobRecord, j *Job) {
	if rec.Status == StatusRunning && (len(j.Allocs) == 0 || j.RunID != rec.RunID) {
		rec.Overrun = math.Max(0, rec.Overrun-1)
	}
	rec.RunID = j.RunID
}

// overdue marks a job distrusted once it overran for overdueRounds rounds
// of roundS seconds and overdueSeconds; it reports whether the job is, and
// whether it became so now.
func overdue(rec *JobRecord, roundS float64) (distrusted, now bool) {
	rounds := float64(overdueRounds)
	if roundS > 0 {
		rounds = math.Max(rounds, math.Ceil(overdueSeconds/roundS))
	}
	if rec.Distrusted == "" && rec.Overrun >= rounds-1e-9 {
		rec.Distrusted = fmt.Sprintf("held GPUs for %.3g rounds claiming to finish within each, and did not finish: its progress and rates no longer count", rec.Overrun)
		now = true
	}
	return rec.Distrusted != "", now
}

// staleRatio is how far below last round's a job's rate on some model must
// fall for the round to recompute the fair rates (fairness.State.Stale):
// the fair reference of a job that declared 1e6 for 1 is a lie until then.
const staleRatio = 1.5

// ratesFell reports whether any of tp is below last round's rate on that
// model by more than staleRatio.
func ratesFell(tp map[string]float64, prev map[string]float64) bool {
	for m, v := range tp {
		if p, ok := prev[m]; ok && v*staleRatio < p {
			return true
		}
	}
	return false
}

// distrust scales a distrusted job's rates so that work takes
// distrustRounds on the fastest.
func distrust(tp map[string]float64, work float64) {
	best := 0.0
	for _, v := range tp {
		best = math.Max(best, v)
	}
	if !(best > 0) {
		return
	}
	scale := math.Min(1, work/distrustRounds/best)
	for m := range tp {
		tp[m] *= scale
	}
}

// overrun counts a round job j ran on a model where its rate covers what it
// claims is left; a round that does not claim so clears the count. It
// returns the count added.
func overrun(r *JobRecord, work, done, theta float64) float64 {
	if theta > 0 && work-done <= theta {
		r.Overrun++
		return 1
	}
	r.Overrun = 0
	return 0
}

// restartKept is the part of a round a job that restarts in it works: the
// restart is the price the round used (measure), at most the round.
func restartKept(restartS, roundS float64) float64 {
	if !(roundS > 0) {
		return 1
	}
	return math.Max(0, 1-restartS/roundS)
}
