package loop

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/fairness"
)

func TestCreditKept(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		early   bool
		prev    time.Time
		elapsed time.Duration
		want    float64
	}{
		{"early, a quarter of R", true, t0, 75 * time.Second, 0.25},
		{"early, at once", true, t0, 0, 0},
		{"early, later than R", true, t0, 400 * time.Second, 1},
		{"early, clock went back", true, t0, -time.Second, 0},
		{"early, no previous start", true, time.Time{}, 10 * time.Second, 1},
		{"regular", false, t0, 75 * time.Second, 1},
		{"regular and late", false, t0, 900 * time.Second, 1},
	} {
		if got := creditKept(tc.early, tc.prev, t0.Add(tc.elapsed), 300); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: creditKept = %g, want %g", tc.name, got, tc.want)
		}
	}
}

func TestFairRound(t *testing.T) {
	for _, tc := range []struct {
		clock float64
		want  int
	}{{0, 0}, {0.999, 0}, {0.1 + 0.2 + 0.7, 1}, {2.5, 2}, {3, 3}} {
		if got := fairRound(tc.clock); got != tc.want {
			t.Errorf("fairRound(%g) = %d, want %d", tc.clock, got, tc.want)
		}
	}
}

func TestSettle(t *testing.T) {
	rec := func(rho, done float64, c *Credit) JobRecord {
		return JobRecord{JobState: fairness.JobState{Work: 10, Tau: 5, Rho: rho}, Done: done, Credit: c, Status: StatusRunning}
	}
	in := map[string]JobRecord{
		// ran: rho fell from 2 by 1.5, done rose by 4
		"ran": rec(0.5, 6, &Credit{RhoFrom: 2, RhoStep: -1.5, Done: 4}),
		// waited: rho rose from 1 by 0.5
		"waited": rec(1.5, 0, &Credit{RhoFrom: 1, RhoStep: 0.5}),
		// clamped: the step took rho below 0, so it was clamped at 0
		"clamped": rec(0, 3, &Credit{RhoFrom: 1, RhoStep: -4, Done: 3}),
		"none":    rec(7, 1, nil),
		// unplaced: credited as "ran", but Nomad never placed its start, so it waited:
		// rho rises from 2 by -1.5 + 2 (RhoRan, what running took off), done falls back to 2
		"unplaced": rec(0.5, 6, &Credit{RhoFrom: 2, RhoStep: -1.5, RhoRan: 2, Done: 4}),
	}
	unplaced := map[string]bool{"unplaced": true}
	for _, tc := range []struct {
		kept float64
		rho  map[string]float64
		done map[string]float64
	}{
		{1, map[string]float64{"ran": 0.5, "waited": 1.5, "clamped": 0, "none": 7, "unplaced": 2.5}, map[string]float64{"ran": 6, "waited": 0, "clamped": 3, "none": 1, "unplaced": 2}},
		{0.5, map[string]float64{"ran": 1.25, "waited": 1.25, "clamped": 0, "none": 7, "unplaced": 2.25}, map[string]float64{"ran": 4, "waited": 0, "clamped": 1.5, "none": 1, "unplaced": 2}},
		{0.2, map[string]float64{"ran": 1.7, "waited": 1.1, "clamped": 0.2, "none": 7, "unplaced": 2.1}, map[string]float64{"ran": 2.8, "waited": 0, "clamped": 0.6, "none": 1, "unplaced": 2}},
		{0, map[string]float64{"ran": 2, "waited": 1, "clamped": 1, "none": 7, "unplaced": 2}, map[string]float64{"ran": 2, "waited": 0, "clamped": 0, "none": 1, "unplaced": 2}},
	} {
		out := settle(in, tc.kept, unplaced)
		for id, r := range out {
			if math.Abs(r.Rho-tc.rho[id]) > 1e-12 || math.Abs(r.Done-tc.done[id]) > 1e-12 || r.Credit != nil {
				t.Errorf("kept %g: %s rho %g done %g credit %v; want rho %g done %g, credit cleared", tc.kept, id, r.Rho, r.Done, r.Credit, tc.rho[id], tc.done[id])
			}
		}
	}
	if in["ran"].Credit == nil || in["ran"].Rho != 0.5 {
		t.Errorf("settle changed its input: %+v", in["ran"])
	}
}

