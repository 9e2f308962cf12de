package fairness

import (
	"fmt"
	"math"
	"sort"
)

// Job is what the ledger needs to know about one active job to compute its
// equal-share reference: arrival round, work, gang size, throughput per
// GPU model (work units per round with all its GPUs) and fairness weight.
type Job struct {
	ID         string
	Arrival    int
	Work       float64
	GPUs       int
	Throughput map[string]float64
	// Weight w_j scales the job's share of the reference: it gets
	// w_j / sum_k w_k of every model instead of 1/|A(t)|. 0 (unset), like
	// any value <= 0, means 1, so jobs without weights get the paper's
	// equal share.
	Weight float64
}

// weight is w_j, 1 unless Weight is positive.
func (j Job) weight() float64 {
	if j.Weight > 0 {
		return j.Weight
	}
	return 1
}

// TotalWeight is sum_{k in A(t)} w_k over the active jobs: |A(t)| when no
// job has a weight.
func TotalWeight(active []Job) float64 {
	total := 0.0
	for _, j := range active {
		total += j.weight()
	}
	return total
}

// JobState is the ledger's record of one job. It is what the allocator
// persists between rounds and what the audit log shows.
type JobState struct {
	Arrival int     `json:"arrival"`
	Work    float64 `json:"work"`
	// Tau is the round at which the job would finish with a dedicated
	// 1/|A(t)| share of every GPU model (our choice: allocator/README.md, "The round problem"), or its
	// weighted share w_j / sum_k w_k when jobs carry weights.
	Tau float64 `json:"tau"`
	// Rho is the fairness compensation of Eq. 5; it starts at 0.
	Rho float64 `json:"rho"`
	// Weight is the w_j that Tau was computed with; 0 means 1 (and keeps
	// unweighted ledgers' JSON as it was).
	Weight float64 `json:"weight,omitempty"`
}

// State is the serialisable fairness ledger: one record per active job.
type State struct {
	// Round is the round whose start the state describes.
	Round int                 `json:"round"`
	Jobs  map[string]JobState `json:"jobs"`
	// Stale makes the next Reconcile recompute every tau, as an arrival
	// does: a job's rates changed enough that its fair rate is wrong (a
	// declared rate that yielded to the measured one).
	Stale bool `json:"-"`
}

// Rho returns the compensation of job id, 0 for a job the ledger does not hold.
func (s State) Rho(id string) float64 { return s.Jobs[id].Rho }

// FairRate is job j's work per round with a dedicated share w_j/total of
// every model, where total is sum_{k in A(t)} w_k (TotalWeight, j's own
// weight included). With share s it may use model i a fraction
// g_i = min(1, s*Y_i/d_j) of the time, at most one model at a time, and
// fills the fastest models first. capacity maps model name to GPUs. A job
// that fits no model has rate 0.
//
// When no job has a weight, total is n = |A(t)| and the share is the
// paper's 1/n, computed with exactly the same arithmetic.
func FairRate(j Job, capacity map[string]int, total float64) float64 {
	// total/w_j is the number of equal sharers whose 1/n share equals
	// j's weighted share; for w_j = 1 it is total itself, bit for bit.
	return fairRate(j, capacity, total/j.weight())
}

// fairRate is the rate with a 1/n share of every model; n may be fractional.
func fairRate(j Job, capacity map[string]int, n float64) float64 {
	if n < 1 {
		n = 1
	}
	type opt struct{ theta, g float64 }
	var opts []opt
	for m, theta := range j.Throughput {
		y := capacity[m]
		if theta <= 0 || y < j.GPUs || j.GPUs <= 0 {
			continue
		}
		opts = append(opts, opt{theta, math.Min(1, float64(y)/(n*float64(j.GPUs)))})
	}
	// Fractional knapsack with unit budget: fastest first. Ties are
	// irrelevant to the value, so no stable order is needed.
	sort.Slice(opts, func(a, b int) bool { return opts[a].theta > opts[b].theta })
	left, rate := 1.0, 0.0
	for _, o := range opts {
		f := math.Min(left, o.g)
		rate += f * o.theta
		left -= f
		if left <= 0 {
			break
		}
	}
	return rate
}

