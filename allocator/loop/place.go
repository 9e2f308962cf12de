package loop

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
)

// CodeUnplaceable: the decision chose the job on a model, but no host of the
// model had room for it even after consolidation, so the round was decided
// again without that option.
const CodeUnplaceable allocator.ReasonCode = "Unplaceable"

// maxRedecide bounds how often one round is decided again without options
// the hosts could not take. Each time removes at least one option; a round
// whose decision still cannot be placed after it leaves the jobs that do
// not fit waiting (CodeUnplaceable, RoundRecord.Redecided says how often it
// tried), and the simulator's idle-placeable metric shows what that cost.
const maxRedecide = 8

// refusalRounds is how many rounds a host Nomad refused a job on stays
// avoided for that job: long enough to try the model's other hosts in turn,
// short enough that a refusal for a passing reason (another task's memory,
// a node briefly down) does not keep the job off the host for good.
const refusalRounds = 10

// placed is the placement stage's outcome for one round.
type placed struct {
	res *placement.Result
	// redecided counts the decisions made again; unplaced maps each job
	// that could not be placed in some attempt to the model it was chosen on.
	redecided int
	unplaced  map[string]string
}

// slots is where each placed job runs (nil without hosts: nothing placed).
func (p *placed) slots() map[string][]placement.Slot {
	if p == nil {
		return nil
	}
	return p.res.Slots
}

// place runs the placement stage on the policy's decision (dec, without the
// jobs being measured) and, while some job cannot be placed, decides the
// round again without that job's option. It returns the policy's final
// decision, the same with the measured jobs added (what the round applies),
// and the placement. Without hosts it places nothing.
func (l *Loop) place(ctx context.Context, pr *problem, snap *Snapshot, dec *allocator.Decision) (policyDec, full *allocator.Decision, out *placed, err error) {
	full = withPinned(dec, pr)
	if len(snap.Hosts) == 0 {
		return dec, full, nil, nil
	}
	jobs := make(map[string]*Job, len(snap.Jobs))
	for k := range snap.Jobs {
		jobs[snap.Jobs[k].ID] = &snap.Jobs[k]
	}
	pr.noteRefusals(snap.Jobs)
	out = &placed{unplaced: map[string]string{}}
	dropped := map[string]bool{}
	jobsBefore, snapBefore := pr.instance.Jobs, pr.snapshot.Jobs
	defer func() { pr.instance.Jobs, pr.snapshot.Jobs = jobsBefore, snapBefore }()
	for {
		out.res = placement.PlaceStyle(l.opts.style, snap.Hosts, placementJobs(jobs, full, pr))
		if len(out.res.Unplaced) == 0 {
			return dec, full, out, nil
		}
		chosen := full.Assignment()
		for _, id := range out.res.Unplaced {
			out.unplaced[id] = chosen[id]
		}
		if out.redecided == maxRedecide || !pr.forbid(out.res.Unplaced, chosen, dropped) {
			return dec, waitUnplaced(full, out, jobs), out, nil
		}
		out.redecided++
		if dec, err = decide(ctx, l.opts.pol, pr); err != nil {
			return nil, nil, nil, err
		}
		dec = withDropped(dec, pr, dropped)
		full = withPinned(dec, pr)
	}
}

// placementJobs are the decision's running jobs as the placement stage takes
// them: their pieces, where they hold GPUs on their chosen model now (or are
// pinned to, when Nomad has not placed them yet), and what a move costs.
func placementJobs(jobs map[string]*Job, dec *allocator.Decision, pr *problem) []placement.Job {
	inst := make(map[string]*allocator.Job, len(pr.instance.Jobs))
	for k := range pr.instance.Jobs {
		inst[pr.instance.Jobs[k].ID] = &pr.instance.Jobs[k]
	}
	cfg := pr.instance.Config
	out := make([]placement.Job, 0, len(dec.Jobs))
	for _, jd := range dec.Jobs {
		j := jobs[jd.ID]
		if jd.Model == "" || j == nil {
			continue
		}
		pj := placement.Job{ID: j.ID, Model: jd.Model, Pieces: j.PiecesOf()}
		pj.Current = currentSlots(j, jd.Model, len(pj.Pieces))
		if j.Refused != "" {
			// Nomad could not place it where it is pinned: elsewhere.
			pj.Current = nil
		}
		pj.Avoid = slices.Sorted(maps.Keys(pr.records[j.ID].Refused))
		if ij := inst[j.ID]; ij != nil {
			pj.MovePrice = cfg.MovePrice(ij)
		} else {
			pj.MovePrice = cfg.MovePrice(&allocator.Job{GPUs: j.Spec.GPUs, StateGB: j.Spec.StateGB})
		}
		out = append(out, pj)
	}
	return out
}

