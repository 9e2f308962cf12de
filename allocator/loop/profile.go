package loop

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
)

// Online throughput profiling (issue 12): a job without fft.throughput
// (jobmeta.Spec.LearnThroughput) is measured where it runs and estimated
// elsewhere by the estimator of package profile, which the loop owns.
//
// Measuring. A round that runs a job whole on one model, already running
// there when the round starts (action keep, so no restart inside it), opens a
// sample: the model and the progress the job reported at that round's start
// (JobRecord.Sample). The next round, if the job still runs there and reports
// again, closes it: (done now - done then) * R / seconds elapsed is one
// measurement in work units per round with all its GPUs. It enters the
// estimator's EMA (Measure), whose state the ledger keeps per model
// (JobRecord.Measured), so a replica that takes the lead rebuilds the
// estimator from the ledger. Every job with progress reports is measured,
// declared ones too (for the mismatch warning and to teach the estimator).
//
// Using. Each round, a job's throughput on each model with GPUs is: its
// fft.throughput value if it declares one (a declared job keeps exactly its
// declared models; a lower measurement replaces the value, and lowers the
// job's other declared values in proportion: jobRates), else the pair's
// measurement, else the
// estimator's estimate; the instance gets Throughput.Expected() (the mean of
// the log-normal, with the log sd capped at maxDecisionLogSD so a model with
// no prior row is not priced at e^(3²/2) times its median). The value, its
// source and its error go into the ledger (JobRecord.Throughput) and the
// audit line (JobAudit.Throughput).
//
// A job with no data at all. It is run, outside the policy, on the model
// profile.LearnModel picks among those with its gang of GPUs free (the
// fastest expected for its family and gang size; GPUs held by running jobs
// are not free): its GPUs are taken from the model before the policy
// decides, so the policy plans the rest of the cluster. It stays there
// until it is measured, which takes two rounds (the round it starts in
// includes its start-up, so only the next one is a sample). When no model
// has its gang free, it takes them anyway on the best model whose GPUs are
// not already taken by other jobs being measured, and the policy, seeing
// fewer GPUs, parks whom it prefers (waiting for free GPUs instead starved
// such jobs for tens of hours in the simulator: running jobs kept every GPU
// and only the policy preempts). Only when jobs being measured hold every
// model's GPUs does it wait (CodeProfileWait). The cost: two rounds of the
// job's GPUs on a model the objective did not choose, possibly a job parked
// for them, and for the job only the gap to its true fastest model (1-12%
// of a round's progress, allocator/profile/README.md). A job that runs
// maxProfileRounds rounds so without one measurement reports no progress:
// it is held as no-fit, with a reason that names the fix.

// maxDecisionLogSD caps the log sd Expected() uses in the round.
const maxDecisionLogSD = 1.0

// maxProfileRounds is how many rounds a job without data is run to be
// measured before it is held for reporting no progress.
const maxProfileRounds = 8

// maxTeachers is how many jobs that left the cluster the estimator keeps,
// newest first: their measurements teach the model factors. They live in
// memory only; a replica that takes the lead starts from the ledger's jobs.
const maxTeachers = 256

// CodeProfileWait: a job without data waits for its gang of GPUs to be free
// on some model, to be measured there.
const CodeProfileWait allocator.ReasonCode = "ProfileWait"

// Sample is an open measurement: the model a job runs the round on, and the
// progress it had reported at the round's start.
type Sample struct {
	Round int     `json:"round"`
	Model string  `json:"model"`
	Done  float64 `json:"done"`
}

// profiler is the estimator and what the loop told it.
type profiler struct {
	priors *profile.Priors
	opts   []profile.Option
	est    *profile.Estimator
	// told are the jobs the estimator holds, with their gang and declared
	// rates; teachers are the ones that left, oldest first.
	told     map[string]*toldJob
	active   map[string]bool // the told jobs that are not teachers
	teachers []string
	// warned are the mismatches logged, so each is logged once.
	warned map[profile.Mismatch]bool
}

type toldJob struct {
	gpus     int
	family   string
	tenant   string
	declared map[string]float64 // the declared rates, as told
}

func newProfiler(priors *profile.Priors, opts ...profile.Option) (*profiler, error) {
	p := &profiler{priors: priors, opts: opts}
	if err := p.reset(); err != nil {
		return nil, err
	}
	return p, nil
}

