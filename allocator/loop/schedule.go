package loop

import (
	"sort"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// WantEarly says whether a trigger justifies a round before the schedule,
// given what the cluster looked like since the last round: idle GPUs (-1
// if unknown) and jobs waiting for GPUs. An arrival is worth a round only
// if GPUs are idle to run it; a finish only if a job waits for the GPUs it
// frees; an unheld job always, since Nomad may place it before FFT decides.
func WantEarly(kind TriggerKind, idle, waiting int) bool {
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

// Schedule decides when the next round runs: Every after the start of the
// last one, or sooner when a trigger justifies it (WantEarly), but never
// sooner than Gap after the last start, so a burst of triggers is one
// round. A Gap of 0 turns early rounds off. It is pure: the caller passes
// the times. The live service (a wall clock and a watcher's triggers) and
// the simulator (a virtual clock and the workload's arrivals and finishes)
// both run their rounds by it.
type Schedule struct {
	Every, Gap time.Duration
	// last is the start of the last round; idle and waiting are the idle
	// GPUs (-1 if unknown) and waiting jobs it left, updated by triggers.
	last          time.Time
	idle, waiting int
	// early is when an early round is due (zero: none); why are the
	// triggers it answers, in arrival order.
	early time.Time
	why   []Trigger
}

// Ran resets the schedule after a round that started at start; rec is its
// record, nil if it failed (idle GPUs and waiting jobs are then unknown).
func (s *Schedule) Ran(start time.Time, rec *RoundRecord) {
	s.last, s.early, s.why = start, time.Time{}, nil
	s.idle, s.waiting = -1, 0
	if rec == nil {
		return
	}
	s.idle = rec.IdleGPUs
	for _, l := range rec.Jobs {
		if waits(l) {
			s.waiting++
		}
	}
}

// waits reports whether a round left the job waiting for GPUs: the policy
// could run it but left it out. A job with no fit, no work left or parked
// by an operator waits for no GPU a finish frees. The test reads the
// reason code, not the options, so that lean records (the simulator's) and
// assignments of policies that price no options count alike.
func waits(l JobAudit) bool {
	return l.Model == "" && l.ReasonCode == allocator.CodeNotSelected
}

// Next returns when the next round is due and why.
func (s *Schedule) Next() (time.Time, TriggerKind) {
	if regular := s.last.Add(s.Every); s.early.IsZero() || !s.early.Before(regular) {
		return regular, TriggerSchedule
	}
	return s.early, s.why[0].Kind
}

// Offer takes a trigger that came at now and reports whether it brought an
// early round forward (or joined one already due). An arrival counts as a
// waiting job from then on, so a later finish can start it.
func (s *Schedule) Offer(tr Trigger, now time.Time) bool {
	ok := WantEarly(tr.Kind, s.idle, s.waiting)
	if tr.Kind == TriggerArrival || tr.Kind == TriggerUnheld {
		s.waiting++
	}
	if !ok || s.Gap <= 0 {
		return false
	}
	at := s.last.Add(s.Gap)
	if at.Before(now) {
		at = now
	}
	if !at.Before(s.last.Add(s.Every)) {
		return false // the regular round comes first anyway
	}
	if s.early.IsZero() || at.Before(s.early) {
		s.early = at
	}
	s.why = append(s.why, tr)
	return true
}

// Jobs returns the IDs of the triggers an early round answers, sorted,
// each once.
func (s *Schedule) Jobs() []string {
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
