package loop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/report"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// maxEstimatedDone caps estimated progress as a fraction of the work: an
// estimate never finishes a job (only Nomad's allocation status does), so a
// job that runs slower than declared is not parked as "no work left".
const maxEstimatedDone = 0.99

// maxOwnWeight bounds fft.weight where nothing else does (tenant weights
// without tenant shares): a job may claim less than its equal share, never
// more.
const maxOwnWeight = 1.0

// inputs are what a round's build takes besides the snapshot and the
// ledger: the jobs' reports, the operators' overrides and the loop's
// options.
type inputs struct {
	progress  map[string]float64
	overrides map[string]Override
	cfg       allocator.Config
	weighted  bool
	shares    *TenantShares
	rates     *rates
	// reports are the task drivers' measurements, by job ID (nil: none).
	reports map[string]report.Report
}

// problem is a round's input as the engine takes it, plus the bookkeeping
// the record phase needs.
type problem struct {
	instance allocator.Instance
	// records is the next ledger's job map, before this round's progress.
	records map[string]JobRecord
	// noFit maps job ID to why it cannot run in the cluster as it is.
	noFit map[string]string
	// weighted is true when the ledger's shares follow fft.weight.
	weighted bool
	// snapshot is the round as the policy sees it (policySnapshot).
	snapshot *policy.Snapshot
	// overrides are the operators' decisions in force, by job ID; parked
	// holds the jobs they keep off the GPUs this round.
	overrides map[string]Override
	parked    []string
	// unhealthy are the jobs kept out of the round because an allocation
	// of theirs holds an unhealthy GPU; the round parks them.
	unhealthy []string
	// prices are how each job's restarts were priced (measured.go).
	prices map[string]RestartPrice
	// tenants are the tenants' shares this round (with TenantShares), and
	// tenantOf each active job's tenant.
	tenants  []TenantAudit
	tenantOf map[string]string
	// rates are the round's throughputs (profile.go; nil: the declared
	// ones only), learning the jobs without data run or waiting outside
	// the policy to be measured, with their gang sizes.
	rates    *rates
	learning map[string]int
}

