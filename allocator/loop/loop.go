package loop

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
	"github.com/nomad-fft/nomad-fft/allocator/roundtime"
)

// Loop runs rounds: observe, build, decide, apply, record. It holds the
// ledger between rounds (reloading it from the Store when it is unsure) and
// the policy, which may keep state of its own across rounds.
type Loop struct {
	obs   Observer
	app   Applier
	store Store
	opts  options

	mu     sync.Mutex
	ledger *Ledger // nil: load from the store before the next round
	// prof is the throughput estimator, rebuilt from the ledger whenever
	// the ledger is reloaded (profile.go).
	prof *profiler
}

type options struct {
	cfg      allocator.Config
	pol      policy.Policy
	log      hclog.Logger
	now      func() time.Time
	weighted bool
	shares   *TenantShares
	record   Recording
	priors   *profile.Priors
	style    placement.Style
}

// Recording says how much of each round the record keeps.
type Recording int

const (
	// RecordFull keeps every job's cost terms on every model and the
	// inputs digest: what the live audit log needs.
	RecordFull Recording = iota
	// RecordLean keeps each job's line without its options and skips the
	// digest, for simulations of many thousand rounds.
	RecordLean
)

// Option configures a Loop.
type Option func(*options)

// WithConfig sets the round engine's configuration: the round length, the
// restart and transfer prices and, for the default policy, the objective
// (default: allocator.DefaultConfig, the paper's).
func WithConfig(c allocator.Config) Option { return func(o *options) { o.cfg = c } }

// WithPolicy sets the policy that decides each round (default: FFT with
// the WithConfig engine configuration).
func WithPolicy(p policy.Policy) Option { return func(o *options) { o.pol = p } }

// WithPlacement sets the placement style (default: the policy's own,
// policy.PlacementOf: the paper's Placer unless the policy is a baseline
// whose system places jobs its own way).
func WithPlacement(st placement.Style) Option { return func(o *options) { o.style = st } }

// WithLogger sets the logger (default: a null logger).
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the clock (default: time.Now). The simulator passes its
// virtual clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithTenantWeights makes each job's fairness reference its fft.weight
// share w_j / sum_k w_k of every model instead of the paper's 1/|A(t)|
// (default: off, the paper; with every weight 1 both are the same).
func WithTenantWeights(on bool) Option { return func(o *options) { o.weighted = on } }

// WithTenantShares makes the fairness reference go to tenants first, by
// the operator's shares, each tenant's share split among its jobs (default:
// none, every job its own share, the paper's).
func WithTenantShares(s *TenantShares) Option { return func(o *options) { o.shares = s } }

// WithRecording sets how much each round record keeps (default RecordFull).
func WithRecording(r Recording) Option { return func(o *options) { o.record = r } }

// WithThroughputPriors sets the prior table of the throughput estimator
// (default: profile.GavelPriors(); an operator's table is merged as
// GavelPriors().With(table); nil: none).
func WithThroughputPriors(p *profile.Priors) Option { return func(o *options) { o.priors = p } }

// New returns a Loop over the three adapters.
func New(obs Observer, app Applier, store Store, opts ...Option) *Loop {
	o := options{cfg: allocator.DefaultConfig(), log: hclog.NewNullLogger(), now: time.Now, priors: profile.GavelPriors()}
	for _, f := range opts {
		f(&o)
	}
	if o.pol == nil {
		o.pol = policy.NewFFTWith(policy.FFTName, o.cfg)
	}
	if o.style == "" {
		o.style = policy.PlacementOf(o.pol.Name())
	}
	prof, err := newProfiler(o.priors)
	if err != nil {
		panic("loop: the estimator's default options are invalid: " + err.Error())
	}
	return &Loop{obs: obs, app: app, store: store, opts: o, prof: prof}
}

// Policy is the policy the loop decides with.
func (l *Loop) Policy() policy.Policy { return l.opts.pol }

// Config is the engine configuration the loop builds instances with.
func (l *Loop) Config() allocator.Config { return l.opts.cfg }

// Store is the store the loop records to.
func (l *Loop) Store() Store { return l.store }

// Observer is the observer the loop reads the cluster with.
func (l *Loop) Observer() Observer { return l.obs }