// Tau returns the equal-share reference finish round a_j + W_j / r_j, with
// r_j = FairRate(j, capacity, total), or an error when the job fits no model
// (r_j = 0).
func Tau(j Job, capacity map[string]int, total float64) (float64, error) {
	r := FairRate(j, capacity, total)
	if r <= 0 {
		return 0, fmt.Errorf("job %q fits no GPU model with capacity: its fair rate is 0", j.ID)
	}
	tau := float64(j.Arrival) + j.Work/r
	if math.IsInf(tau, 0) {
		// A rate so small that the reference never finishes: the ledger
		// could neither use nor store it (JSON has no infinity).
		return 0, fmt.Errorf("job %q has a fair rate of %g work units per round: its reference finish is beyond any round", j.ID, r)
	}
	return tau, nil
}

// Reconcile brings the ledger in line with the active set: it adds jobs
// that arrived (rho = 0), drops jobs that left, and, when the set or a
// job's weight changed, recomputes tau for every job with the shares
// w_j / TotalWeight(active) (fft.md: tau is recomputed whenever a job
// arrives or finishes; with no weights the share is 1/|A(t)|). It returns
// the ids whose fair rate is 0; those jobs are not added.
func (s *State) Reconcile(active []Job, capacity map[string]int) (rejected []string) {
	if s.Jobs == nil {
		s.Jobs = make(map[string]JobState, len(active))
	}
	changed := s.Stale
	s.Stale = false
	seen := make(map[string]bool, len(active))
	for _, j := range active {
		seen[j.ID] = true
		if st, ok := s.Jobs[j.ID]; !ok || st.weight() != j.weight() {
			changed = true
		}
	}
	for id := range s.Jobs {
		if !seen[id] {
			delete(s.Jobs, id)
			changed = true
		}
	}
	total := TotalWeight(active)
	for _, j := range active {
		st, ok := s.Jobs[j.ID]
		if ok && !changed {
			continue
		}
		tau, err := Tau(j, capacity, total)
		if err != nil {
			rejected = append(rejected, j.ID)
			delete(s.Jobs, j.ID)
			continue
		}
		if !ok {
			st = JobState{Arrival: j.Arrival}
		}
		st.Work = j.Work
		st.Tau = tau
		st.Weight = 0
		if w := j.weight(); w != 1 {
			st.Weight = w
		}
		s.Jobs[j.ID] = st
	}
	sort.Strings(rejected)
	return rejected
}

// weight is the w_j that Tau was computed with.
func (st JobState) weight() float64 { return Job{Weight: st.Weight}.weight() }

// Mu is the weight mu_j(t) = (t - a_j) / (tau_j - a_j).
func (st JobState) Mu(t int) float64 {
	return float64(t-st.Arrival) / st.span()
}

// FairShare is f_j = W_j / (tau_j - a_j), the work per round the job would
// get from its equal-share reference.
func (st JobState) FairShare() float64 { return st.Work / st.span() }

// Behind is the work job st is behind its equal-share reference at the
// start of round t, given the work it has done: max(0, f_j (t - a_j) -
// done), in the job's work units. It needs no state beyond tau: the
// reference runs at the current f_j since arrival, so when tau is
// recomputed the reference is too (as mu_j is in Eq. 5). Our option, used
// by the round engine's unit-free objective; Eq. 5 does not use it.
func (st JobState) Behind(t int, done float64) float64 {
	return math.Max(0, st.FairShare()*float64(t-st.Arrival)-done)
}

// span is tau - a, floored so a job whose reference finishes within its
// arrival round does not divide by zero.
func (st JobState) span() float64 { return math.Max(st.Tau-float64(st.Arrival), minSpan) }

// minSpan is the smallest tau - a the ledger uses, in rounds. A reference
// shorter than a thousandth of a round only arises from degenerate input.
const minSpan = 1e-3

// MaxRho caps rho: the round engine multiplies rho by a throughput and a
// weight, and a finite product needs a bounded rho. Within the engine's
// input ranges (allocator/limits.go) rho grows by at most about 1e27 a
// round, so the cap is never reached by real input; it only keeps a
// degenerate ledger storable and usable.
const MaxRho = 1e100

// Advance applies Eq. 5 for round t: rho(t+1) = max(0, rho(t) + mu(t) *
// (f - achieved)), where achieved maps job id to the work the job got in
// round t (sum_i theta_j^i x_j^i; absent means 0). Jobs the ledger does not
// hold are ignored. The state's round becomes t+1. Rho never exceeds
// MaxRho.
func (s *State) Advance(t int, achieved map[string]float64) {
	for id, st := range s.Jobs {
		st.Rho = math.Min(MaxRho, math.Max(0, st.Rho+st.Mu(t)*(st.FairShare()-achieved[id])))
		s.Jobs[id] = st
	}
	s.Round = t + 1
}