// buildProblem turns a snapshot and the ledger into the round engine's
// instance for round t. It is pure. Jobs the ledger has never seen arrive in
// round t. A job that no model with capacity can run (its throughput names
// no model present, or every such model has fewer GPUs than it needs) is
// kept out of the instance and of the fairness ledger, and marked no-fit.
//
// progress holds the work done that jobs reported (nil: none); a report
// replaces the ledger's estimate. With weighted, each job's fairness
// reference is its fft.weight share of the cluster (fairness.Job.Weight);
// without, every job has weight 1, the paper's 1/|A(t)|.
//
// overrides are the operators' decisions (nil: none): a parked job is kept
// out of the instance and of the fairness set, its rho frozen until it is
// resumed; a pinned job may run on its pinned model only.
//
// in.rates, when not nil, gives each job's throughputs (profile.go) in
// place of its declared ones; the GPUs it pins for jobs being measured are
// taken from the models the policy sees.
//
// With shares, each tenant's jobs split the tenant's share of the fairness
// reference (tenantWeights).
func buildProblem(t int, snap *Snapshot, prev map[string]JobRecord, in inputs) *problem {
	progress, overrides, cfg, weighted := in.progress, in.overrides, in.cfg, in.weighted
	rt := in.rates
	pr := &problem{records: make(map[string]JobRecord, len(snap.Jobs)), noFit: map[string]string{}, weighted: weighted, overrides: overrides,
		rates: rt, learning: map[string]int{}, prices: map[string]RestartPrice{}}
	tenants := map[string]string{}
	largest := placement.LargestHost(snap.Hosts)
	capacity := make(map[string]int, len(snap.Models))
	for _, m := range snap.Models {
		capacity[m.Name] = m.GPUs - rt.pinnedOn(m.Name)
	}
	// The ledger entries that were active last round, for Reconcile.
	fs := fairness.State{Round: t, Jobs: make(map[string]fairness.JobState, len(snap.Jobs))}
	active := make([]fairness.Job, 0, len(snap.Jobs))
	jobs := make([]allocator.Job, 0, len(snap.Jobs))
	models := append([]allocator.Model(nil), snap.Models...)
	known := make(map[string]bool, len(models))
	for k := range models {
		known[models[k].Name] = true
		models[k].GPUs = capacity[models[k].Name]
	}
	for k := range snap.Jobs {
		j := &snap.Jobs[k]
		rec, seen := prev[j.ID]
		if seen && !sameJob(rec, j) {
			// Purged and registered again: a new job that happens to share the ID.
			seen = false
		}
		if !seen {
			rec = JobRecord{JobState: fairness.JobState{Arrival: t, Work: j.Spec.Work}, Status: StatusWaiting}
		}
		if j.CreateIndex != 0 {
			rec.CreateIndex = j.CreateIndex
		}
		done, reported := progress[j.ID]
		vouch(&rec, done, reported)
		rec.User = j.Spec.User
		o, hasOverride := overrides[j.ID]
		parkedNow := hasOverride && o.Action == OverridePark
		// A job resumed after an operator's park comes back with the rho
		// it had when parked, and one that fits again after rounds that
		// had no room for it (a drained node) with the rho it had then.
		if seen && rec.Tau > 0 && (rec.Status == StatusWaiting || rec.Status == StatusRunning || rec.Status == StatusNoFit || (rec.Status == StatusParked && !parkedNow)) {
			fs.Jobs[j.ID] = rec.JobState
		}
		if j.Finished {
			rec.Status = StatusFinished
			if j.Failed {
				rec.Status = StatusFailed
			} else if reported && done >= 0 && done <= j.Spec.Work {
				// Nomad saw it complete: its last report can win it nothing
				// now, and the record shows the work it says it did.
				rec.Done = done
			}
			pr.records[j.ID] = rec
			continue
		}
		if parkedNow {
			rec.Status = StatusParked
			pr.records[j.ID] = rec
			pr.parked = append(pr.parked, j.ID)
			continue
		}
		if j.UnhealthyGPU && len(j.Allocs) > 0 {
			// Out of the policy, so the round neither credits it nor keeps
			// it there; the park stops it at its checkpoint, and a later
			// round restarts it on a healthy GPU with the rho it has now.
			rec.Status = StatusWaiting
			pr.records[j.ID] = rec
			pr.unhealthy = append(pr.unhealthy, j.ID)
			continue
		}
		if held, why := rt.outside(j.ID); held {
			// No data yet: run outside the policy to be measured, or
			// held (profile.go).
			if why != "" {
				rec.Status = StatusNoFit
				pr.noFit[j.ID] = why
			} else {
				pr.learning[j.ID] = j.Spec.GPUs
			}
			pr.records[j.ID] = rec
			continue
		}
		tp := rt.throughputs(j)
		if seen && ratesFell(tp, rec.Rates) {
			fs.Stale = true
		}
		if !maps.Equal(rec.Rates, tp) {
			rec.Rates = maps.Clone(tp) // else keep sharing last round's map
		}
		inFlight := startInFlight(j, &rec) // before interrupted moves rec.RunID on
		interrupted(&rec, j)
		distrusted, now := overdue(&rec, cfg.RoundSeconds)
		if distrusted {
			distrust(tp, j.Spec.Work)
		}
		if now {
			// Its fair rate and rho came from its claims: it starts over
			// from its arrival, at the rates it is now priced with.
			delete(fs.Jobs, j.ID)
		}
		if hasOverride && o.Action == OverridePin {
			var why string
			if tp, why = pin(tp, o); why != "" {
				rec.Status = StatusNoFit
				pr.records[j.ID] = rec
				pr.noFit[j.ID] = why
				continue
			}
		}
		fits, named := false, false
		var tooBig []string
		for name, theta := range tp {
			y, ok := capacity[name]
			named = named || ok
			switch {
			case !ok:
				delete(tp, name)
			case len(snap.Hosts) > 0 && y >= j.Spec.GPUs && !placement.Fits(j.PiecesOf(), largest[name]):
				// Each allocation lies on one node: no host of the model
				// can take it, however many GPUs the model has.
				delete(tp, name)
				tooBig = append(tooBig, name)
			default:
				fits = fits || allocator.Fits(&allocator.Model{Name: name, GPUs: y}, j.Spec.GPUs, 0, theta)
			}
		}
		if !fits {
			rec.Status = StatusNoFit
			pr.records[j.ID] = rec
			pr.noFit[j.ID] = noFitReason(j, snap.Models, named)
			if len(tooBig) > 0 {
				pr.noFit[j.ID] = hostlessReason(j, tooBig, largest)
			}
			continue
		}
		if rec.Status != StatusRunning {
			rec.Status = StatusWaiting
		}
		pr.records[j.ID] = rec
		fj := fairness.Job{ID: j.ID, Arrival: rec.Arrival, Work: j.Spec.Work, GPUs: j.Spec.GPUs, Throughput: tp}
		if weighted {
			fj.Weight = j.Spec.Weight
			if in.shares == nil {
				// The job writes its own fft.weight: without tenant shares
				// to split, it may only yield (issue 20). Within a tenant's
				// share (weigh) it moves share among the tenant's own jobs.
				fj.Weight = math.Min(fj.Weight, maxOwnWeight)
			}
		}
		if in.shares != nil {
			tenants[j.ID] = in.shares.tenantOf(j)
		}
		active = append(active, fj)
		last := rec.LastModel
		if last != "" && !known[last] {
			// The model left the cluster; keep it at 0 GPUs so the
			// switching penalty still prices a move away from it.
			models = append(models, allocator.Model{Name: last})
			known[last] = true
		}
		done = math.Min(rec.Done, j.Spec.Work*maxEstimatedDone)
		if distrusted {
			done = 0 // its claim to be nearly done is void
		}
		jobs = append(jobs, allocator.Job{
			ID: j.ID, Arrival: rec.Arrival, GPUs: j.Spec.GPUs, Work: j.Spec.Work,
			Done:       done,
			Throughput: tp, StateGB: j.Spec.StateGB, LastModel: last,
			// Chosen last round and still holding an allocation, or about
			// to: a park now stops it (priced with Config.PricePreemption).
			Running: last != "" && rec.Status == StatusRunning && (len(j.Allocs) > 0 || inFlight),
		})
		pr.prices[j.ID] = measure(&jobs[len(jobs)-1], in.reports[j.ID], cfg)
	}
	if in.shares != nil {
		pr.tenants, pr.tenantOf = in.shares.weigh(active, tenants), tenants
	}
	for _, id := range fs.Reconcile(active, capacity) {
		rec := pr.records[id]
		rec.Status = StatusNoFit
		pr.records[id] = rec
		pr.noFit[id] = "fair rate is 0: no model with capacity runs it"
	}
	kept := jobs[:0]
	for _, j := range jobs {
		if _, bad := pr.noFit[j.ID]; !bad {
			kept = append(kept, j)
		}
	}
	for id, st := range fs.Jobs {
		rec := pr.records[id]
		rec.JobState = st
		pr.records[id] = rec
	}
	sort.Slice(models, func(a, b int) bool { return models[a].Name < models[b].Name })
	pr.instance = allocator.Instance{Round: t, Models: models, Jobs: kept, Fairness: fs, Config: cfg}
	return pr
}