// reset drops everything learned (the ledger is reloaded from the store).
func (p *profiler) reset() error {
	est, err := profile.New(p.priors, p.opts...)
	if err != nil {
		return fmt.Errorf("creating the throughput estimator: %w", err)
	}
	p.est, p.told, p.active, p.teachers, p.warned = est, map[string]*toldJob{}, map[string]bool{}, nil, map[profile.Mismatch]bool{}
	return nil
}

// rates are the round's throughputs as the profiler derived them.
type rates struct {
	jobs map[string]*jobRates
	// pinned is the GPUs per model taken by jobs run to be measured.
	pinned map[string]int
}

// jobRates is one job's throughputs this round.
type jobRates struct {
	// tp is what the instance uses, by model (Expected values).
	tp map[string]float64
	// view is each value with its source and error.
	view map[string]profile.Throughput
	// learn is set for a job without data: the model it is run on to be
	// measured (or waits for, with Reason profile.ReasonWait).
	learn *profile.Choice
	// noFit is why a job without data is held ("" if it is not).
	noFit      string
	mismatches []profile.Mismatch
}

// prepare feeds the round's observations to the estimator and derives each
// job's throughputs. It closes the samples the last round opened (jobs in
// recs, which it updates: Measured, Sample), keeps jobs that left as
// teachers, and picks the model of each job without data. elapsedS is the
// time since the last round started (0: unknown, then no sample closes).
func (p *profiler) prepare(t int, snap *Snapshot, recs map[string]JobRecord, progress map[string]float64,
	elapsedS, roundS float64, shares *TenantShares, log hclog.Logger) *rates {
	capacity := make(map[string]int, len(snap.Models))
	var names []string
	for _, m := range snap.Models {
		if m.GPUs > 0 {
			capacity[m.Name] = m.GPUs
			names = append(names, m.Name)
		}
	}
	if err := p.est.AddModels(names...); err != nil {
		log.Warn("GPU model not usable for throughput estimates", "error", err)
	}
	present := make(map[string]bool, len(snap.Jobs))
	free := make(map[string]int, len(capacity))
	for name, n := range capacity {
		free[name] = n
	}
	for k := range snap.Jobs {
		j := &snap.Jobs[k]
		if j.Finished {
			continue
		}
		present[j.ID] = true
		if j.RunningModel != "" && len(j.Allocs) > 0 {
			free[j.RunningModel] -= j.Spec.GPUs
		}
	}
	p.retire(present)
	models := sortedModels(capacity)
	r := &rates{jobs: make(map[string]*jobRates, len(snap.Jobs)), pinned: map[string]int{}}
	for k := range snap.Jobs {
		j := &snap.Jobs[k]
		if !present[j.ID] {
			continue
		}
		rec, ok := recs[j.ID]
		if !ok {
			rec = JobRecord{}
		}
		if err := p.tell(j, &rec, tenantOf(shares, j)); err != nil {
			log.Warn("job not usable for throughput estimates", "job", j.ID, "error", err)
			continue
		}
		p.closeSample(t, j, &rec, progress, elapsedS, roundS, log)
		if ok {
			recs[j.ID] = rec
		}
		r.jobs[j.ID] = p.jobRates(j, rec, models, capacity, free, r.pinned)
	}
	p.warn(r, log)
	return r
}

