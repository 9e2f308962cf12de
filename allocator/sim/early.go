package sim

import (
	"math"
	"sort"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// How the simulator runs early rounds (Config.MinRoundGapSeconds > 0).
//
// The rounds follow loop.Schedule, the live service's own rule, fed what
// the live watcher would report: after a round at t, each job of the
// workload arriving at a is an arrival trigger at a, and each running job
// that will finish within the round, computed exactly from its rate, the
// work it has left and the rest of its restart, is a finish trigger at its
// finish time. Triggers are offered in time order (an arrival before a
// finish at the same instant) until the round they bring forward, or the
// regular one at t+R, is due; the round runs then, passed the trigger, so
// the loop cuts the previous round's credit to the time it lasted
// (credit.go), as the live allocator does. Virtual time is kept in whole
// nanoseconds, as the live clock is, and every event time is rounded up to
// one: a job whose finish brought a round forward has finished by it, and
// an arrival that did is admitted in it. Jobs that arrive at the same
// instant are offered together, before the round they bring forward (the
// live watcher reports them one by one, and a round due at once may start
// between them).

// roundLength is how long a round lasts: seconds, and with early rounds the
// same in nanoseconds, which the finish test reads (0 with fixed rounds).
type roundLength struct {
	seconds float64
	exact   time.Duration
}

// ceilNs is x seconds rounded up to a whole nanosecond.
func ceilNs(x float64) time.Duration { return time.Duration(math.Ceil(x * float64(time.Second))) }

// timer decides when each round runs and why: every R (sch nil, the
// rounds recorded as manual, Gavel's simulator), or by loop.Schedule.
type timer struct {
	R    float64
	sch  *loop.Schedule
	kind loop.TriggerKind
	jobs []string
}

func newTimer(cfg Config, R float64) *timer {
	t := &timer{R: R, kind: loop.TriggerManual}
	if cfg.MinRoundGapSeconds > 0 {
		t.sch = &loop.Schedule{Every: ceilNs(R), Gap: ceilNs(cfg.MinRoundGapSeconds)}
		t.kind = loop.TriggerSchedule // as the live service's first round
	}
	return t
}

// due is why the next round runs and the jobs of its triggers.
func (t *timer) due() (loop.TriggerKind, []string) { return t.kind, t.jobs }

// next takes the record of the round that just ran at the cluster's clock
// and returns how long it lasts: until the next round the schedule makes
// due, offering it the triggers that come before.
func (t *timer) next(a *admission, rec *loop.RoundRecord) (roundLength, error) {
	if t.sch == nil {
		return roundLength{seconds: t.R}, nil
	}
	start := a.c.wall()
	t.sch.Ran(start, rec)
	due, why := t.sch.Next()
	fin := a.c.finishes(start, due)
	for k := 0; ; {
		arr, err := a.peek(k)
		if err != nil {
			return roundLength{}, err
		}
		var ev event
		switch {
		case arr != nil && (len(fin) == 0 || !fin[0].at.Before(Epoch.Add(ceilNs(arr.Arrival)))):
			ev = event{at: Epoch.Add(ceilNs(arr.Arrival)), tr: loop.Trigger{Kind: loop.TriggerArrival, Job: arr.ID}}
			k++
		case len(fin) > 0:
			ev, fin = fin[0], fin[1:]
		}
		if ev.at.IsZero() || ev.at.After(due) {
			break
		}
		t.sch.Offer(ev.tr, ev.at)
		due, why = t.sch.Next()
	}
	t.kind, t.jobs = why, nil
	if why != loop.TriggerSchedule {
		t.jobs = t.sch.Jobs()
	}
	d := due.Sub(start)
	return roundLength{seconds: d.Seconds(), exact: d}, nil
}

// event is a trigger at its time.
type event struct {
	at time.Time
	tr loop.Trigger
}

// finishes are the finish triggers of the jobs that run from start on and
// finish by until, in time order (ties by job ID).
func (c *Cluster) finishes(start, until time.Time) []event {
	var out []event
	for _, j := range c.active {
		if j.running == "" {
			continue
		}
		if at := start.Add(ceilNs(j.finishIn())); !at.After(until) {
			out = append(out, event{at: at, tr: loop.Trigger{Kind: loop.TriggerFinish, Job: j.job.ID}})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].at.Equal(out[b].at) {
			return out[a].at.Before(out[b].at)
		}
		return out[a].tr.Job < out[b].tr.Job
	})
	return out
}

// finishIn is how long a running job needs to finish if it keeps its GPUs:
// the rest of its restart, then its remaining work at its rate.
func (j *simJob) finishIn() float64 {
	return j.penalty + (j.spec.Work-j.done)/j.rate()
}

// wall is the cluster's clock as the loop reads it.
func (c *Cluster) wall() time.Time {
	if c.exact {
		return Epoch.Add(c.clock)
	}
	return Epoch.Add(time.Duration(c.now * float64(time.Second)))
}

// arrived reports whether a job arriving at the given second has arrived
// by the clock.
func (c *Cluster) arrived(arrival float64) bool {
	if c.exact {
		return ceilNs(arrival) <= c.clock
	}
	return arrival <= c.now
}
