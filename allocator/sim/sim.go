package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// Config describes one simulated run.
type Config struct {
	Cluster []allocator.Model
	// HostGPUs is the GPUs of each host, by model name: a model of 12 GPUs
	// with 4 here is 3 hosts of 4 (fftctl simulate -cluster v100=3x4). A
	// model absent (or 0) is one host of all its GPUs. A job larger than the
	// smallest host is split into allocations of that size, as a jobspec
	// with a task group count > 1 would be.
	HostGPUs map[string]int
	// RoundSeconds overrides the policy's own round length (policy.Rounder);
	// 0 uses the policy's, else DefaultRoundSeconds.
	RoundSeconds float64
	// RestartSeconds is charged (GPUs idle, no progress) to a job that
	// starts a round on a different model than it last ran on, or resumes
	// after a preemption. 0 reproduces Gavel's simulator.
	RestartSeconds float64
	// MinRoundGapSeconds, when > 0, runs the rounds on the live
	// allocator's schedule (loop.Schedule, fft-allocator -min-round-gap):
	// a round every R, and an early one, at least this long after the last
	// start, when a job arrives while the last round left GPUs idle or a
	// job finishes while others wait. Virtual time then runs from event to
	// event (early.go). 0 runs a round every R exactly and admits arrivals
	// at round starts only, as Gavel's simulator.
	MinRoundGapSeconds float64
	// Window, when Hi > Lo, is the range [Lo, Hi) of job indices measured;
	// the run stops once they have all finished (Gavel's continuous mode
	// measures 4000-5000). Otherwise every job is measured and the run
	// ends when the workload is done.
	Window Window
	// Engine is the round engine's configuration the loop builds instances
	// with (nil: allocator.DefaultConfig); its round length and restart
	// time are the run's. An FFT policy takes its objective from its own
	// configuration and the cluster's facts from this one.
	Engine *allocator.Config
	// TenantOf names each job's tenant: the Nomad namespace it is
	// submitted into (and its fft.user, a label); nil leaves every job in
	// Namespace. TenantShares are the operator's shares
	// between tenants (nil: none, the paper's per-job reference).
	TenantOf     func(workload.JobSpec) string
	TenantShares *loop.TenantShares
	// KeepRecords keeps every round's full record (every job's cost terms)
	// in Log.Records, as the live audit log has them; off, rounds are
	// recorded lean, which keeps long simulations fast.
	KeepRecords bool
	// Learn runs the jobs without declared throughputs: the loop learns
	// them online from the true progress the cluster reports (learn.go).
	Learn bool
	// Adversaries make a fraction of the jobs lie, one kind of lie each
	// (adversary.go); none by default.
	Adversaries []Adversary
	// MaxRounds stops a run that would not end (0 = 10 million).
	MaxRounds int
	// MaxSimSeconds stops a run once its simulated clock reaches it (0:
	// no limit), so that a policy that never finishes some jobs (an
	// unpriced objective at high restart costs) still ends a run on its
	// own; the jobs left are counted unfinished, as after MaxRounds.
	MaxSimSeconds float64
	// Progress, if set, is called about every ProgressEvery rounds.
	Progress      func(p Progress)
	ProgressEvery int
}

// Window is a range of job indices.
type Window struct{ Lo, Hi int }

// DefaultRoundSeconds is used when neither the config nor the policy says.
const DefaultRoundSeconds = 300

// Progress reports how far a run is.
type Progress struct {
	Policy   string
	Round    int
	Now      float64
	Active   int
	Finished int
	Measured int // measured jobs finished
	Window   int // measured jobs in total (0: unknown)
}

// EventKind is what happened to a job.
type EventKind uint8

// Event kinds of the log.
const (
	EvArrive  EventKind = iota
	EvReject            // fits no GPU model of the cluster
	EvRun               // starts running after not running
	EvMigrate           // runs on another model than last round
	EvPreempt           // ran last round, waits this round
	EvMove              // put on other hosts of the same model (consolidation)
	EvFinish
)

var eventKinds = [...]string{"arrive", "reject", "run", "migrate", "preempt", "move", "finish"}

