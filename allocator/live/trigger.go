package live

import (
	"context"
	"sort"
	"time"
)

// TriggerKind says why a round ran.
type TriggerKind string

// Why a round runs. Arrival, unheld and finish are the changes a Watcher
// reports; schedule and manual are the rounds no trigger asked for.
const (
	// TriggerSchedule is a regular round, R after the previous one.
	TriggerSchedule TriggerKind = "schedule"
	// TriggerManual is a round run by RunRound directly (fft-allocator -once).
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

// wantEarly says whether a trigger justifies a round before the schedule,
// given what the cluster looked like since the last round: idle GPUs (-1
// if unknown) and jobs waiting for GPUs. An arrival is worth a round only
// if GPUs are idle to run it; a finish only if a job waits for the GPUs it
// frees; an unheld job always, since Nomad may place it before FFT decides.
func wantEarly(kind TriggerKind, idle, waiting int) bool {
	switch kind {
	case TriggerArrival:
		return idle > 0
	case TriggerFinish:
		return waiting > 0
	case TriggerUnheld:
		return true
	}
	return false
}

// schedule decides when the next round runs: every after the start of the
// last one, or sooner when a trigger justifies it, but never sooner than gap
// after the last start, so a burst of triggers is one round. It is pure: the
// caller passes the times.
type schedule struct {
	every, gap time.Duration
	// last is the start of the last round; idle and waiting are the idle
	// GPUs (-1 if unknown) and waiting jobs it left, updated by triggers.
	last          time.Time
	idle, waiting int
	// early is when an early round is due (zero: none); why are the
	// triggers it answers, in arrival order.
	early time.Time
	why   []Trigger
}

// ran resets the schedule after a round that started at start; rec is its
// record, nil if it failed (idle GPUs and waiting jobs are then unknown).
func (s *schedule) ran(start time.Time, rec *RoundRecord) {
	s.last, s.early, s.why = start, time.Time{}, nil
	s.idle, s.waiting = -1, 0
	if rec == nil {
		return
	}
	s.idle = rec.IdleGPUs
	for _, l := range rec.Jobs {
		// A job the round priced but left out waits; a no-fit job has no
		// options and waits for no GPU this cluster has.
		if l.Model == "" && len(l.Options) > 0 {
			s.waiting++
		}
	}
}

// next returns when the next round is due and why.
func (s *schedule) next() (time.Time, TriggerKind) {
	if regular := s.last.Add(s.every); s.early.IsZero() || !s.early.Before(regular) {
		return regular, TriggerSchedule
	}
	return s.early, s.why[0].Kind
}

// offer takes a trigger that came at now and reports whether it brought an
// early round forward (or joined one already due). An arrival counts as a
// waiting job from then on, so a later finish can start it.
func (s *schedule) offer(tr Trigger, now time.Time) bool {
	ok := wantEarly(tr.Kind, s.idle, s.waiting)
	if tr.Kind == TriggerArrival || tr.Kind == TriggerUnheld {
		s.waiting++
	}
	if !ok || s.gap <= 0 {
		return false
	}
	at := s.last.Add(s.gap)
	if at.Before(now) {
		at = now
	}
	if !at.Before(s.last.Add(s.every)) {
		return false // the regular round comes first anyway
	}
	if s.early.IsZero() || at.Before(s.early) {
		s.early = at
	}
	s.why = append(s.why, tr)
	return true
}

// jobs returns the IDs of the triggers an early round answers, sorted,
// each once.
func (s *schedule) jobs() []string {
	seen := map[string]bool{}
	var out []string
	for _, tr := range s.why {
		if !seen[tr.Job] {
			seen[tr.Job] = true
			out = append(out, tr.Job)
		}
	}
	sort.Strings(out)
	return out
}
