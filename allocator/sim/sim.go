package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/policy"
)

// Config describes one simulated run.
type Config struct {
	Cluster []ClusterModel
	// RoundSeconds overrides the policy's own round length (policy.Rounder);
	// 0 uses the policy's, else DefaultRoundSeconds.
	RoundSeconds float64
	// RestartSeconds is charged (GPUs idle, no progress) to a job that
	// starts a round on a different model than it last ran on, or resumes
	// after a preemption. 0 reproduces Gavel's simulator.
	RestartSeconds float64
	// Window, when Hi > Lo, is the range [Lo, Hi) of job indices measured;
	// the run stops once they have all finished (Gavel's continuous mode
	// measures 4000-5000). Otherwise every job is measured and the run
	// ends when the workload is done.
	Window Window
	// MaxRounds stops a run that would not end (0 = 10 million).
	MaxRounds int
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
type EventKind string

// Event kinds of the log.
const (
	EvArrive  EventKind = "arrive"
	EvReject  EventKind = "reject"
	EvRun     EventKind = "run"     // starts running after not running
	EvMigrate EventKind = "migrate" // runs on another model than last round
	EvPreempt EventKind = "preempt" // ran last round, waits this round
	EvFinish  EventKind = "finish"
)

// Event is one entry of the run's log. Time is seconds.
type Event struct {
	Time   float64   `json:"t"`
	Round  int       `json:"round"`
	Kind   EventKind `json:"kind"`
	Job    int       `json:"job"` // index into Log.Jobs
	Model  string    `json:"model,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// RoundRecord is one round's totals.
type RoundRecord struct {
	Round  int     `json:"round"`
	Start  float64 `json:"start"`
	Active int     `json:"active"`
	// BusyGPUSeconds is GPU time spent on jobs (restart time included);
	// CapacityGPUSeconds the GPUs times the round length.
	BusyGPUSeconds     float64       `json:"busy_gpu_s"`
	CapacityGPUSeconds float64       `json:"capacity_gpu_s"`
	Solve              time.Duration `json:"solve_ns"`
}

// Log is everything a run produced; metrics are computed from it alone.
type Log struct {
	Policy       string         `json:"policy"`
	Cluster      []ClusterModel `json:"cluster"`
	RoundSeconds float64        `json:"round_seconds"`
	Window       Window         `json:"window"`
	Jobs         []JobSpec      `json:"jobs"`
	Events       []Event        `json:"events"`
	Rounds       []RoundRecord  `json:"rounds"`
	// Stopped is why the run ended early ("" when it completed).
	Stopped string        `json:"stopped,omitempty"`
	Wall    time.Duration `json:"wall_ns"`
	// PolicyStats are the policy's own counters (policy.Reporter).
	PolicyStats map[string]float64 `json:"policy_stats,omitempty"`
}

type jobState struct {
	idx      int
	spec     *JobSpec
	pj       policy.Job
	running  string // model last round, "" if waiting
	last     string
	arrRound int
	rejected bool // refused by the policy (policy.Rejecter)
}

// Run simulates pol over the jobs of src on cfg.Cluster. It is
// deterministic for a deterministic policy and source. It returns an error
// when the policy fails or breaks the round's rules (policy.Check).
func Run(ctx context.Context, pol policy.Policy, src Source, cfg Config) (*Log, error) {
	start := time.Now()
	R := cfg.RoundSeconds
	if R <= 0 {
		if r, ok := pol.(policy.Rounder); ok && r.RoundSeconds() > 0 {
			R = r.RoundSeconds()
		} else {
			R = DefaultRoundSeconds
		}
	}
	if len(cfg.Cluster) == 0 {
		return nil, errors.New("sim: empty cluster")
	}
	maxRounds := cfg.MaxRounds
	if maxRounds <= 0 {
		maxRounds = 10_000_000
	}
	models := make([]policy.Model, len(cfg.Cluster))
	totalGPUs := 0
	for i, m := range cfg.Cluster {
		models[i] = policy.Model{Name: m.Name, GPUs: m.GPUs, MemoryGB: m.MemoryGB}
		totalGPUs += m.GPUs
	}
	lg := &Log{Policy: pol.Name(), Cluster: cfg.Cluster, RoundSeconds: R, Window: cfg.Window}
	obs, _ := pol.(policy.Observer)
	rej, _ := pol.(policy.Rejecter)
	windowed := cfg.Window.Hi > cfg.Window.Lo
	measuredDone, measuredTotal := 0, 0
	if windowed {
		measuredTotal = cfg.Window.Hi - cfg.Window.Lo
	}
	inWindow := func(idx int) bool { return !windowed || (idx >= cfg.Window.Lo && idx < cfg.Window.Hi) }

	var (
		pending   *JobSpec
		srcDone   bool
		active    []*jobState
		finished  int
		snap      = &policy.Snapshot{Models: models, RoundSeconds: R}
		achieved  = map[string]float64{}
		byID      = map[string]*jobState{}
		progEvery = cfg.ProgressEvery
	)
	if progEvery <= 0 {
		progEvery = 1000
	}
	pull := func() error {
		if pending != nil || srcDone {
			return nil
		}
		j, err := src.Next()
		if err == io.EOF {
			srcDone = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("sim: reading workload: %w", err)
		}
		pending = &j
		return nil
	}
	fits := func(j *JobSpec) bool {
		pj := policy.Job{GPUs: j.GPUs, Rate: j.Rate}
		for i := range models {
			if pj.Fits(&models[i]) {
				return true
			}
		}
		return false
	}
	round := 0
	for ; round < maxRounds; round++ {
		if err := ctx.Err(); err != nil {
			lg.Stopped = err.Error()
			break
		}
		now := float64(round) * R
		// Admit every job that arrived by the start of this round.
		for {
			if err := pull(); err != nil {
				return nil, err
			}
			if pending == nil || pending.Arrival > now {
				break
			}
			spec := *pending
			pending = nil
			spec.Index = len(lg.Jobs)
			lg.Jobs = append(lg.Jobs, spec)
			idx := len(lg.Jobs) - 1
			lg.Events = append(lg.Events, Event{Time: spec.Arrival, Round: round, Kind: EvArrive, Job: idx})
			if !fits(&lg.Jobs[idx]) {
				lg.Events = append(lg.Events, Event{Time: now, Round: round, Kind: EvReject, Job: idx, Reason: "fits no GPU model of the cluster"})
				if inWindow(idx) && windowed {
					measuredDone++
				}
				continue
			}
			js := &jobState{idx: idx, spec: &lg.Jobs[idx], arrRound: round}
			js.pj = policy.Job{ID: spec.ID, Arrival: spec.Arrival, ArrivalRound: round, GPUs: spec.GPUs, Work: spec.Work, Rate: spec.Rate, RunSeconds: map[string]float64{}}
			active = append(active, js)
			byID[spec.ID] = js
		}
		if windowed && measuredDone >= measuredTotal {
			break
		}
		if len(active) == 0 {
			if pending == nil && srcDone {
				break
			}
			// Idle: jump to the round in which the next job arrives.
			next := int(math.Ceil(pending.Arrival / R))
			if next > round {
				round = next - 1
			}
			continue
		}
		snap.Round, snap.Now = round, now
		snap.Jobs = snap.Jobs[:0]
		for _, js := range active {
			js.pj.Running = js.running
			js.pj.LastModel = js.last
			snap.Jobs = append(snap.Jobs, js.pj)
		}
		t0 := time.Now()
		a, err := schedule(ctx, pol, snap)
		solve := time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("sim: policy %q, round %d: %w", pol.Name(), round, err)
		}
		if err := policy.Check(snap, a); err != nil {
			return nil, fmt.Errorf("sim: policy %q, round %d: %w", pol.Name(), round, err)
		}
		if rej != nil {
			for id, why := range rej.Rejected() {
				if js := byID[id]; js != nil {
					lg.Events = append(lg.Events, Event{Time: now, Round: round, Kind: EvReject, Job: js.idx, Reason: why})
					js.rejected = true
					delete(a, id)
				}
			}
		}
		rec := RoundRecord{Round: round, Start: now, Active: len(active), CapacityGPUSeconds: float64(totalGPUs) * R, Solve: solve}
		clear(achieved)
		for _, js := range active {
			if js.rejected {
				continue
			}
			m, runs := a[js.pj.ID]
			prev := js.running
			if !runs {
				if prev != "" {
					lg.Events = append(lg.Events, Event{Time: now, Round: round, Kind: EvPreempt, Job: js.idx, Model: prev})
				}
				js.running = ""
				continue
			}
			penalty := 0.0
			switch {
			case prev == "" && js.last == "":
				lg.Events = append(lg.Events, Event{Time: now, Round: round, Kind: EvRun, Job: js.idx, Model: m})
			case prev == "":
				lg.Events = append(lg.Events, Event{Time: now, Round: round, Kind: EvRun, Job: js.idx, Model: m})
				penalty = cfg.RestartSeconds
			case prev != m:
				lg.Events = append(lg.Events, Event{Time: now, Round: round, Kind: EvMigrate, Job: js.idx, Model: m})
				penalty = cfg.RestartSeconds
			}
			penalty = math.Min(penalty, R)
			rate := js.pj.Rate[m]
			left := js.pj.Work - js.pj.Done
			used := R
			work := rate * (R - penalty)
			if work >= left {
				work = left
				used = penalty + left/rate
			}
			js.pj.Done += work
			js.pj.Attained += float64(js.pj.GPUs) * used
			js.pj.RunSeconds[m] += used
			achieved[js.pj.ID] = work
			rec.BusyGPUSeconds += float64(js.pj.GPUs) * used
			js.running, js.last = m, m
			if js.pj.Done >= js.pj.Work {
				lg.Events = append(lg.Events, Event{Time: now + used, Round: round, Kind: EvFinish, Job: js.idx, Model: m})
			}
		}
		lg.Rounds = append(lg.Rounds, rec)
		if obs != nil {
			obs.Observe(snap, a, achieved)
		}
		kept := active[:0]
		for _, js := range active {
			if js.rejected {
				delete(byID, js.pj.ID)
				if windowed && inWindow(js.idx) {
					measuredDone++
				}
				continue
			}
			if js.pj.Done >= js.pj.Work {
				finished++
				delete(byID, js.pj.ID)
				if windowed && inWindow(js.idx) {
					measuredDone++
				}
				continue
			}
			kept = append(kept, js)
		}
		clear(active[len(kept):])
		active = kept
		if cfg.Progress != nil && round%progEvery == 0 {
			cfg.Progress(Progress{Policy: pol.Name(), Round: round, Now: now, Active: len(active), Finished: finished, Measured: measuredDone, Window: measuredTotal})
		}
	}
	if round >= maxRounds && lg.Stopped == "" {
		lg.Stopped = fmt.Sprintf("round limit %d reached", maxRounds)
	}
	lg.Wall = time.Since(start)
	if r, ok := pol.(policy.Reporter); ok {
		lg.PolicyStats = r.PolicyStats()
	}
	return lg, nil
}

// PanicError is a policy panic recovered at the round boundary; the run
// fails, the process does not.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("policy panicked: %v", e.Value) }

func schedule(ctx context.Context, pol policy.Policy, s *policy.Snapshot) (a policy.Assignment, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: string(debug.Stack())}
		}
	}()
	return pol.Schedule(ctx, s)
}
