package live

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// Service runs the round loop on a schedule against a live cluster: a round
// every R, early rounds when the cluster changes, leadership, and the
// status the HTTP API serves. The rounds themselves are the loop's.
type Service struct {
	loop *loop.Loop
	opts options

	mu     sync.Mutex
	status Status
}

type options struct {
	log    hclog.Logger
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	onDone func(*loop.RoundRecord, error)
	minGap time.Duration
}

// Option configures a Service.
type Option func(*options)

// WithLogger sets the logger (default: a null logger).
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the clock the schedule reads (default: time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithTimer sets how Run waits for the next round (default: time.After);
// with WithClock, tests and replays run the schedule on virtual time.
func WithTimer(after func(time.Duration) <-chan time.Time) Option {
	return func(o *options) { o.after = after }
}

// WithEarlyRounds lets Run start a round before the schedule when the
// loop's Observer is also a loop.Watcher and it reports a change worth one
// (see loop.WantEarly), at least gap after the previous round's start. A gap of
// 0 (the default) turns early rounds off.
func WithEarlyRounds(gap time.Duration) Option { return func(o *options) { o.minGap = gap } }

// WithRoundHook calls f after every round with its record (nil if the round
// failed before recording) and error; metrics use it.
func WithRoundHook(f func(*loop.RoundRecord, error)) Option { return func(o *options) { o.onDone = f } }

// New returns a Service over the round loop l.
func New(l *loop.Loop, opts ...Option) *Service {
	o := options{log: hclog.NewNullLogger(), now: time.Now, after: time.After}
	for _, f := range opts {
		f(&o)
	}
	return &Service{loop: l, opts: o, status: Status{NextRound: -1, Policy: l.Policy().Name()}}
}

// Loop is the round loop the service runs.
func (s *Service) Loop() *loop.Loop { return s.loop }

// Status is the service's state for the status endpoint.
type Status struct {
	// Policy is the name of the policy that decides the rounds.
	Policy string `json:"policy"`
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
	Applied map[loop.Action]int `json:"applied"`
	// Leading is true while this replica holds the leader lock and runs rounds.
	Leading bool `json:"leading"`
	// NextRound is the round the ledger will run next (-1 before loading).
	NextRound int    `json:"next_round"`
	LastError string `json:"last_error,omitempty"`
	// LockError says why this replica cannot take the leader lock (SetLockError), with the
	// fix; empty while it leads or waits behind a leader.
	LockError string            `json:"lock_error,omitempty"`
	Last      *loop.RoundRecord `json:"last_round,omitempty"`
	// Jobs are the ledger's per-job records.
	Jobs map[string]loop.JobRecord `json:"jobs"`
}

// Problem says why the replica is unhealthy, as /v1/health answers: "cannot lead" with
// LockError, "failing" with LastError; "" while healthy.
func (st Status) Problem() (status, reason string) {
	switch {
	case st.LockError != "":
		return "cannot lead", st.LockError
	case st.LastError != "":
		return "failing", st.LastError
	}
	return "", ""
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
	s.status.Leading = leading
	s.mu.Unlock()
	if leading {
		s.loop.Forget()
	}
}

// SetLockError records why this replica cannot take the leader lock, nil once it can again
// (consulstore.Store.WithLockHealth calls it): /v1/health answers 503 with it meanwhile (and
// fft_healthy is 0, the status page says it), so
// a deployment of a replica that could never lead does not turn healthy. A change is logged.
func (s *Service) SetLockError(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	s.mu.Lock()
	changed := s.status.LockError != msg
	s.status.LockError = msg
	s.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		s.opts.log.Error("cannot take the leader lock: /v1/health answers 503 until it can", "error", err)
	default:
		s.opts.log.Info("can take the leader lock again: /v1/health answers 200")
	}
}

// Run runs a round at once and then every `every` until ctx ends; with
// early rounds on (WithEarlyRounds) and a Watcher, a change worth it starts
// a round sooner. A failed round is logged and counted; the next one starts
// afresh.
func (s *Service) Run(ctx context.Context, every time.Duration) error {
	triggers := s.watch(ctx)
	sch := &loop.Schedule{Every: every, Gap: s.opts.minGap}
	kind, jobs := loop.TriggerSchedule, []string(nil)
	for {
		start := s.opts.now()
		rec, _ := s.runRound(ctx, kind, jobs)
		sch.Ran(start, rec)
		for waiting := true; waiting; {
			due, why := sch.Next()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-s.opts.after(due.Sub(s.opts.now())):
				kind, jobs, waiting = why, nil, false
				if why != loop.TriggerSchedule {
					jobs = sch.Jobs()
				}
			case tr := <-triggers:
				if sch.Offer(tr, s.opts.now()) {
					at, _ := sch.Next()
					s.opts.log.Debug("early round due", "trigger", tr.Kind, "job", tr.Job, "at", at)
				}
			}
		}
	}
}

// watch starts the Observer's Watcher when early rounds are on and returns
// the channel it reports on; nil (a channel that never delivers) otherwise.
func (s *Service) watch(ctx context.Context) <-chan loop.Trigger {
	w, ok := s.loop.Observer().(loop.Watcher)
	if !ok || s.opts.minGap <= 0 {
		return nil
	}
	ch := make(chan loop.Trigger, 64)
	go func() {
		if err := w.Watch(ctx, ch); err != nil && ctx.Err() == nil {
			s.opts.log.Warn("watching the cluster stopped: only regular rounds run", "error", err)
		}
	}()
	return ch
}

// RunRound runs one round (recorded as loop.TriggerManual).
func (s *Service) RunRound(ctx context.Context) (*loop.RoundRecord, error) {
	return s.runRound(ctx, loop.TriggerManual, nil)
}

// runRound runs one round of the loop and counts it in the status.
func (s *Service) runRound(ctx context.Context, kind loop.TriggerKind, jobs []string) (*loop.RoundRecord, error) {
	rec, err := s.loop.RunRound(ctx, kind, jobs)
	s.count(rec, err)
	if s.opts.onDone != nil {
		s.opts.onDone(rec, err)
	}
	return rec, err
}

// count adds a round's outcome to the status.
func (s *Service) count(rec *loop.RoundRecord, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.status
	st.Rounds++
	if err != nil {
		st.Failures++
		st.LastError = err.Error()
		return
	}
	st.LastError = ""
	st.Last = rec
	st.APICalls += rec.ObserveCalls + rec.Apply.Calls + rec.WatchCalls
	st.Conflicts += len(rec.Apply.Conflicts)
	st.ApplyErrors += len(rec.Apply.Errors)
	for a, n := range rec.Apply.Applied {
		if st.Applied == nil {
			st.Applied = map[loop.Action]int{}
		}
		st.Applied[a] += n
	}
	if rec.Trigger.Early() {
		st.EarlyRounds++
	}
	if l := s.loop.Ledger(); l != nil {
		st.NextRound = l.Round
		st.Jobs = maps.Clone(l.Jobs)
	}
}
