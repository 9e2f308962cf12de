package loop

import "context"

// TriggerKind says why a round ran.
type TriggerKind string

// Why a round runs. Arrival, unheld and finish are the changes a watcher
// reports; schedule and manual are the rounds no trigger asked for.
const (
	// TriggerSchedule is a regular round, R after the previous one.
	TriggerSchedule TriggerKind = "schedule"
	// TriggerManual is a round run directly (fft-allocator -once, the
	// simulator).
	TriggerManual TriggerKind = "manual"
	// TriggerArrival is a managed job that appeared held (gated or outside
	// the GPU pool): worth an early round only if GPUs are idle.
	TriggerArrival TriggerKind = "arrival"
	// TriggerUnheld is a managed job that appeared neither gated nor outside
	// the GPU pool: Nomad may place it on its own, so a round should gate or
	// start it at once.
	TriggerUnheld TriggerKind = "unheld"
	// TriggerFinish is an allocation of a managed job that ended on its own
	// (complete, failed or lost; not stopped by a park): its GPUs are free.
	TriggerFinish TriggerKind = "finish"
)

// early reports whether a round of this kind came before the schedule.
func early(kind TriggerKind) bool { return kind != TriggerSchedule && kind != TriggerManual }

// Early reports whether a round of this kind came before the schedule.
func (k TriggerKind) Early() bool { return early(k) }

// Trigger is one change in the cluster that may justify an early round.
type Trigger struct {
	Kind TriggerKind
	// Job is the job's ID, "namespace/job".
	Job string
}

// Watcher is an optional Observer interface (found by type assertion):
// Watch sends a Trigger on out for each change that may justify an early
// round, until ctx ends. It retries its own failures; missing a change only
// delays the job to the next regular round.
type Watcher interface {
	Watch(ctx context.Context, out chan<- Trigger) error
}