// PiecesOf is the job's pieces: its allocations' GPUs (one piece of all its
// GPUs when the observer did not say).
func (j *Job) PiecesOf() []int {
	if len(j.Pieces) > 0 {
		return j.Pieces
	}
	return []int{j.Spec.GPUs}
}

// noteRefusals ages each job's refused hosts by one round and adds the hosts
// Nomad refused to place a job on since the last round (its pins), with
// Nomad's reason. Once a job has been refused on every host of a model, the
// placement stage finds none for it there and the round is decided again
// without that option. The maps are copied: the records share them with the
// previous ledger.
func (pr *problem) noteRefusals(jobs []Job) {
	for id := range pr.records {
		if len(pr.records[id].Refused) == 0 {
			continue // most jobs: read the one field, not a copy of the record
		}
		r := pr.records[id]
		aged := make(map[string]int, len(r.Refused))
		for h, n := range r.Refused {
			if n > 1 {
				aged[h] = n - 1
			}
		}
		r.Refused = aged
		if len(aged) == 0 {
			r.Refused, r.RefusedReason = nil, ""
		}
		pr.records[id] = r
	}
	for _, j := range jobs {
		r, ok := pr.records[j.ID]
		if j.Refused == "" || !ok {
			continue
		}
		r.Refused = maps.Clone(r.Refused)
		if r.Refused == nil {
			r.Refused = map[string]int{}
		}
		for _, h := range j.Pinned {
			r.Refused[h] = refusalRounds
		}
		r.RefusedReason = j.Refused
		pr.records[j.ID] = r
	}
}

// currentSlots is where the job is on model now: its live allocations'
// slots, or, for a job started on one host that Nomad has not placed yet,
// that host. Nil when it is not on model.
func currentSlots(j *Job, model string, pieces int) []placement.Slot {
	if j.Held() || j.Model != model {
		return nil
	}
	if len(j.Allocs) > 0 {
		if j.RunningModel != model || len(j.Slots) != pieces {
			return nil
		}
		return j.Slots
	}
	if len(j.Pinned) != 1 {
		return nil
	}
	out := make([]placement.Slot, pieces)
	for k, p := range j.PiecesOf() {
		out[k] = placement.Slot{Host: j.Pinned[0], GPUs: p}
	}
	return out
}

// forbid removes each unplaced job's chosen model from its options, in the
// engine's instance and in the policy's snapshot, so the next decision does
// not choose it again this round; a job left with no option leaves both for
// the round, and dropped gets it. The job lists are copied, never changed in
// place: place restores the round's own when it is done. It reports whether
// any option went (a job being measured runs outside the policy and has
// none to remove).
func (pr *problem) forbid(unplaced []string, chosen map[string]string, dropped map[string]bool) bool {
	gone := map[string]string{}
	for _, id := range unplaced {
		gone[id] = chosen[id]
	}
	any := false
	jobs := make([]allocator.Job, 0, len(pr.instance.Jobs))
	for _, j := range pr.instance.Jobs {
		if m, ok := gone[j.ID]; ok && j.Throughput[m] > 0 {
			// A copy: the map is shared with the ledger's records.
			j.Throughput = maps.Clone(j.Throughput)
			delete(j.Throughput, m)
			any = true
			if !pr.fitsAny(&j) {
				dropped[j.ID] = true
				continue
			}
		}
		jobs = append(jobs, j)
	}
	pr.instance.Jobs = jobs
	snap := make([]policy.Job, 0, len(pr.snapshot.Jobs))
	for _, j := range pr.snapshot.Jobs {
		if dropped[j.ID] {
			continue
		}
		if m, ok := gone[j.ID]; ok {
			j.RatePerSecond = maps.Clone(j.RatePerSecond)
			delete(j.RatePerSecond, m)
		}
		snap = append(snap, j)
	}
	pr.snapshot.Jobs = snap
	return any
}

// fitsAny reports whether the job may still run on a model of the round.
func (pr *problem) fitsAny(j *allocator.Job) bool {
	for k := range pr.instance.Models {
		m := &pr.instance.Models[k]
		if allocator.Fits(m, j.GPUs, j.MemoryGB, j.Throughput[m.Name]) {
			return true
		}
	}
	return false
}