// String is the kind's name, as the log's readers print it.
func (k EventKind) String() string {
	if int(k) < len(eventKinds) {
		return eventKinds[k]
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// NoModel is Event.Model for events on no model (arrive, reject).
const NoModel = -1

// Event is one entry of the run's log. Time is seconds. It is 24 bytes:
// a long run of a policy that preempts every round logs tens of millions
// of them (the paper's fft at 120 s restarts: 15 million in 25,000
// rounds), so indices stand for the job and the model.
type Event struct {
	Time  float64 `json:"t"`
	Round int32   `json:"round"`
	Job   int32   `json:"job"`   // index into Log.Jobs
	Model int16   `json:"model"` // index into Log.Cluster, or NoModel
	// Hosts is how many hosts a run, migrate or move event puts the job on.
	Hosts uint16    `json:"hosts,omitempty"`
	Kind  EventKind `json:"kind"`
}

// RoundStats is one round's totals: what the simulated cluster measured,
// not the loop's record of the decision (loop.RoundRecord, in Log.Records).
type RoundStats struct {
	Round  int     `json:"round"`
	Start  float64 `json:"start"`
	Active int     `json:"active"`
	// Seconds is how long the round lasted: R, or less when an early round
	// followed it (Config.MinRoundGapSeconds).
	Seconds float64 `json:"seconds"`
	// Trigger is why the round ran (loop.TriggerManual with fixed rounds).
	Trigger loop.TriggerKind `json:"trigger"`
	// BusyGPUSeconds is GPU time spent on jobs (restart time included);
	// CapacityGPUSeconds the GPUs times the round's Seconds.
	BusyGPUSeconds     float64       `json:"busy_gpu_s"`
	CapacityGPUSeconds float64       `json:"capacity_gpu_s"`
	Solve              time.Duration `json:"solve_ns"`
	// Wall is the whole round in the simulator (the loop's phases, the
	// placement's re-decides and the cluster's bookkeeping); Place the
	// placement stage alone. With Solve they say where a slow round's time
	// went. Status, Gap and Nodes are the round's decision's (Status ""
	// for a policy that does not solve).
	Wall   time.Duration `json:"wall_ns"`
	Place  time.Duration `json:"place_ns,omitempty"`
	Status string        `json:"status,omitempty"`
	Gap    float64       `json:"gap,omitempty"`
	Nodes  int           `json:"nodes,omitempty"`
	// IdlePlaceableGPUSeconds is GPU time left idle on hosts where a
	// waiting job's allocation would have fit (Cluster.placeableIdle).
	IdlePlaceableGPUSeconds float64 `json:"idle_placeable_gpu_s,omitempty"`
}

// Log is everything a run produced; metrics are computed from it alone.
type Log struct {
	Policy string `json:"policy"`
	// Learn is Config.Learn: the policy saw learned throughputs.
	Learn    bool              `json:"learn,omitempty"`
	Cluster  []allocator.Model `json:"cluster"`
	HostGPUs map[string]int    `json:"host_gpus,omitempty"`
	// Placement is the placement style the run used (policy.PlacementOf).
	Placement    string  `json:"placement,omitempty"`
	RoundSeconds float64 `json:"round_seconds"`
	// MinRoundGapSeconds is Config.MinRoundGapSeconds (0: fixed rounds).
	MinRoundGapSeconds float64            `json:"min_round_gap_s"`
	Window             Window             `json:"window"`
	Jobs               []workload.JobSpec `json:"jobs"`
	Events             []Event            `json:"events"`
	Rounds             []RoundStats       `json:"rounds"`
	// Stopped is why the run ended early ("" when it completed).
	Stopped string        `json:"stopped,omitempty"`
	Wall    time.Duration `json:"wall_ns"`
	// PolicyStats are the policy's own counters (policy.Reporter).
	PolicyStats map[string]float64 `json:"policy_stats,omitempty"`
	// Records are the loop's round records, with Config.KeepRecords.
	Records []*loop.RoundRecord `json:"-"`
	// Liars are the lying jobs by ID, with their lie (Config.Adversaries);
	// Parent maps each part of a split job to the job it was.
	Liars  map[string]AdversaryKind `json:"liars,omitempty"`
	Parent map[string]string        `json:"parent,omitempty"`
}

// ModelName is the name of e's model ("" for NoModel).
func (lg *Log) ModelName(e Event) string {
	if e.Model == NoModel {
		return ""
	}
	return lg.Cluster[e.Model].Name
}

// Run simulates pol over the jobs of src on cfg.Cluster. The rounds are
// the allocator's own (package loop): the simulator only provides the
// cluster (Cluster, with a virtual clock) and an in-memory store. It is
// deterministic for a deterministic policy and source. It returns an error
// when a round fails, the policy's failure or breach of the round's rules
// (policy.Check) included.
func Run(ctx context.Context, pol policy.Policy, src workload.Source, cfg Config) (*Log, error) {
	start := time.Now()
	R := roundSeconds(pol, cfg)
	if len(cfg.Cluster) == 0 {
		return nil, errors.New("sim: empty cluster")
	}
	if len(cfg.Cluster) > math.MaxInt16 {
		return nil, fmt.Errorf("sim: %d GPU models, over the %d the log's events can name: give fewer models", len(cfg.Cluster), math.MaxInt16)
	}
	maxRounds := cfg.MaxRounds
	if maxRounds <= 0 {
		maxRounds = 10_000_000
	}
	if maxRounds > math.MaxInt32 {
		return nil, fmt.Errorf("sim: MaxRounds %d is over the log's %d: give a smaller limit", maxRounds, math.MaxInt32)
	}
	if cfg.MaxSimSeconds < 0 {
		return nil, fmt.Errorf("sim: MaxSimSeconds %g is negative: give 0 for no limit or a time > 0", cfg.MaxSimSeconds)
	}
	if cfg.MinRoundGapSeconds < 0 {
		return nil, fmt.Errorf("sim: MinRoundGapSeconds %g is negative: give 0 for fixed rounds or a gap > 0", cfg.MinRoundGapSeconds)
	}
	if err := checkHosts(cfg); err != nil {
		return nil, err
	}
	lg := &Log{Policy: pol.Name(), Learn: cfg.Learn, Cluster: cfg.Cluster, HostGPUs: cfg.HostGPUs, RoundSeconds: R, MinRoundGapSeconds: cfg.MinRoundGapSeconds, Window: cfg.Window}
	c := newCluster(cfg, R, lg)
	c.style = policy.PlacementOf(pol.Name())
	lg.Placement = string(c.style)
	if len(cfg.Adversaries) > 0 {
		src = &adversarySource{src: src, advs: cfg.Adversaries, lg: lg}
	}
	store := &store{MemStore: loop.NewMemStore(cfg.KeepRecords), cluster: c}
	engine := cfg.Engine
	if engine == nil {
		d := allocator.DefaultConfig()
		engine = &d
	}
	ecfg := *engine
	ecfg.RoundSeconds, ecfg.RestartSeconds = R, cfg.RestartSeconds
	rec := loop.RecordLean
	if cfg.KeepRecords {
		rec = loop.RecordFull
	}
	rounds := loop.New(c, c, store, loop.WithPolicy(pol), loop.WithConfig(ecfg), loop.WithRecording(rec), loop.WithTenantShares(cfg.TenantShares),
		loop.WithClock(c.wall), loop.WithPlacement(c.style))
	adm := &admission{src: src, c: c, lg: lg, cfg: cfg}
	sch := newTimer(cfg, R)
	progEvery := cfg.ProgressEvery
	if progEvery <= 0 {
		progEvery = 1000
	}
	round := 0
	for ; round < maxRounds; round++ {
		roundStart := time.Now()
		if err := ctx.Err(); err != nil {
			lg.Stopped = err.Error()
			break
		}
		if err := adm.admit(round); err != nil {
			return nil, err
		}
		if adm.over() {
			break
		}
		if cfg.MaxSimSeconds > 0 && c.now >= cfg.MaxSimSeconds {
			lg.Stopped = fmt.Sprintf("simulated time limit %s reached", simTime(cfg.MaxSimSeconds))
			break
		}
		kind, why := sch.due()
		rr, err := rounds.RunRound(ctx, kind, why)
		if err != nil && ctx.Err() != nil {
			// Interrupted (Ctrl-C) inside a round: the run so far is
			// kept, as one stopped between rounds is.
			lg.Stopped = ctx.Err().Error()
			break
		}
		if err != nil {
			return nil, fmt.Errorf("sim: policy %q, round %d: %w", pol.Name(), round, err)
		}
		length, err := sch.next(adm, rr)
		if err != nil {
			return nil, err
		}
		rs := RoundStats{Round: round, Start: c.now, Active: len(c.active), Seconds: length.seconds, Trigger: kind,
			CapacityGPUSeconds: float64(c.capacity()) * length.seconds, Solve: time.Duration(rr.SolveSeconds * float64(time.Second))}
		rs.IdlePlaceableGPUSeconds = float64(c.placeableIdle()) * length.seconds
		rs.BusyGPUSeconds = c.run(length)
		adm.count()
		rs.Place = time.Duration(rr.Phases["place"] * float64(time.Second))
		if rr.Status == solver.Optimal.String() || rr.Status == solver.Feasible.String() {
			rs.Status, rs.Gap, rs.Nodes = rr.Status, rr.Gap, rr.Nodes
		}
		rs.Wall = time.Since(roundStart)
		lg.Rounds = append(lg.Rounds, rs)
		if cfg.Progress != nil && round%progEvery == 0 {
			cfg.Progress(Progress{Policy: pol.Name(), Round: round, Now: rs.Start, Active: len(c.active), Finished: adm.finished,
				Measured: adm.measuredDone, Window: adm.measuredTotal()})
		}
	}
	if round >= maxRounds && lg.Stopped == "" {
		lg.Stopped = fmt.Sprintf("round limit %d reached", maxRounds)
	}
	lg.Wall = time.Since(start)
	if r, ok := pol.(policy.Reporter); ok {
		lg.PolicyStats = r.PolicyStats()
	}
	lg.Records = store.Records()
	return lg, nil
}

// simTime writes seconds of simulated time as a duration ("1000h0m0s").
func simTime(seconds float64) string {
	return time.Duration(seconds * float64(time.Second)).String()
}

// roundSeconds is the run's round length: the config's, else the policy's
// own (policy.Rounder), else DefaultRoundSeconds.
func roundSeconds(pol policy.Policy, cfg Config) float64 {
	if cfg.RoundSeconds > 0 {
		return cfg.RoundSeconds
	}
	if r, ok := pol.(policy.Rounder); ok && r.RoundSeconds() > 0 {
		return r.RoundSeconds()
	}
	return DefaultRoundSeconds
}

// store is the loop's in-memory store, with the cluster's true progress as
// the jobs' reports.
type store struct {
	*loop.MemStore
	cluster *Cluster
}

func (s *store) Progress(ctx context.Context) (map[string]float64, error) {
	return s.cluster.Progress(ctx)
}

// admission moves the workload's jobs into the cluster as they arrive and
// counts the measured ones that ended.
type admission struct {
	src workload.Source
	c   *Cluster
	lg  *Log
	cfg Config
	// ahead are the workload's next jobs, read but not arrived yet, in
	// arrival order (early rounds look at more than the next one).
	ahead   []workload.JobSpec
	srcDone bool
	// finished counts jobs done; measuredDone the measured ones that
	// finished or were rejected.
	finished, measuredDone, seenFinish int
}

func (a *admission) windowed() bool { return a.cfg.Window.Hi > a.cfg.Window.Lo }

func (a *admission) measuredTotal() int {
	if !a.windowed() {
		return 0
	}
	return a.cfg.Window.Hi - a.cfg.Window.Lo
}

func (a *admission) inWindow(idx int) bool {
	return a.windowed() && idx >= a.cfg.Window.Lo && idx < a.cfg.Window.Hi
}

// peek returns the k-th job not yet arrived (k from 0), reading the
// workload as far as needed; nil when the workload ends before it.
func (a *admission) peek(k int) (*workload.JobSpec, error) {
	for len(a.ahead) <= k && !a.srcDone {
		j, err := a.src.Next()
		if err == io.EOF {
			a.srcDone = true
			break
		}
		if err != nil {
			return nil, fmt.Errorf("sim: reading workload: %w", err)
		}
		a.ahead = append(a.ahead, j)
	}
	if k >= len(a.ahead) {
		return nil, nil
	}
	return &a.ahead[k], nil
}

// admit adds every job that arrived by the start of round; one that fits
// no model of the cluster is rejected, as the allocator holds it forever.
func (a *admission) admit(round int) error {
	now := a.c.now
	for {
		next, err := a.peek(0)
		if err != nil {
			return err
		}
		if next == nil || !a.c.arrived(next.Arrival) {
			return nil
		}
		spec := *next
		a.ahead = a.ahead[1:]
		spec.Index = len(a.lg.Jobs)
		a.lg.Jobs = append(a.lg.Jobs, spec)
		idx := len(a.lg.Jobs) - 1
		a.lg.Events = append(a.lg.Events, Event{Time: spec.Arrival, Round: int32(round), Kind: EvArrive, Job: int32(idx), Model: NoModel})
		if !a.c.fits(&a.lg.Jobs[idx]) {
			a.lg.Events = append(a.lg.Events, Event{Time: now, Round: int32(round), Kind: EvReject, Job: int32(idx), Model: NoModel})
			if a.inWindow(idx) {
				a.measuredDone++
			}
			continue
		}
		a.c.admit(idx, &a.lg.Jobs[idx])
	}
}

// count takes the jobs that finished in the round just run.
func (a *admission) count() {
	for _, j := range a.c.finished {
		a.finished++
		if a.inWindow(j.idx) {
			a.measuredDone++
		}
	}
}

// over reports whether the run is done: every measured job ended, or the
// workload is over and the cluster empty.
func (a *admission) over() bool {
	if a.windowed() {
		return a.measuredDone >= a.measuredTotal()
	}
	return len(a.ahead) == 0 && a.srcDone && len(a.c.active) == 0
}