// tell makes sure the estimator holds job j as the snapshot shows it, its
// ledger measurements restored when it is new to the estimator.
func (p *profiler) tell(j *Job, rec *JobRecord, tenant string) error {
	id := profile.JobID(j.ID)
	if old := p.told[j.ID]; old != nil {
		if old.gpus == j.Spec.GPUs && old.family == j.Spec.Family && old.tenant == tenant && maps.Equal(old.declared, j.Spec.Throughput) {
			if !p.active[j.ID] {
				p.back(j.ID) // a teacher that came back
			}
			return nil
		}
		// The job was updated: relearn it (a new gang makes every rate
		// the ledger holds for it stale).
		p.est.Forget(id)
		delete(p.told, j.ID)
		if !p.active[j.ID] {
			p.back(j.ID)
		}
		if old.gpus != j.Spec.GPUs {
			rec.Measured, rec.Sample = nil, nil
		}
	}
	if err := p.est.AddJob(profile.Job{ID: id, Family: j.Spec.Family, GPUs: j.Spec.GPUs, Tenant: tenant}); err != nil {
		return err
	}
	p.told[j.ID] = &toldJob{gpus: j.Spec.GPUs, family: j.Spec.Family, tenant: tenant, declared: maps.Clone(j.Spec.Throughput)}
	p.active[j.ID] = true
	for _, m := range sortedModels(rec.Measured) {
		if err := p.est.Restore(id, m, rec.Measured[m]); err != nil {
			return err
		}
	}
	for _, m := range sortedModels(j.Spec.Throughput) {
		if err := p.est.Declare(id, m, j.Spec.Throughput[m]); err != nil {
			return err
		}
	}
	return nil
}

// closeSample turns the sample the last round opened into a measurement,
// when the job ran that whole round on the sample's model and reported
// progress at both ends.
func (p *profiler) closeSample(t int, j *Job, rec *JobRecord, progress map[string]float64, elapsedS, roundS float64, log hclog.Logger) {
	s := rec.Sample
	rec.Sample = nil
	if s == nil || s.Round != t-1 || j.RunningModel != s.Model || len(j.Allocs) == 0 || !(elapsedS > 0) {
		return
	}
	done, ok := progress[j.ID]
	if !ok || !(done > s.Done) || math.IsInf(done, 0) {
		return // no report, or no progress: nothing to learn from
	}
	units := (done - s.Done) * roundS / elapsedS
	if err := p.est.Measure(profile.JobID(j.ID), s.Model, units); err != nil {
		log.Warn("throughput measurement rejected", "job", j.ID, "model", s.Model, "error", err)
		return
	}
	m, _ := p.est.Measured(profile.JobID(j.ID), s.Model)
	measured := make(map[string]profile.Measurement, len(rec.Measured)+1)
	for k, v := range rec.Measured {
		measured[k] = v
	}
	measured[s.Model] = m
	rec.Measured = measured
}

// retire keeps the jobs that left the cluster as teachers, the newest
// maxTeachers of them.
func (p *profiler) retire(present map[string]bool) {
	var left []string
	for id := range p.active {
		if !present[id] {
			delete(p.active, id)
			left = append(left, id)
		}
	}
	sort.Strings(left) // a deterministic order, whatever the map's
	p.teachers = append(p.teachers, left...)
	for len(p.teachers) > maxTeachers {
		id := p.teachers[0]
		p.teachers = p.teachers[1:]
		p.est.Forget(profile.JobID(id))
		delete(p.told, id)
	}
}

// back takes job id off the teachers: it is in the cluster again.
func (p *profiler) back(id string) {
	p.teachers = slices.DeleteFunc(p.teachers, func(t string) bool { return t == id })
	p.active[id] = true
}

