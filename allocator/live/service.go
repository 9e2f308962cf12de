package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// Service runs FFT rounds: observe, build problem, solve, apply, record.
type Service struct {
	obs   Observer
	app   Applier
	store Store
	opts  options

	mu     sync.Mutex
	ledger *Ledger // nil: load from the store before the next round
	status Status
}

type options struct {
	cfg    allocator.Config
	log    hclog.Logger
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	onDone func(*RoundRecord, error)
	// weighted: fairness shares follow fft.weight (WithTenantWeights).
	weighted bool
	minGap   time.Duration
}

// Option configures a Service.
type Option func(*options)

// WithConfig sets the round engine's configuration (default: the paper's
// objective, allocator.DefaultConfig).
func WithConfig(c allocator.Config) Option { return func(o *options) { o.cfg = c } }

// WithLogger sets the logger (default: a null logger).
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the clock (default: time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithEarlyRounds lets Run start a round before the schedule when the
// Observer is also a Watcher and it reports a change worth one (see
// wantEarly), at least gap after the previous round's start. A gap of 0 (the
// default) turns early rounds off.
func WithEarlyRounds(gap time.Duration) Option { return func(o *options) { o.minGap = gap } }

// WithRoundHook calls f after every round with its record (nil if the round
// failed before recording) and error; metrics use it.
func WithRoundHook(f func(*RoundRecord, error)) Option { return func(o *options) { o.onDone = f } }

// WithTenantWeights makes each job's fairness reference its fft.weight
// share w_j / sum_k w_k of every model instead of the paper's 1/|A(t)|
// (default: off, the paper; with every weight 1 both are the same).
func WithTenantWeights(on bool) Option { return func(o *options) { o.weighted = on } }

// New returns a Service over the three adapters.
func New(obs Observer, app Applier, store Store, opts ...Option) *Service {
	o := options{cfg: allocator.DefaultConfig(), log: hclog.NewNullLogger(), now: time.Now, after: time.After}
	for _, f := range opts {
		f(&o)
	}
	return &Service{obs: obs, app: app, store: store, opts: o, status: Status{NextRound: -1}}
}

// Status is the service's state for the status endpoint.
type Status struct {
	// Rounds and Failures count rounds run and failed since start;
	// EarlyRounds the recorded ones a trigger brought forward.
	Rounds      int `json:"rounds"`
	Failures    int `json:"failures"`
	EarlyRounds int `json:"early_rounds"`
	// APICalls, Conflicts and ApplyErrors are totals over recorded rounds.
	APICalls    int `json:"api_calls"`
	Conflicts   int `json:"conflicts"`
	ApplyErrors int `json:"apply_errors"`
	// Applied counts the changes applied, by action.
	Applied map[Action]int `json:"applied"`
	// Leading is true while this replica holds the leader lock and runs rounds.
	Leading bool `json:"leading"`
	// NextRound is the round the ledger will run next (-1 before loading).
	NextRound int          `json:"next_round"`
	LastError string       `json:"last_error,omitempty"`
	Last      *RoundRecord `json:"last_round,omitempty"`
	// Jobs are the ledger's per-job records.
	Jobs map[string]JobRecord `json:"jobs"`
}

// Status returns a copy of the service's state.
func (s *Service) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Jobs = maps.Clone(st.Jobs)
	st.Applied = maps.Clone(st.Applied)
	return st
}

// Lead marks this replica as leading or standing by. Taking the lead drops
// the in-memory ledger, so the first round reloads what the previous leader
// stored.
func (s *Service) Lead(leading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Leading = leading
	if leading {
		s.ledger = nil
	}
}

// Run runs a round at once and then every `every` until ctx ends; with
// early rounds on (WithEarlyRounds) and a Watcher, a change worth it starts
// a round sooner. A failed round is logged and counted; the next one starts
// afresh.
func (s *Service) Run(ctx context.Context, every time.Duration) error {
	triggers := s.watch(ctx)
	sch := &schedule{every: every, gap: s.opts.minGap}
	kind, jobs := TriggerSchedule, []string(nil)
	for {
		start := s.opts.now()
		rec, _ := s.runRound(ctx, kind, jobs)
		sch.ran(start, rec)
		for waiting := true; waiting; {
			due, why := sch.next()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-s.opts.after(due.Sub(s.opts.now())):
				kind, jobs, waiting = why, nil, false
				if why != TriggerSchedule {
					jobs = sch.jobs()
				}
			case tr := <-triggers:
				if sch.offer(tr, s.opts.now()) {
					at, _ := sch.next()
					s.opts.log.Debug("early round due", "trigger", tr.Kind, "job", tr.Job, "at", at)
				}
			}
		}
	}
}