// withDropped adds a waiting line for each job forbid took out of the round.
func withDropped(dec *allocator.Decision, pr *problem, dropped map[string]bool) *allocator.Decision {
	if len(dropped) == 0 {
		return dec
	}
	out := *dec
	out.Jobs = slices.Clone(dec.Jobs)
	for _, id := range slices.Sorted(maps.Keys(dropped)) {
		out.Jobs = append(out.Jobs, allocator.JobDecision{ID: id, Rho: pr.instance.Fairness.Rho(id)})
	}
	return &out
}

// waitUnplaced takes the jobs that still cannot be placed out of the
// decision: they wait this round, with the reason.
func waitUnplaced(dec *allocator.Decision, p *placed, jobs map[string]*Job) *allocator.Decision {
	out := *dec
	out.Jobs = slices.Clone(dec.Jobs)
	out.Usage = maps.Clone(dec.Usage)
	for _, id := range p.res.Unplaced {
		for k := range out.Jobs {
			jd := &out.Jobs[k]
			if jd.ID != id || jd.Model == "" {
				continue
			}
			if j := jobs[id]; j != nil && out.Usage != nil {
				out.Usage[jd.Model] -= j.Spec.GPUs
			}
			jd.Model, jd.Chosen = "", allocator.Terms{}
		}
	}
	return &out
}

// explainUnplaced gives each job that waits after losing an option to the
// hosts the reason, unless it runs on another model.
func explainUnplaced(dec *allocator.Decision, p *placed, hosts []placement.Host, records map[string]JobRecord) {
	if p == nil {
		return
	}
	for k := range dec.Jobs {
		jd := &dec.Jobs[k]
		m, ok := p.unplaced[jd.ID]
		if !ok || jd.Model != "" {
			continue
		}
		msg := fmt.Sprintf("chosen on %s, but no host of it had room (largest free: %d GPUs) even after moving the cheapest jobs; decided again without that option",
			m, largestFree(hosts, p.res, m))
		if r := records[jd.ID]; len(r.Refused) > 0 {
			msg = fmt.Sprintf("chosen on %s, but Nomad refused to place it on %d host(s) in the last %d rounds (last: %s) and no other host of the model had room; decided again without that option",
				m, len(r.Refused), refusalRounds, r.RefusedReason)
		}
		jd.Reason = allocator.Reason{Code: CodeUnplaceable, Message: msg}
	}
}

// largestFree is the most GPUs left free on one host of model after the placement.
func largestFree(hosts []placement.Host, res *placement.Result, model string) int {
	used := map[string]int{}
	for _, slots := range res.Slots {
		for _, s := range slots {
			used[s.Host] += s.GPUs
		}
	}
	best := 0
	for _, h := range hosts {
		if h.Model == model {
			best = max(best, h.GPUs-used[h.ID])
		}
	}
	return best
}

// record puts the observed hosts (with full recording) and the moves in the
// round's record.
func (p *placed) record(rec *RoundRecord, snap *Snapshot, full bool) {
	if p == nil {
		return
	}
	if full {
		rec.Hosts = snap.Hosts
	}
	rec.Moves, rec.Redecided = p.res.Moves, p.redecided
}

// recordLines puts each running job's hosts on its audit line, and Nomad's
// reason on the line of each job it refused to place.
func (p *placed) recordLines(rec *RoundRecord, snap *Snapshot) {
	if p == nil {
		return
	}
	refused := map[string]string{}
	for _, j := range snap.Jobs {
		if j.Refused != "" {
			refused[j.ID] = j.Refused
		}
	}
	for k := range rec.Jobs {
		l := &rec.Jobs[k]
		if l.Model != "" {
			l.Hosts = p.res.Slots[l.ID]
		}
		l.Refused = refused[l.ID]
	}
}

// spreadJobs are the plan's running jobs whose allocations lie on more than
// one host, by ID.
func spreadJobs(plan *Plan) map[string]*Job {
	out := map[string]*Job{}
	for _, set := range [][]Change{plan.Start, plan.Migrate, plan.Keep} {
		for _, c := range set {
			if placement.Hosts(c.Slots) > 1 {
				out[c.Job.ID] = c.Job
			}
		}
	}
	return out
}

// spreadFactor is what a job spread over hosts (j non-nil) runs at on model
// against its rate on one host: its fft.throughput_spread over its
// fft.throughput there, 1 when it declares none. The round credits the job
// (progress, and rho's step) at its rate times this; the decision itself
// prices the one-host rate (allocator/placement/README.md, "Spread jobs").
func spreadFactor(j *Job, model string) float64 {
	if j == nil || j.Spec == nil {
		return 1
	}
	s, d := j.Spec.SpreadThroughput[model], j.Spec.Throughput[model]
	if s > 0 && d > 0 {
		return s / d
	}
	return 1
}
