package live

import (
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"sort"
	"time"
)

// wantEarly says whether a trigger justifies a round before the schedule,
// given what the cluster looked like since the last round: idle GPUs (-1
// if unknown) and jobs waiting for GPUs. An arrival is worth a round only
// if GPUs are idle to run it; a finish only if a job waits for the GPUs it
// frees; an unheld job always, since Nomad may place it before FFT decides.
func wantEarly(kind loop.TriggerKind, idle, waiting int) bool {
	switch kind {
	case loop.TriggerArrival:
		return idle > 0
	case loop.TriggerFinish:
		return waiting > 0
	case loop.TriggerUnheld:
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
	why   []loop.Trigger
}

// ran resets the schedule after a round that started at start; rec is its
// record, nil if it failed (idle GPUs and waiting jobs are then unknown).
func (s *schedule) ran(start time.Time, rec *loop.RoundRecord) {
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
func (s *schedule) next() (time.Time, loop.TriggerKind) {
	if regular := s.last.Add(s.every); s.early.IsZero() || !s.early.Before(regular) {
		return regular, loop.TriggerSchedule
	}
	return s.early, s.why[0].Kind
}

// offer takes a trigger that came at now and reports whether it brought an
// early round forward (or joined one already due). An arrival counts as a
// waiting job from then on, so a later finish can start it.
func (s *schedule) offer(tr loop.Trigger, now time.Time) bool {
	ok := wantEarly(tr.Kind, s.idle, s.waiting)
	if tr.Kind == loop.TriggerArrival || tr.Kind == loop.TriggerUnheld {
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