// jobRates derives job j's throughputs, and for a job without data the
// model to measure it on, taking its GPUs from free and adding them to
// pinned.
func (p *profiler) jobRates(j *Job, rec JobRecord, models []string, capacity, free, pinned map[string]int) *jobRates {
	id := profile.JobID(j.ID)
	jr := &jobRates{tp: map[string]float64{}, view: map[string]profile.Throughput{}}
	if !j.Spec.LearnThroughput {
		// A declared rate yields to a lower measured one once the job
		// ran a round there, and every declared rate falls by the worst
		// ratio of measured to declared (issue 20: a job that declares
		// 1e6 for 1 is priced at 1 after one round). A measured rate
		// above the declared one does not raise it: the measurement comes
		// from the job's own reports.
		ratio := 1.0
		for m, v := range j.Spec.Throughput {
			if ms, ok := p.est.Measured(id, m); ok && ms.UnitsPerRound < v {
				ratio = math.Min(ratio, ms.UnitsPerRound/v)
			}
		}
		for _, m := range models {
			v, ok := j.Spec.Throughput[m]
			if !ok {
				continue
			}
			th := p.est.Throughput(id, m)
			if ms, ok := p.est.Measured(id, m); ok && ms.UnitsPerRound < v {
				th = profile.Throughput{UnitsPerRound: ms.UnitsPerRound, Source: profile.SourceMeasured, Measurements: ms.Count}
			} else if ratio < 1 {
				th = profile.Throughput{UnitsPerRound: v * ratio, Source: profile.SourceEstimated, Measurements: th.Measurements}
			}
			jr.tp[m], jr.view[m] = th.UnitsPerRound, th
		}
		jr.view = reuseView(rec.Throughput, jr.view)
		return jr
	}
	for _, m := range models {
		th := p.est.Throughput(id, m)
		if th.Source == profile.SourceUnknown {
			continue
		}
		jr.view[m] = th
		jr.tp[m] = decisionValue(th)
	}
	if len(jr.tp) > 0 {
		jr.view = reuseView(rec.Throughput, jr.view)
		return jr
	}
	// No data: run it where it is measured first.
	fits := false
	for _, m := range models {
		fits = fits || capacity[m] >= j.Spec.GPUs
	}
	switch {
	case !fits:
		jr.noFit = fmt.Sprintf("%s = %d: more GPUs than any model of the cluster has", jobmeta.KeyGPUs, j.Spec.GPUs)
		return jr
	case rec.ProfileRounds >= maxProfileRounds:
		jr.noFit = fmt.Sprintf("%s is absent and the job ran %d rounds without reporting progress, so its throughput cannot be measured: report progress (the task driver, or fftctl report) or declare %s",
			jobmeta.KeyThroughput, rec.ProfileRounds, jobmeta.KeyThroughput)
		return jr
	}
	var c profile.Choice
	if m := j.RunningModel; m != "" && len(j.Allocs) > 0 && capacity[m] > 0 {
		// Already running to be measured: stay, a move would restart it.
		c = profile.Choice{Model: m, FreeGPUs: free[m] + j.Spec.GPUs, Reason: "running there to be measured"}
		free[m] += j.Spec.GPUs // its own GPUs
	} else {
		var err error
		if c, err = p.learnModel(id, j.Spec.GPUs, models, capacity, free, pinned); err != nil {
			jr.noFit = err.Error()
			return jr
		}
	}
	jr.learn = &c
	if c.Reason != profile.ReasonWait {
		free[c.Model] -= j.Spec.GPUs
		pinned[c.Model] += j.Spec.GPUs
	}
	return jr
}

// learnModel picks the model a job without data is measured on: among
// those with its gang free, else, preempting, among those whose GPUs not
// yet taken by jobs being measured hold its gang (the policy then parks
// whom it prefers to make room). Only when those are taken too does it
// wait (profile.ReasonWait).
func (p *profiler) learnModel(id profile.JobID, gpus int, models []string, capacity, free, pinned map[string]int) (profile.Choice, error) {
	c, err := p.est.LearnModel(id, free)
	if err != nil || c.Reason != profile.ReasonWait {
		return c, err
	}
	room := make(map[string]int, len(models))
	for _, m := range models {
		room[m] = capacity[m] - pinned[m]
	}
	c, err = p.est.LearnModel(id, room)
	if err == nil && c.Reason != profile.ReasonWait {
		c.Reason += "; no model had its GPUs free, so the policy makes room"
	}
	return c, err
}

// decisionValue is the throughput the round uses for a value.
func decisionValue(th profile.Throughput) float64 {
	th.LogSD = math.Min(th.LogSD, maxDecisionLogSD)
	return th.Expected()
}

// reuseView returns old when it holds the same values as cur, so a ledger
// whose rates did not change shares its maps instead of copying them.
func reuseView(old, cur map[string]profile.Throughput) map[string]profile.Throughput {
	if len(old) != len(cur) {
		return cur
	}
	for m, v := range cur {
		if old[m] != v {
			return cur
		}
	}
	return old
}

// warn logs each declared-versus-measured mismatch once and attaches the
// current ones to their jobs.
func (p *profiler) warn(r *rates, log hclog.Logger) {
	now := map[profile.Mismatch]bool{}
	for _, mm := range p.est.Mismatches() {
		jr := r.jobs[string(mm.Job)]
		if jr == nil {
			continue
		}
		jr.mismatches = append(jr.mismatches, mm)
		key := profile.Mismatch{Job: mm.Job, Model: mm.Model, DeclaredUnitsPerRound: mm.DeclaredUnitsPerRound}
		now[key] = true
		if !p.warned[key] {
			log.Warn("declared throughput far from the measured one", "job", mm.Job, "model", mm.Model, "declared", mm.DeclaredUnitsPerRound,
				"measured", mm.MeasuredUnitsPerRound, "measurements", mm.Measurements, "fix", mm.String())
		}
	}
	p.warned = now
}

