package loop

import (
	"reflect"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
)

func TestWantEarly(t *testing.T) {
	for _, tc := range []struct {
		kind          TriggerKind
		idle, waiting int
		want          bool
	}{
		{TriggerArrival, 2, 0, true},
		{TriggerArrival, 0, 3, false}, // nothing to run it on: wait for a finish or the schedule
		{TriggerArrival, -1, 0, false},
		{TriggerFinish, 0, 1, true},
		{TriggerFinish, 4, 0, false}, // nobody needs the GPUs it frees
		{TriggerUnheld, 0, 0, true},  // Nomad may place it before FFT decides
		{TriggerSchedule, 2, 2, false},
		{TriggerManual, 2, 2, false},
	} {
		if got := WantEarly(tc.kind, tc.idle, tc.waiting); got != tc.want {
			t.Errorf("WantEarly(%s, idle %d, waiting %d) = %v, want %v", tc.kind, tc.idle, tc.waiting, got, tc.want)
		}
	}
}

func TestSchedule(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// last is a round record that left idle GPUs and waiting jobs.
	last := func(idle, waiting int) *RoundRecord {
		r := &RoundRecord{IdleGPUs: idle, Jobs: []JobAudit{{ID: "default/running", Model: a100, Options: []allocator.Terms{{}}}}}
		for range waiting {
			r.Jobs = append(r.Jobs, JobAudit{ID: "default/w", ReasonCode: allocator.CodeNotSelected, Options: []allocator.Terms{{}}})
		}
		// None of these waits for the GPUs a finish frees.
		r.Jobs = append(r.Jobs, JobAudit{ID: "default/no-fit", ReasonCode: allocator.CodeNoFit, Reason: "no GPU model"},
			JobAudit{ID: "default/done", ReasonCode: allocator.CodeDone, Options: []allocator.Terms{{}}},
			JobAudit{ID: "default/parked", ReasonCode: CodeParkedByOperator})
		return r
	}
	type offer struct {
		at   float64
		tr   Trigger
		took bool
	}
	arrival := func(job string) Trigger { return Trigger{Kind: TriggerArrival, Job: "default/" + job} }
	finish := func(job string) Trigger { return Trigger{Kind: TriggerFinish, Job: "default/" + job} }
	for _, tc := range []struct {
		name       string
		every, gap float64
		rec        *RoundRecord
		offers     []offer
		wantAt     float64
		wantKind   TriggerKind
		wantJobs   []string
	}{
		{name: "no trigger: the regular round", every: 300, gap: 5, rec: last(2, 0),
			wantAt: 300, wantKind: TriggerSchedule},
		{name: "arrival with idle GPUs waits out the gap", every: 300, gap: 5, rec: last(2, 0),
			offers: []offer{{1, arrival("a"), true}}, wantAt: 5, wantKind: TriggerArrival, wantJobs: []string{"default/a"}},
		{name: "arrival after the gap runs at once", every: 300, gap: 5, rec: last(2, 0),
			offers: []offer{{42, arrival("a"), true}}, wantAt: 42, wantKind: TriggerArrival, wantJobs: []string{"default/a"}},
		{name: "a burst is one round", every: 300, gap: 5, rec: last(1, 0),
			offers: []offer{{1, arrival("b"), true}, {2, arrival("a"), true}, {3, arrival("b"), true}},
			wantAt: 5, wantKind: TriggerArrival, wantJobs: []string{"default/a", "default/b"}},
		{name: "arrival without idle GPUs waits for the schedule", every: 300, gap: 5, rec: last(0, 0),
			offers: []offer{{10, arrival("a"), false}}, wantAt: 300, wantKind: TriggerSchedule},
		{name: "a finish starts a job that arrived meanwhile", every: 300, gap: 5, rec: last(0, 0),
			offers: []offer{{10, arrival("a"), false}, {20, finish("x"), true}},
			wantAt: 20, wantKind: TriggerFinish, wantJobs: []string{"default/x"}},
		{name: "a finish with a job left waiting", every: 300, gap: 5, rec: last(0, 1),
			offers: []offer{{20, finish("x"), true}}, wantAt: 20, wantKind: TriggerFinish, wantJobs: []string{"default/x"}},
		{name: "a finish with a job left waiting, recorded lean", every: 300, gap: 5,
			rec:    &RoundRecord{Jobs: []JobAudit{{ID: "default/w", ReasonCode: allocator.CodeNotSelected}}}, // no options: a lean record, or a policy that prices none
			offers: []offer{{20, finish("x"), true}}, wantAt: 20, wantKind: TriggerFinish, wantJobs: []string{"default/x"}},
		{name: "a finish with nobody waiting", every: 300, gap: 5, rec: last(0, 0),
			offers: []offer{{20, finish("x"), false}}, wantAt: 300, wantKind: TriggerSchedule},
		{name: "an unheld job always", every: 300, gap: 5, rec: last(0, 0),
			offers: []offer{{2, Trigger{Kind: TriggerUnheld, Job: "default/u"}, true}}, wantAt: 5, wantKind: TriggerUnheld, wantJobs: []string{"default/u"}},
		{name: "after a failed round only unheld jobs", every: 300, gap: 5, rec: nil,
			offers: []offer{{2, arrival("a"), false}, {3, finish("x"), true}}, wantAt: 5, wantKind: TriggerFinish, wantJobs: []string{"default/x"}},
		{name: "gap 0 turns early rounds off", every: 300, gap: 0, rec: last(2, 1),
			offers: []offer{{2, arrival("a"), false}, {3, Trigger{Kind: TriggerUnheld, Job: "default/u"}, false}}, wantAt: 300, wantKind: TriggerSchedule},
		{name: "a gap longer than the round leaves the schedule", every: 2, gap: 5, rec: last(2, 0),
			offers: []offer{{1, arrival("a"), false}}, wantAt: 2, wantKind: TriggerSchedule},
		{name: "a trigger due after the regular round", every: 10, gap: 5, rec: last(2, 0),
			offers: []offer{{11, arrival("a"), false}}, wantAt: 10, wantKind: TriggerSchedule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Schedule{Every: time.Duration(tc.every * float64(time.Second)), Gap: time.Duration(tc.gap * float64(time.Second))}
			s.Ran(t0, tc.rec)
			for _, o := range tc.offers {
				if took := s.Offer(o.tr, at(o.at)); took != o.took {
					t.Errorf("offer(%v at %gs) = %v, want %v", o.tr, o.at, took, o.took)
				}
			}
			gotAt, gotKind := s.Next()
			if !gotAt.Equal(at(tc.wantAt)) || gotKind != tc.wantKind || !reflect.DeepEqual(s.Jobs(), tc.wantJobs) {
				t.Errorf("next = %s at %v for %q, want %s at %v for %q", gotKind, gotAt.Sub(t0), s.Jobs(), tc.wantKind, at(tc.wantAt).Sub(t0), tc.wantJobs)
			}
			// The round that runs resets it: the next one is regular again.
			s.Ran(gotAt, tc.rec)
			if next, kind := s.Next(); kind != TriggerSchedule || !next.Equal(gotAt.Add(s.Every)) || s.Jobs() != nil {
				t.Errorf("after the round: next %s at %v, jobs %q", kind, next.Sub(t0), s.Jobs())
			}
		})
	}
}