// An early round cuts the previous round's credit to the time that passed; regular rounds
// keep it whole. Each case runs three regular rounds, R apart, then one more round after
// `elapsed`, and compares what that round started from with the third round's record.
func TestEarlyRoundAccounting(t *testing.T) {
	const R = 300.0
	for _, tc := range []struct {
		name    string
		kind    TriggerKind
		elapsed float64 // seconds after the third round
		kept    float64
	}{
		{"early after a quarter of R", TriggerArrival, 75, 0.25},
		{"early at once", TriggerFinish, 0, 0},
		{"early but late", TriggerUnheld, 2 * R, 1},
		{"regular", TriggerSchedule, R, 1},
		{"manual soon after", TriggerManual, 30, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := &HarnessClock{T: now}
			// Two 2-GPU jobs on 2 GPUs: one runs, one waits, so rho moves both ways.
			fc := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 2}}, Jobs: map[string]*Job{
				"default/a": Ptr(NewJob("a").GPUs(2).TP(a100, 2).Obj()),
				"default/b": Ptr(NewJob("b").GPUs(2).TP(a100, 1).Obj()),
			}}
			fc.Jobs["default/a"].Spec.Work, fc.Jobs["default/b"].Spec.Work = 100, 100
			st := NewMemStore(false)
			cfg := allocator.DefaultConfig()
			cfg.RoundSeconds = R
			s := New(fc, fc, st, WithClock(clk.Now), WithConfig(cfg))
			ctx := context.Background()
			var prev *RoundRecord
			for i := 0; i < 3; i++ {
				if i > 0 {
					clk.Advance(R * time.Second)
				}
				r, err := s.RunRound(ctx, TriggerSchedule, nil)
				if err != nil {
					t.Fatal(err)
				}
				prev = r
			}
			before := st.Stored()
			clk.Advance(time.Duration(tc.elapsed * float64(time.Second)))
			rec, err := s.RunRound(ctx, tc.kind, []string{"default/x"})
			if err != nil {
				t.Fatal(err)
			}
			if rec.CreditKept != tc.kept || math.Abs(rec.Clock-(before.Clock-1+tc.kept)) > 1e-12 || st.Stored().Clock != rec.Clock+1 {
				t.Errorf("credit kept %g, clock %g (ledger next %g); want %g, %g", rec.CreditKept, rec.Clock, st.Stored().Clock, tc.kept, before.Clock-1+tc.kept)
			}
			moved := 0
			for _, l := range prev.Jobs {
				var now JobAudit
				for _, n := range rec.Jobs {
					if n.ID == l.ID {
						now = n
					}
				}
				// The round starts from the previous step, cut to kept (no clamp here: rho
				// stays positive for the waiting job and falls from a positive value for
				// the running one, or stays at 0).
				want := math.Max(0, l.RhoBefore+tc.kept*(l.RhoAfter-l.RhoBefore))
				if l.RhoAfter > 0 && math.Abs(now.RhoBefore-want) > 1e-9 {
					t.Errorf("%s: rho before the round %g, want %g (previous step %g -> %g cut to %g)", l.ID, now.RhoBefore, want, l.RhoBefore, l.RhoAfter, tc.kept)
				}
				if l.RhoAfter != l.RhoBefore {
					moved++
				}
				// Progress: the credit of the previous round, cut the same way, plus this
				// round's whole credit.
				wantDone := before.Jobs[l.ID].Done - (1-tc.kept)*l.Chosen.Throughput*boolf(l.Model != "") + now.Chosen.Throughput*boolf(now.Model != "")
				if got := st.Stored().Jobs[l.ID].Done; math.Abs(got-wantDone) > 1e-9 {
					t.Errorf("%s: done %g, want %g", l.ID, got, wantDone)
				}
			}
			if moved == 0 {
				t.Errorf("no rho moved in the previous round: the case proves nothing (%+v)", prev.Jobs)
			}
			if rec.Trigger != tc.kind || !reflect.DeepEqual(rec.TriggerJobs, []string{"default/x"}) {
				t.Errorf("record trigger %q for %q", rec.Trigger, rec.TriggerJobs)
			}
		})
	}
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