// watch starts the Observer's Watcher when early rounds are on and returns
// the channel it reports on; nil (a channel that never delivers) otherwise.
func (s *Service) watch(ctx context.Context) <-chan Trigger {
	w, ok := s.obs.(Watcher)
	if !ok || s.opts.minGap <= 0 {
		return nil
	}
	ch := make(chan Trigger, 64)
	go func() {
		if err := w.Watch(ctx, ch); err != nil && ctx.Err() == nil {
			s.opts.log.Warn("watching the cluster stopped: only regular rounds run", "error", err)
		}
	}()
	return ch
}

// RunRound runs one round (recorded as TriggerManual). A panic inside it
// fails only this round: it is recovered, logged with its stack and
// returned as an error.
func (s *Service) RunRound(ctx context.Context) (rec *RoundRecord, err error) {
	return s.runRound(ctx, TriggerManual, nil)
}

func (s *Service) runRound(ctx context.Context, kind TriggerKind, jobs []string) (rec *RoundRecord, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.opts.log.Error("round panicked", "panic", r, "stack", string(debug.Stack()))
			rec, err = nil, fmt.Errorf("round panicked: %v", r)
			s.mu.Lock()
			s.ledger = nil // its state is unknown; reload
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.status.Rounds++
		if err != nil {
			s.status.Failures++
			s.status.LastError = err.Error()
		} else {
			s.status.LastError = ""
			s.status.Last = rec
			s.status.APICalls += rec.ObserveCalls + rec.Apply.Calls + rec.WatchCalls
			s.status.Conflicts += len(rec.Apply.Conflicts)
			s.status.ApplyErrors += len(rec.Apply.Errors)
			for a, n := range rec.Apply.Applied {
				if s.status.Applied == nil {
					s.status.Applied = map[Action]int{}
				}
				s.status.Applied[a] += n
			}
			if early(rec.Trigger) {
				s.status.EarlyRounds++
			}
		}
		s.mu.Unlock()
		if s.opts.onDone != nil {
			s.opts.onDone(rec, err)
		}
	}()
	return s.round(ctx, kind, jobs)
}