func sortedModels[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// withPinned adds to the policy's decision the jobs run outside it to be
// measured, and those waiting to be.
func withPinned(dec *allocator.Decision, pr *problem) *allocator.Decision {
	if len(pr.learning) == 0 {
		return dec
	}
	out := *dec
	out.Jobs = append([]allocator.JobDecision(nil), dec.Jobs...)
	out.Usage = make(map[string]int, len(dec.Usage)+1)
	for m, n := range dec.Usage {
		out.Usage[m] = n
	}
	for _, id := range sortedModels(pr.learning) {
		c := pr.rates.jobs[id].learn
		if c.Reason == profile.ReasonWait {
			out.Jobs = append(out.Jobs, allocator.JobDecision{ID: id, Reason: allocator.Reason{Code: CodeProfileWait,
				Message: fmt.Sprintf("%s is absent: waiting for %d GPUs on a model to be measured; other jobs being measured hold them", jobmeta.KeyThroughput, pr.learning[id])}})
			continue
		}
		out.Jobs = append(out.Jobs, allocator.JobDecision{ID: id, Model: c.Model, Chosen: allocator.Terms{Model: c.Model}})
		out.Usage[c.Model] += pr.learning[id]
	}
	return &out
}

// recordRates writes each job's throughputs, with their sources and errors,
// into its ledger record and (with full) its audit line, and opens a sample
// for each job the round runs whole: kept on the model it already runs on,
// with a progress report at the round's start.
func recordRates(pr *problem, plan *Plan, next *Ledger, rec *RoundRecord, progress map[string]float64, t int, full bool) {
	if pr.rates == nil {
		return
	}
	whole := make(map[string]string, len(plan.Keep))
	for _, c := range plan.Keep {
		if c.Model != "" && c.Job.RunningModel == c.Model && len(c.Job.Allocs) > 0 {
			whole[c.Job.ID] = c.Model
		}
	}
	for k := range rec.Jobs {
		line := &rec.Jobs[k]
		jr := pr.rates.jobs[line.ID]
		r, ok := next.Jobs[line.ID]
		if jr == nil || !ok {
			continue
		}
		if len(jr.view) > 0 {
			r.Throughput = jr.view
		}
		if m, ok := whole[line.ID]; ok && m == line.Model {
			if done, ok := progress[line.ID]; ok && done >= 0 && !math.IsInf(done, 0) {
				r.Sample = &Sample{Round: t, Model: m, Done: done}
			}
		}
		if jr.learn != nil && line.Model != "" {
			r.ProfileRounds++
		}
		next.Jobs[line.ID] = r
		line.Learn, line.Mismatches = jr.learn, jr.mismatches
		if full {
			line.Throughput = jr.view
		}
	}
}

// pinnedOn is the GPUs of model taken by jobs being measured.
func (r *rates) pinnedOn(model string) int {
	if r == nil {
		return 0
	}
	return r.pinned[model]
}

// outside reports whether job id is kept out of the policy's instance: run
// or waiting to be measured (why empty), or held as no-fit (why says why).
func (r *rates) outside(id string) (held bool, why string) {
	if r == nil {
		return false, ""
	}
	jr := r.jobs[id]
	if jr == nil || jr.learn == nil && jr.noFit == "" {
		return false, ""
	}
	return true, jr.noFit
}

// throughputs is the job's throughput per model for the instance, a map
// the caller may change.
func (r *rates) throughputs(j *Job) map[string]float64 {
	var src map[string]float64
	if jr := r.jobOf(j.ID); jr != nil {
		src = jr.tp
	} else {
		src = j.Spec.Throughput
	}
	out := make(map[string]float64, len(src))
	for m, v := range src {
		out[m] = v
	}
	return out
}

func (r *rates) jobOf(id string) *jobRates {
	if r == nil {
		return nil
	}
	return r.jobs[id]
}
