package policy

import (
	"context"
	"sort"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// Model is one GPU model and how many of its GPUs the round may use: the
// round engine's own type, so snapshots and instances share it.
type Model = allocator.Model

// Job is one active job as a policy sees it at the start of a round.
// Work is in the job's own units (steps or epochs); RatePerSecond converts it to time.
type Job struct {
	ID string `json:"id"`
	// ArrivalSeconds is the arrival time in seconds on the round loop's
	// clock, ArrivalRound the first round in which the job was present.
	ArrivalSeconds float64 `json:"arrival_s"`
	ArrivalRound   int     `json:"arrival_round"`
	// GPUs is the gang size: all of one model, all at once.
	GPUs int     `json:"gpus"`
	Work float64 `json:"work"`
	Done float64 `json:"done"`
	// RatePerSecond is work units per second with GPUs GPUs of the named
	// model; absent or 0 means the job cannot run there.
	RatePerSecond map[string]float64 `json:"rate_per_s"`
	MemoryGB      float64            `json:"memory_gb,omitempty"`
	StateGB       float64            `json:"state_gb,omitempty"`
	// Running is the model the job ran on in the previous round, "" if it
	// did not run then. LastModel is the model it last ran on at any time.
	Running   string `json:"running,omitempty"`
	LastModel string `json:"last_model,omitempty"`
	// AttainedGPUSeconds is the service received so far.
	AttainedGPUSeconds float64 `json:"attained_gpu_s"`
}

// Remaining is the work left, never negative.
func (j *Job) Remaining() float64 { return allocator.Remaining(j.Work, j.Done) }

// Fits reports whether the job may run on m: a positive rate, enough GPUs
// and enough memory per GPU (0 on either side = not declared).
func (j *Job) Fits(m *Model) bool {
	return allocator.Fits(m, j.GPUs, j.MemoryGB, j.RatePerSecond[m.Name])
}

// Snapshot is everything a policy sees at the start of one round. Jobs are
// sorted by arrival, then ID. Policies must not modify it.
type Snapshot struct {
	Round int `json:"round"`
	// Now is the round's start in seconds; RoundSeconds its length.
	Now          float64 `json:"now"`
	RoundSeconds float64 `json:"round_seconds"`
	Models       []Model `json:"models"`
	Jobs         []Job   `json:"jobs"`
	// Instance is the same round as the engine takes it, with the
	// fairness ledger the round loop keeps (throughputs per round of
	// RoundSeconds, arrivals in rounds): what FFT decides on.
	Instance *allocator.Instance `json:"-"`
}

// Capacity maps model name to GPUs.
func (s *Snapshot) Capacity() map[string]int {
	c := make(map[string]int, len(s.Models))
	for _, m := range s.Models {
		c[m.Name] = m.GPUs
	}
	return c
}

// Assignment maps job ID to the model it runs on this round. Jobs absent
// from it wait.
type Assignment map[string]string

// Policy decides, once per round, which jobs run on which GPU model.
type Policy interface {
	Name() string
	Schedule(ctx context.Context, s *Snapshot) (Assignment, error)
}

// Observer is an optional interface: a policy that keeps state across
// rounds learns what each job achieved (work units) in the round it planned.
type Observer interface {
	Observe(s *Snapshot, a Assignment, achieved map[string]float64)
}

// Decider is an optional interface: a policy over the round engine returns
// the engine's whole decision (every job's cost terms, the solver's bound
// and gap) for the audit log, instead of an assignment.
type Decider interface {
	Decide(ctx context.Context, s *Snapshot) (*allocator.Decision, error)
}

// DecisionOf turns an assignment into a decision for the record: each job
// of the round's instance runs where the assignment says, credited with its
// throughput there, or waits as not selected.
func DecisionOf(s *Snapshot, a Assignment) *allocator.Decision {
	in := s.Instance
	d := &allocator.Decision{Round: s.Round, Jobs: make([]allocator.JobDecision, len(in.Jobs)), Usage: map[string]int{}}
	for k := range in.Jobs {
		j := &in.Jobs[k]
		jd := allocator.JobDecision{ID: j.ID, Rho: in.Fairness.Rho(j.ID)}
		if m, ok := a[j.ID]; ok {
			jd.Model = m
			jd.Chosen = allocator.Terms{Model: m, Throughput: j.Throughput[m]}
			d.Usage[m] += j.GPUs
		} else {
			jd.Reason = allocator.ReasonNotSelected
		}
		d.Jobs[k] = jd
	}
	return d
}

// Rounder is an optional interface: a policy with its own round length
// (Gavel's policies use 360 s). The simulator uses it unless told otherwise.
type Rounder interface {
	RoundSeconds() float64
}

// Rejecter is an optional interface: a policy that refuses jobs at
// admission (FFT refuses a job whose fair rate is 0) reports them here,
// with the reason; the simulator then drops the job.
type Rejecter interface {
	Rejected() map[string]string
}

// Reporter is an optional interface: counters a policy wants in the run's
// summary (LP fallbacks, rounds the solver stopped at its node limit).
type Reporter interface {
	PolicyStats() map[string]float64
}

// Check verifies an assignment against a snapshot: known jobs and models,
// jobs that fit, and capacity. It returns the first violation.
func Check(s *Snapshot, a Assignment) error {
	jobs := make(map[string]*Job, len(s.Jobs))
	for k := range s.Jobs {
		jobs[s.Jobs[k].ID] = &s.Jobs[k]
	}
	models := make(map[string]*Model, len(s.Models))
	for k := range s.Models {
		models[s.Models[k].Name] = &s.Models[k]
	}
	used := make(map[string]int, len(s.Models))
	ids := make([]string, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		j, m := jobs[id], models[a[id]]
		switch {
		case j == nil:
			return &AssignmentError{JobID: id, Model: a[id], Reason: "unknown job"}
		case m == nil:
			return &AssignmentError{JobID: id, Model: a[id], Reason: "unknown model"}
		case !j.Fits(m):
			return &AssignmentError{JobID: id, Model: a[id], Reason: "job does not fit the model"}
		}
		used[m.Name] += j.GPUs
		if used[m.Name] > m.GPUs {
			return &AssignmentError{JobID: id, Model: a[id], Reason: "model over capacity"}
		}
	}
	return nil
}

// AssignmentError is a policy's assignment that breaks the round's rules.
type AssignmentError struct {
	JobID, Model, Reason string
}

func (e *AssignmentError) Error() string {
	return "policy: job " + quote(e.JobID) + " on model " + quote(e.Model) + ": " + e.Reason
}

func quote(s string) string { return "\"" + s + "\"" }

// free tracks GPUs left per model while a policy fills a round.
type free map[string]int

func newFree(s *Snapshot) free { return free(s.Capacity()) }

// place puts j on model m if it fits and there is room.
func (f free) place(a Assignment, j *Job, m *Model) bool {
	if !j.Fits(m) || f[m.Name] < j.GPUs {
		return false
	}
	f[m.Name] -= j.GPUs
	a[j.ID] = m.Name
	return true
}