func (s *Service) round(ctx context.Context, kind TriggerKind, triggerJobs []string) (*RoundRecord, error) {
	start := s.opts.now()
	s.mu.Lock()
	prev := s.ledger
	s.mu.Unlock()
	if prev == nil {
		l, err := s.store.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("loading the ledger: %w", err)
		}
		prev = l
	}
	t := prev.Round
	log := s.opts.log.With("round", t)
	phases := map[string]float64{}
	timed := func(n int, name string, f func() error) error {
		begin := s.opts.now()
		err := f()
		d := s.opts.now().Sub(begin)
		phases[name] = d.Seconds()
		if err != nil {
			log.Error("phase failed", "phase", fmt.Sprintf("%d-%s", n, name), "duration", d, "error", err)
			return &PhaseError{Round: t, Phase: name, Err: err}
		}
		log.Debug("phase done", "phase", fmt.Sprintf("%d-%s", n, name), "duration", d)
		return nil
	}

	// 1. Observe the cluster.
	var snap *Snapshot
	if err := timed(1, "observe", func() (err error) {
		snap, err = s.obs.Observe(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	for _, inv := range snap.Invalid {
		log.Warn("job rejected: bad fft. meta; left untouched", "job", inv.ID, "error", inv.Err)
	}
	var progress map[string]float64
	if pr, ok := s.store.(ProgressReader); ok {
		p, err := pr.Progress(ctx)
		if err != nil {
			log.Warn("reading progress reports failed; using estimates", "error", err)
		}
		progress = p
	}

	// 2. Build the problem: settle the previous round's credit (cut to the
	// time that passed if this round is early), then reconcile the ledger
	// with the jobs present.
	kept := creditKept(early(kind), prev.Start, start, s.opts.cfg.RoundSeconds)
	clock := prev.Clock - (1 - kept)
	var pr *problem
	_ = timed(2, "build", func() error {
		pr = buildProblem(fairRound(clock), snap, settle(prev.Jobs, kept), progress, s.opts.cfg, s.opts.weighted)
		return nil
	})
	for id, why := range pr.noFit {
		log.Warn("job cannot run in this cluster; held", "job", id, "reason", why)
	}

	// 3. Solve the round.
	dec := &allocator.Decision{Round: pr.instance.Round, Usage: map[string]int{}}
	if err := timed(3, "solve", func() error {
		if len(pr.instance.Jobs) == 0 || len(pr.instance.Models) == 0 {
			return nil
		}
		d, err := allocator.Decide(ctx, &pr.instance)
		if err != nil {
			return err
		}
		dec = d
		return nil
	}); err != nil {
		return nil, err
	}
	assignment := dec.Assignment()

	// 4. Apply the difference between the cluster and the decision.
	plan := Diff(snap.Jobs, assignment)
	var res ApplyResult
	_ = timed(4, "apply", func() error {
		res = s.app.Apply(ctx, plan)
		return nil
	})
	for _, c := range res.Conflicts {
		log.Warn("job changed concurrently; re-read next round", "job", c)
	}
	for _, e := range res.Errors {
		log.Error("apply failed", "error", e)
	}

	// 5. Record: advance the fairness ledger and write it with the audit
	// record, check-and-set against the ledger this round started from.
	next := &Ledger{Round: t + 1, Clock: clock + 1, Start: start, Jobs: pr.records, Version: prev.Version}
	rec := &RoundRecord{
		Round: t, Start: start.UTC().Format(time.RFC3339Nano), Trigger: kind, TriggerJobs: triggerJobs,
		Clock: clock, CreditKept: kept, IdleGPUs: idleGPUs(snap.Models, dec.Usage),
		InputsDigest: digest(&pr.instance), Models: pr.instance.Models, Assignment: assignment, Invalid: snap.Invalid,
		Usage:     dec.Usage,
		Objective: dec.Objective, Bound: dec.Bound, Gap: dec.Gap, Status: dec.Status.String(),
		SolveSeconds: phases["solve"], Plan: plan.GoString(), Apply: res, ObserveCalls: snap.Calls,
		WatchCalls: snap.WatchCalls, Phases: phases,
	}
	err := timed(5, "record", func() error {
		advance(pr, dec, plan, next, rec)
		return s.store.Record(ctx, prev, next, rec)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.ledger = nil
		if errors.Is(err, ErrConflict) {
			log.Warn("ledger changed in the store; reloading next round")
		}
		return nil, err
	}
	s.ledger = next
	s.status.NextRound = next.Round
	s.status.Jobs = maps.Clone(next.Jobs)
	log.Info("round done", "trigger", kind, "jobs", len(pr.instance.Jobs), "running", len(assignment), "plan", plan.GoString(),
		"api_calls", snap.Calls+res.Calls, "watch_calls", snap.WatchCalls, "duration", s.opts.now().Sub(start))
	return rec, nil
}

// advance applies Eq. 5 for the round and fills the audit lines. A job
// chosen this round is counted as achieving its throughput on the chosen
// model for a whole round: progress is estimated as rounds run times the
// declared throughput until jobs report progress (our fallback estimate).
// Each job's credit is kept in its record, for an early next round to cut.
func advance(pr *problem, dec *allocator.Decision, plan *Plan, next *Ledger, rec *RoundRecord) {
	fs := &pr.instance.Fairness
	t := pr.instance.Round
	before := make(map[string]float64, len(fs.Jobs))
	for id := range fs.Jobs {
		before[id] = fs.Rho(id)
	}
	gpus := make(map[string]int, len(pr.instance.Jobs))
	for _, j := range pr.instance.Jobs {
		gpus[j.ID] = j.GPUs
	}
	achieved := map[string]float64{}
	for _, jd := range dec.Jobs {
		if jd.Model != "" {
			achieved[jd.ID] = jd.Chosen.Throughput
		}
	}
	fs.Advance(t, achieved)
	for _, jd := range dec.Jobs {
		r := next.Jobs[jd.ID]
		if st, ok := fs.Jobs[jd.ID]; ok {
			r.JobState = st
			// Mu and the fair share do not change with rho, so the step
			// is the one Advance took.
			r.Credit = &Credit{RhoFrom: before[jd.ID], RhoStep: st.Mu(t) * (st.FairShare() - achieved[jd.ID]), Done: achieved[jd.ID]}
		}
		if jd.Model != "" {
			r.Done += achieved[jd.ID]
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
		rec.Jobs = append(rec.Jobs, JobAudit{
			ID: jd.ID, User: r.User, Weight: r.Weight, Model: jd.Model, GPUs: gpus[jd.ID], Reason: string(jd.Reason), Action: plan.ActionOf(jd.ID),
			RhoBefore: before[jd.ID], RhoAfter: fs.Rho(jd.ID), Chosen: jd.Chosen, Options: jd.Options,
		})
	}
	for id, why := range pr.noFit {
		rec.Jobs = append(rec.Jobs, JobAudit{ID: id, User: next.Jobs[id].User, Reason: why, Action: plan.ActionOf(id)})
	}
	rec.TenantWeights = pr.weighted
	sort.Slice(rec.Jobs, func(a, b int) bool { return rec.Jobs[a].ID < rec.Jobs[b].ID })
}

// idleGPUs is how many of the models' GPUs a decision leaves unused.
func idleGPUs(models []allocator.Model, usage map[string]int) int {
	idle := 0
	for _, m := range models {
		idle += max(0, m.GPUs-usage[m.Name])
	}
	return idle
}