// Forget drops the in-memory ledger, so the next round reloads what the
// store holds (a replica taking the lead does this).
func (l *Loop) Forget() {
	l.mu.Lock()
	l.ledger = nil
	l.mu.Unlock()
}

// RunRound runs one round, recorded as answering kind (and the jobs of its
// triggers). A panic inside it fails only this round: it is recovered,
// logged with its stack and returned as an error, and the ledger is
// reloaded next round.
func (l *Loop) RunRound(ctx context.Context, kind TriggerKind, triggerJobs []string) (rec *RoundRecord, err error) {
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(*PanicError) // raised again from another goroutine, with its stack
			if !ok {
				pe = &PanicError{Value: r, Stack: string(debug.Stack())}
			}
			l.opts.log.Error("round panicked", "panic", pe.Value, "stack", pe.Stack)
			rec, err = nil, pe
			l.Forget()
		}
		if err != nil {
			// The estimator may hold this round's measurements; the
			// retry takes them again from the ledger.
			_ = l.prof.reset()
		}
	}()
	return l.round(ctx, kind, triggerJobs)
}

// PanicError is a panic in a round (a policy's, an adapter's), recovered at
// the round boundary: the round fails, the process does not.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("round panicked: %v", e.Value) }

// round is the five phases; each is timed and logged with the round number.
func (l *Loop) round(ctx context.Context, kind TriggerKind, triggerJobs []string) (*RoundRecord, error) {
	start := l.opts.now()
	prev, fresh, err := l.load(ctx)
	if err != nil {
		return nil, err
	}
	if fresh {
		if err := l.prof.reset(); err != nil {
			return nil, err
		}
	}
	t := prev.Round
	// The clients count the round's calls on its meter: each phase tells its waits on Nomad
	// and Consul from its own time.
	meter := roundtime.NewMeter()
	ctx = roundtime.With(ctx, meter)
	cpu0 := cpuNow()
	ph := &phases{log: l.opts.log.With("round", t), round: t, took: map[string]float64{}, meter: meter}

	// 1. Observe the cluster and the progress jobs report.
	var snap *Snapshot
	if err := ph.run(1, "observe", func() (err error) {
		snap, err = l.obs.Observe(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	for _, inv := range snap.Invalid {
		ph.log.Warn("job rejected: bad fft. meta; left untouched", "job", inv.ID, "error", inv.Err)
	}
	for _, j := range snap.Jobs {
		if j.Refused != "" {
			ph.log.Warn("Nomad did not place the job on the nodes the last round pinned it to; placing it again", "job", j.ID, "nodes", j.Pinned, "reason", j.Refused)
		}
	}
	progress := l.progress(ctx, ph.log)
	reports := l.reports(ctx, ph.log)
	if stale := staleReports(snap, prev.Jobs, progress, reports); len(stale) > 0 {
		// Before anything is applied: a job the round has not started cannot
		// report, so what is deleted is the earlier job's.
		for _, id := range stale {
			delete(progress, id)
			delete(reports, id)
		}
		l.prune(ctx, stale, ph.log)
	}
	overrides, err := l.overrides(ctx)
	if err != nil {
		// Without them a round could start a job an operator parked.
		return nil, &PhaseError{Round: t, Phase: "observe", Err: err}
	}

	// 2. Build: settle the previous round's credit (cut to the time that
	// passed if this round is early), reconcile the ledger with the jobs
	// present, and derive the policy's view of the round.
	kept := creditKept(early(kind), prev.Start, start, l.opts.cfg.RoundSeconds)
	clock := prev.Clock - (1 - kept)
	var pr *problem
	_ = ph.run(2, "build", func() error {
		settled := settle(prev.Jobs, kept, unplacedStarts(snap.Jobs, prev.Jobs))
		rt := l.prof.prepare(t, snap, settled, progress, elapsedSeconds(prev.Start, start), l.opts.cfg.RoundSeconds, l.opts.shares, ph.log)
		pr = buildProblem(fairRound(clock), snap, settled,
			inputs{progress: progress, overrides: overrides, cfg: l.opts.cfg, weighted: l.opts.weighted, shares: l.opts.shares, rates: rt,
				reports: reports})
		pr.snapshot = pr.policySnapshot(clock, l.opts.cfg.RoundSeconds)
		return nil
	})
	for id, why := range pr.noFit {
		ph.log.Warn("job cannot run in this cluster; held", "job", id, "reason", why)
	}

	// 3. Decide with the policy.
	var dec *allocator.Decision
	if err := ph.run(3, "solve", func() (err error) {
		dec, err = decide(ctx, l.opts.pol, pr)
		return err
	}); err != nil {
		return nil, err
	}
	// Place it on hosts (deciding again without what no host can take).
	var chosen map[string]string // the policy's, without the jobs being measured
	var pl *placed
	if err := ph.run(3, "place", func() (err error) {
		var polDec *allocator.Decision
		polDec, dec, pl, err = l.place(ctx, pr, snap, dec)
		if err == nil {
			chosen = polDec.Assignment()
		}
		return err
	}); err != nil {
		return nil, err
	}
	explainUnplaced(dec, pl, snap.Hosts, pr.records)
	assignment := dec.Assignment()

	// 4. Claim the round in the store (when it can), then apply the
	// difference between the cluster and the decision. A round whose claim
	// fails changes nothing in the cluster.
	plan := DiffPlaced(snap.Jobs, assignment, pl.slots())
	next := &Ledger{Round: t + 1, Clock: clock + 1, Start: start, Jobs: pr.records, Version: prev.Version}
	rec := l.newRecord(t, start, kind, triggerJobs, clock, kept, snap, pr, dec, plan, ApplyResult{})
	pl.record(rec, snap, l.opts.record == RecordFull)
	prev, err = l.claim(ctx, ph, prev, next, rec)
	if err != nil {
		return nil, err
	}
	// While Nomad takes the writes, the round does its bookkeeping: the
	// ledger's advance and the record's lines follow from the plan, not
	// from Nomad's answers (a change that fails is retried next round).
	var res ApplyResult
	_ = ph.run(4, "apply", func() error {
		concurrently(func() { res = l.app.Apply(ctx, plan) }, func() {
			begin := time.Now()
			if l.opts.record == RecordFull {
				// The instance as solved: advance moves its fairness state on.
				// Its JSON takes 50 ms of CPU at 20,000 jobs: off the round's path here.
				rec.InputsDigest = digest(&pr.instance)
			}
			achieved := advance(pr, dec, plan, next, rec, l.opts.cfg.RoundSeconds, l.opts.record == RecordFull)
			pl.recordLines(rec, snap)
			recordRates(pr, plan, next, rec, progress, t, l.opts.record == RecordFull)
			if lr, ok := l.opts.pol.(policy.Observer); ok {
				lr.Observe(pr.snapshot, policy.Assignment(chosen), achieved)
			}
			if p, ok := l.store.(Preparer); ok {
				p.Prepare(prev, next, rec)
			}
			ph.log.Trace("bookkeeping done", "duration", time.Since(begin))
		})
		return nil
	})
	for _, c := range res.Conflicts {
		ph.log.Warn("job changed concurrently; re-read next round", "job", c)
	}
	for _, e := range res.Errors {
		ph.log.Error("apply failed", "error", e)
	}
	rec.Apply = res

	// 5. Record: write the ledger with the round record, check-and-set
	// against the ledger this round started from (or claimed).
	err = ph.run(5, "record", func() error {
		rec.Phases, rec.SolveSeconds = ph.took, ph.took["solve"]
		return l.store.Record(ctx, prev, next, rec)
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.ledger = nil
		if errors.Is(err, ErrConflict) {
			ph.log.Warn("ledger changed in the store; reloading next round")
		}
		return nil, err
	}
	l.ledger = next
	cpu1 := cpuNow()
	ph.log.Info("round done", "trigger", kind, "policy", l.opts.pol.Name(), "jobs", len(pr.instance.Jobs), "running", len(assignment),
		"plan", plan.GoString(), "api_calls", snap.Calls+res.Calls, "watch_calls", snap.WatchCalls, "duration", l.opts.now().Sub(start),
		"cpu", cpu1-cpu0, "waited", meter.Waited())
	return rec, nil
}

// claim writes the round's intent when the store is a Claimer and returns
// the ledger Record checks against; a failed claim fails the round before it
// applies anything, and the ledger is reloaded next round.
func (l *Loop) claim(ctx context.Context, ph *phases, prev, next *Ledger, rec *RoundRecord) (*Ledger, error) {
	c, ok := l.store.(Claimer)
	if !ok {
		return prev, nil
	}
	intent := *rec
	intent.State = RoundApplying
	var version uint64
	err := ph.run(4, "claim", func() (err error) {
		version, err = c.Claim(ctx, prev, next, &intent)
		return err
	})
	if err != nil {
		l.Forget()
		return nil, err
	}
	claimed := *prev
	claimed.Version, claimed.Claimed = version, true
	return &claimed, nil
}

// Ledger returns a copy of the ledger the next round starts from (nil
// before the first round or after a failure).
func (l *Loop) Ledger() *Ledger {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ledger == nil {
		return nil
	}
	c := *l.ledger
	return &c
}

// load returns the ledger the round starts from: the one kept in memory,
// else the store's (fresh).
func (l *Loop) load(ctx context.Context) (prev *Ledger, fresh bool, err error) {
	l.mu.Lock()
	prev = l.ledger
	l.mu.Unlock()
	if prev != nil {
		return prev, false, nil
	}
	p, err := l.store.Load(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("loading the ledger: %w", err)
	}
	return p, true, nil
}

// elapsedSeconds is the time from the previous round's start (0: unknown).
func elapsedSeconds(prevStart, start time.Time) float64 {
	if prevStart.IsZero() {
		return 0
	}
	return start.Sub(prevStart).Seconds()
}

// progress reads the jobs' own reports, when the store takes them; a
// failure leaves the estimates in place.
func (l *Loop) progress(ctx context.Context, log hclog.Logger) map[string]float64 {
	pr, ok := l.store.(ProgressReader)
	if !ok {
		return nil
	}
	p, err := pr.Progress(ctx)
	if err != nil {
		log.Warn("reading progress reports failed; using estimates", "error", err)
	}
	return p
}

// prune deletes the stale reports, when the store can; a failure is logged
// and tried again next round (the round ignores them meanwhile).
func (l *Loop) prune(ctx context.Context, ids []string, log hclog.Logger) {
	pp, ok := l.store.(ProgressPruner)
	if !ok {
		return
	}
	if err := pp.PruneProgress(ctx, ids); err != nil {
		log.Warn("deleting the progress reports of jobs gone or registered again failed; retrying next round", "jobs", ids, "error", err)
		return
	}
	log.Debug("deleted the progress reports of jobs gone or registered again", "jobs", ids)
}

// overrides reads the operators' decisions, when the store keeps them.
func (l *Loop) overrides(ctx context.Context) (map[string]Override, error) {
	or, ok := l.store.(OverrideReader)
	if !ok {
		return nil, nil
	}
	o, err := or.Overrides(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the operators' overrides: %w", err)
	}
	return o, nil
}

// decide asks the policy for the round's decision. A policy that is a
// policy.Decider (FFT) returns the engine's decision with every cost term;
// any other returns an assignment, checked against the round's rules and
// turned into a decision with the throughputs it achieves.
func decide(ctx context.Context, pol policy.Policy, pr *problem) (*allocator.Decision, error) {
	in := &pr.instance
	if len(in.Jobs) == 0 || len(in.Models) == 0 {
		return &allocator.Decision{Round: in.Round, Usage: map[string]int{}}, nil
	}
	if d, ok := pol.(policy.Decider); ok {
		return d.Decide(ctx, pr.snapshot)
	}
	a, err := pol.Schedule(ctx, pr.snapshot)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", pol.Name(), err)
	}
	if err := policy.Check(pr.snapshot, a); err != nil {
		return nil, fmt.Errorf("policy %q: %w", pol.Name(), err)
	}
	return policy.DecisionOf(pr.snapshot, a), nil
}

// concurrently runs apply and book at once and returns when both are done.
// A panic in book is raised again here, as a *PanicError with book's stack,
// so that RunRound recovers it (a panic left in a goroutine would end the
// process).
func concurrently(apply, book func()) {
	done := make(chan *PanicError, 1)
	go func() {
		var pe *PanicError
		defer func() {
			if r := recover(); r != nil {
				pe = &PanicError{Value: r, Stack: string(debug.Stack())}
			}
			done <- pe
		}()
		book()
	}()
	defer func() {
		if pe := <-done; pe != nil {
			panic(pe)
		}
	}()
	apply()
}

// phases times and logs the numbered phases of one round. Durations are
// wall time, whatever clock the loop's rounds follow: the simulator's is
// virtual, and a phase's cost is real. Each phase's trace line also tells
// the process's CPU time in it (cpu, every thread: it may pass the wall
// time) and the wall time it waited on Nomad or Consul (waited: with at
// least one call outstanding, counted by the clients on meter).
type phases struct {
	log   hclog.Logger
	round int
	took  map[string]float64
	meter *roundtime.Meter
}

func (p *phases) run(n int, name string, f func() error) error {
	// With "phase done", it tells where a round was when its replica died
	// (the chaos suite kills replicas on these lines).
	p.log.Trace("phase start", "phase", fmt.Sprintf("%d-%s", n, name))
	begin, cpu0, waited0 := time.Now(), cpuNow(), p.meter.Waited()
	err := f()
	d := time.Since(begin)
	p.took[name] = d.Seconds()
	if err != nil {
		p.log.Error("phase failed", "phase", fmt.Sprintf("%d-%s", n, name), "duration", d, "error", err)
		return &PhaseError{Round: p.round, Phase: name, Err: err}
	}
	p.log.Trace("phase done", "phase", fmt.Sprintf("%d-%s", n, name), "duration", d,
		"cpu", cpuNow()-cpu0, "waited", p.meter.Waited()-waited0)
	return nil
}

// cpuNow is the process's CPU time so far (0 where it cannot be read).
func cpuNow() time.Duration {
	d, _ := roundtime.CPU()
	return d
}

// newRecord starts the round's record; the bookkeeping fills its digest and advance its job lines.
func (l *Loop) newRecord(t int, start time.Time, kind TriggerKind, triggerJobs []string, clock, kept float64, snap *Snapshot,
	pr *problem, dec *allocator.Decision, plan *Plan, res ApplyResult) *RoundRecord {
	rec := &RoundRecord{
		Round: t, Start: start.UTC().Format(time.RFC3339Nano), Trigger: kind, TriggerJobs: triggerJobs,
		Policy: l.opts.pol.Name(), Clock: clock, CreditKept: kept, IdleGPUs: idleGPUs(snap.Models, dec.Usage),
		Models: pr.instance.Models, Assignment: dec.Assignment(), Invalid: snap.Invalid, Usage: dec.Usage,
		Objective: dec.Objective, Bound: dec.Bound, Gap: dec.Gap, Status: dec.Status.String(), Nodes: dec.Stats.Nodes,
		Plan: plan.GoString(), Apply: res, ObserveCalls: snap.Calls, WatchCalls: snap.WatchCalls,
	}
	return rec
}

// advance applies Eq. 5 for the round, credits progress and service, and
// fills the audit lines; it returns the work credited to each selected job.
// A job chosen this round is counted as achieving its throughput on the
// chosen model for a whole round: progress is estimated as rounds run times
// the declared throughput until jobs report progress (our fallback
// estimate). Each job's credit is kept in its record, for an early next
// round to cut. With options false the audit lines leave out every job's
// options (RecordLean).
func advance(pr *problem, dec *allocator.Decision, plan *Plan, next *Ledger, rec *RoundRecord, roundSeconds float64, options bool) map[string]float64 {
	fs := &pr.instance.Fairness
	t := pr.instance.Round
	before := make(map[string]float64, len(fs.Jobs))
	for id := range fs.Jobs {
		before[id] = fs.Rho(id)
	}
	gpus := make(map[string]int, len(pr.instance.Jobs)+len(pr.learning))
	for _, j := range pr.instance.Jobs {
		gpus[j.ID] = j.GPUs
	}
	for id, n := range pr.learning {
		gpus[id] = n
	}
	claimed := make(map[string]allocator.Job, len(pr.instance.Jobs))
	for _, j := range pr.instance.Jobs {
		claimed[j.ID] = j
	}
	achieved := map[string]float64{}
	spread := spreadJobs(plan)
	for _, jd := range dec.Jobs {
		if jd.Model != "" {
			achieved[jd.ID] = jd.Chosen.Throughput * spreadFactor(spread[jd.ID], jd.Model)
		}
	}
	fs.Advance(t, achieved)
	rec.Jobs = make([]JobAudit, 0, len(dec.Jobs)+len(pr.noFit))
	for _, jd := range dec.Jobs {
		r := next.Jobs[jd.ID]
		service := 0.0
		if jd.Model != "" {
			service = float64(gpus[jd.ID]) * roundSeconds
		}
		if st, ok := fs.Jobs[jd.ID]; ok {
			r.JobState = st
			// Mu and the fair share do not change with rho, so the step
			// is the one Advance took.
			r.Credit = &Credit{RhoFrom: before[jd.ID], RhoStep: st.Mu(t) * (st.FairShare() - achieved[jd.ID]), RhoRan: st.Mu(t) * achieved[jd.ID],
				Done: achieved[jd.ID], GPUSeconds: service}
		}
		if jd.Model != "" {
			// The progress credited: the round's rate, less the restart a
			// resume or a move pays inside the round (claims.go), so that
			// a job preempted often is not credited work it could not do.
			credit := achieved[jd.ID]
			if act := plan.ActionOf(jd.ID); (act == ActionStart || act == ActionMigrate) && r.LastModel != "" {
				credit *= restartKept(pr.prices[jd.ID].Seconds, roundSeconds)
			}
			over := 0.0
			if j, ok := claimed[jd.ID]; ok {
				over = overrun(&r, j.Work, j.Done, credit)
			}
			if r.Credit != nil {
				r.Credit.Overrun, r.Credit.Done = over, credit
			}
			r.Done += credit
			r.Earned += credit
			r.AttainedGPUSeconds += service
			r.RoundsRun++
			if r.LastModel != "" && r.LastModel != jd.Model {
				r.Switches++
			}
			r.LastModel = jd.Model
			r.Status = StatusRunning
		} else {
			r.Status = StatusWaiting
		}
		next.Jobs[jd.ID] = r
		line := JobAudit{
			ID: jd.ID, User: r.User, Weight: r.Weight, Model: jd.Model, GPUs: gpus[jd.ID], Action: plan.ActionOf(jd.ID),
			RhoBefore: before[jd.ID], RhoAfter: fs.Rho(jd.ID), Chosen: jd.Chosen,
		}
		line.setReason(jd.Reason)
		line.Tenant, line.Distrusted = pr.tenantOf[jd.ID], r.Distrusted
		if p, ok := pr.prices[jd.ID]; ok && (p.SecondsSource == SourceMeasured || p.CheckpointSource == SourceMeasured || p.ClaimedSeconds > 0 || p.ClaimedCheckpointGB > 0) {
			line.Restart = &p
		}
		if o, ok := pr.overrides[jd.ID]; ok {
			line.Override = o.String()
		}
		if options {
			line.Options = jd.Options()
		}
		rec.Jobs = append(rec.Jobs, line)
	}
	for id, why := range pr.noFit {
		r := next.Jobs[id]
		line := JobAudit{ID: id, User: r.User, ReasonCode: allocator.ReasonNoFit.Code, Reason: why, Action: plan.ActionOf(id), RhoBefore: r.Rho, RhoAfter: r.Rho}
		if o, ok := pr.overrides[id]; ok {
			line.Override = o.String()
		}
		rec.Jobs = append(rec.Jobs, line)
	}
	for _, id := range pr.parked {
		o := pr.overrides[id]
		r := next.Jobs[id]
		rec.Jobs = append(rec.Jobs, JobAudit{ID: id, User: r.User, ReasonCode: CodeParkedByOperator, Reason: "parked by an operator: " + o.String(),
			Action: plan.ActionOf(id), RhoBefore: r.Rho, RhoAfter: r.Rho, Override: o.String()})
	}
	for _, id := range pr.unhealthy {
		r := next.Jobs[id]
		rec.Jobs = append(rec.Jobs, JobAudit{ID: id, User: r.User, ReasonCode: CodeUnhealthyGPU,
			Reason: "its allocation holds a GPU Nomad reports unhealthy: parked, to restart on a healthy GPU", Action: plan.ActionOf(id), RhoBefore: r.Rho, RhoAfter: r.Rho})
	}
	rec.TenantWeights = pr.weighted
	rec.Tenants = pr.tenants
	sort.Slice(rec.Jobs, func(a, b int) bool { return rec.Jobs[a].ID < rec.Jobs[b].ID })
	return achieved
}

// idleGPUs is how many of the models' GPUs a decision leaves unused.
func idleGPUs(models []allocator.Model, usage map[string]int) int {
	idle := 0
	for _, m := range models {
		idle += max(0, m.GPUs-usage[m.Name])
	}
	return idle
}