// sameJob reports whether rec is a record of job j and not of an earlier job
// with the same ID; a record or job without a create index is taken as the
// same (records written before the index was kept).
func sameJob(rec JobRecord, j *Job) bool {
	return rec.CreateIndex == 0 || j.CreateIndex == 0 || rec.CreateIndex == j.CreateIndex
}

// staleReports are the jobs whose stored progress reports must not count:
// jobs no longer in Nomad (purged, stopped, or no longer managed) and jobs
// registered again since their record was written. A job listed as invalid
// is still there, and keeps its report.
func staleReports(snap *Snapshot, prev map[string]JobRecord, progress map[string]float64, reports map[string]report.Report) []string {
	present := make(map[string]*Job, len(snap.Jobs)+len(snap.Invalid))
	for k := range snap.Jobs {
		present[snap.Jobs[k].ID] = &snap.Jobs[k]
	}
	for _, inv := range snap.Invalid {
		present[inv.ID] = nil
	}
	stale := map[string]bool{}
	check := func(id string) {
		j, ok := present[id]
		if !ok {
			stale[id] = true
			return
		}
		if rec, seen := prev[id]; seen && j != nil && !sameJob(rec, j) {
			stale[id] = true
		}
		// A report the allocator tied to an allocation of an earlier job with this ID
		// (it can land after that job was purged and the record forgotten).
		if r, ok := reports[id]; ok && j != nil && r.JobCreateIndex != 0 && j.CreateIndex != 0 && r.JobCreateIndex != j.CreateIndex {
			stale[id] = true
		}
	}
	for id := range progress {
		check(id)
	}
	for id := range reports {
		check(id)
	}
	out := make([]string, 0, len(stale))
	for id := range stale {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// policySnapshot is the round as a policy sees it: the engine's instance
// (FFT decides on it) and, for the baselines, each job's rate per second,
// arrival and attained service, on the fairness clock (seconds are clock
// rounds times R, so a policy's notion of time is the ledger's, live or
// simulated). Jobs are sorted by arrival, then ID.
func (pr *problem) policySnapshot(clock, roundSeconds float64) *policy.Snapshot {
	in := &pr.instance
	s := &policy.Snapshot{Round: in.Round, Now: clock * roundSeconds, RoundSeconds: roundSeconds, Models: in.Models, Instance: in,
		Jobs: make([]policy.Job, len(in.Jobs))}
	for k := range in.Jobs {
		j := &in.Jobs[k]
		rec := pr.records[j.ID]
		rate := make(map[string]float64, len(j.Throughput))
		for m, th := range j.Throughput {
			rate[m] = th / roundSeconds
		}
		running := ""
		if j.Running {
			running = j.LastModel
		}
		s.Jobs[k] = policy.Job{
			ID: j.ID, ArrivalSeconds: float64(j.Arrival) * roundSeconds, ArrivalRound: j.Arrival, GPUs: j.GPUs,
			Work: j.Work, Done: j.Done, RatePerSecond: rate, MemoryGB: j.MemoryGB, StateGB: j.StateGB,
			Running: running, LastModel: j.LastModel, AttainedGPUSeconds: rec.AttainedGPUSeconds,
		}
	}
	sort.SliceStable(s.Jobs, func(a, b int) bool {
		if s.Jobs[a].ArrivalSeconds != s.Jobs[b].ArrivalSeconds {
			return s.Jobs[a].ArrivalSeconds < s.Jobs[b].ArrivalSeconds
		}
		return s.Jobs[a].ID < s.Jobs[b].ID
	})
	return s
}

// noFitReason says, naming the key, why no model in the cluster can run the
// job: its fft.throughput names none of the cluster's models, or each model
// it names has fewer healthy GPUs than its device count.
func noFitReason(j *Job, models []allocator.Model, named bool) string {
	var have []string
	for _, m := range models {
		have = append(have, fmt.Sprintf("%s (%d GPUs)", m.Name, m.GPUs))
	}
	cluster := "the cluster has " + strings.Join(have, ", ")
	if len(have) == 0 {
		cluster = "the cluster has no healthy GPUs on ready, eligible nodes"
	}
	if j.Spec.LearnThroughput {
		return fmt.Sprintf("%s = %d: more GPUs than any model of the cluster has free of jobs being measured; %s", jobmeta.KeyGPUs, j.Spec.GPUs, cluster)
	}
	if !named {
		return fmt.Sprintf("%s = %q names no GPU model of the cluster; %s", jobmeta.KeyThroughput, jobmeta.FormatThroughput(j.Spec.Throughput), cluster)
	}
	return fmt.Sprintf("%s = %d: more GPUs than any model named in %s has; %s", jobmeta.KeyGPUs, j.Spec.GPUs, jobmeta.KeyThroughput, cluster)
}

// hostlessReason says why a job fits no host: one of its allocations needs
// more GPUs than any node of each model it could use has, and how to split it.
func hostlessReason(j *Job, models []string, largest map[string]int) string {
	slices.Sort(models)
	var have []string
	for _, m := range models {
		have = append(have, fmt.Sprintf("%s (largest host: %d GPUs)", m, largest[m]))
	}
	return fmt.Sprintf("%s: an allocation of %d GPUs fits no host of %s; each allocation runs on one node, so split the job into a task group with count > 1 (e.g. count = 2 with half the GPUs each)",
		jobmeta.KeyGPUs, slices.Max(j.PiecesOf()), strings.Join(have, ", "))
}

// digest is a SHA-256 of the instance's JSON (maps are written sorted).
func digest(in *allocator.Instance) string {
	b, err := json.Marshal(in)
	if err != nil {
		return "unavailable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// startInFlight reports whether the last round started the job (its record) and Nomad has
// neither placed the start yet nor refused it: the job had no allocation when that round
// looked and has none now, its gate is lifted, it is steered to the model it was started on,
// and no evaluation failed to place it. (One that had an allocation and has none now was
// stopped or lost, not started.) Such a job is running as far as a round can tell: a round
// that comes before Nomad's scheduler has placed the last round's starts (an early round
// seconds later, or a busy scheduler) must not price it as a resume, or every start would be
// parked the next round and another started in its place.
func startInFlight(j *Job, rec *JobRecord) bool {
	return rec.Status == StatusRunning && rec.LastModel != "" && rec.RunID == 0 && len(j.Allocs) == 0 &&
		!j.Held() && j.Model == rec.LastModel && j.Refused == "" && !j.Finished && !j.Failed
}
