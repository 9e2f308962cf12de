package loop

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// Issue 20: every input a job controls is a claim. These tests run the round loop under the
// default policy against a small truth (each job's true rate and progress), with one job
// lying, and check that the liar gets no more GPU time than the same job honest.

// truth is the cluster's real progress, which the loop never sees except through reports
// and finishes.
type truth struct {
	h  *Harness
	st *MemStore
	l  *Loop
	// rate is each job's true work per round on any model; done its true work done.
	rate map[string]float64
	done map[string]float64
	// report says what job id reports before each round, given its true progress (false:
	// nothing); nil reports the truth.
	report map[string]func(round int, done float64) (float64, bool)
	// rounds counts the rounds each job ran; work is a job's true work
	// where it differs from its fft.work.
	rounds map[string]int
	work   map[string]float64
	// stall says whether job id makes no progress in a round it runs, and
	// whether Nomad shows it a new run afterwards (a replaced allocation).
	stall map[string]func(round int) (stalled, newRun bool)
}

func newTruth(t *testing.T, models []allocator.Model, jobs []Job, opts ...Option) *truth {
	t.Helper()
	h := &Harness{Models: models, Jobs: map[string]*Job{}}
	tr := &truth{h: h, st: NewMemStore(false), rate: map[string]float64{}, done: map[string]float64{},
		report: map[string]func(int, float64) (float64, bool){}, rounds: map[string]int{}, work: map[string]float64{},
		stall: map[string]func(int) (bool, bool){}}
	for _, j := range jobs {
		h.Set(j)
		tr.rate[j.ID] = 1
	}
	pol, err := policy.New(policy.DefaultName, policy.Options{RestartSeconds: allocator.DefaultConfig().RestartSeconds})
	if err != nil {
		t.Fatal(err)
	}
	tr.l = New(h, h, tr.st, append([]Option{WithPolicy(pol)}, opts...)...)
	return tr
}

// run runs n rounds: reports, a round, then a round of true progress for each running job.
func (tr *truth) run(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	for r := 0; r < n; r++ {
		for id, j := range tr.h.Jobs {
			if j.Finished {
				continue
			}
			f := tr.report[id]
			if f == nil {
				f = func(_ int, d float64) (float64, bool) { return d, true }
			}
			if v, ok := f(r, tr.done[id]); ok {
				if err := tr.st.ReportProgress(ctx, id, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := tr.l.RunRound(ctx, TriggerManual, nil); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		for id, j := range tr.h.Jobs {
			if j.Finished || j.RunningModel == "" {
				continue
			}
			tr.rounds[id]++
			if f := tr.stall[id]; f != nil {
				stalled, newRun := f(r)
				if newRun {
					j.RunID++
				}
				if stalled {
					continue
				}
			}
			tr.done[id] += tr.rate[id]
			work, ok := tr.work[id]
			if !ok {
				work = j.Spec.Work
			}
			if tr.done[id] >= work {
				j.Finished, j.Allocs, j.RunningModel = true, nil, ""
			}
		}
	}
}

func noReport(int, float64) (float64, bool) { return 0, false }

// Over-reported progress: two equal jobs share one GPU; b reports 99 of 100 done every round.
// Measured on main (a48becd): honest 19 and 21 of 40 rounds; lying, b got 39.
func TestLiarOverReportsProgress(t *testing.T) {
	one := []allocator.Model{{Name: a100, GPUs: 1}}
	jobs := func() []Job {
		return []Job{NewJob("a").Work(100).TP(a100, 1).Obj(), NewJob("b").Work(100).TP(a100, 1).Obj()}
	}
	honest := newTruth(t, one, jobs())
	honest.run(t, 40)
	lying := newTruth(t, one, jobs())
	lying.report["default/b"] = func(int, float64) (float64, bool) { return 99, true }
	lying.run(t, 40)
	t.Logf("rounds of b: honest %d, lying %d (a: %d, %d)", honest.rounds["default/b"], lying.rounds["default/b"],
		honest.rounds["default/a"], lying.rounds["default/a"])
	if got, fair := lying.rounds["default/b"], honest.rounds["default/b"]; got > fair {
		t.Errorf("b over-reporting its progress ran %d of 40 rounds, honest %d", got, fair)
	}
}

// Inflated throughput: b declares 1e6 units per round on the A100 where it does 1, and sends
// no reports. Measured on main: b got 40 of 40 rounds.
func TestLiarInflatesThroughput(t *testing.T) {
	one := []allocator.Model{{Name: a100, GPUs: 1}}
	run := func(declared float64) *truth {
		tr := newTruth(t, one, []Job{NewJob("a").Work(100).TP(a100, 1).Obj(), NewJob("b").Work(100).TP(a100, declared).Obj()})
		tr.report["default/a"], tr.report["default/b"] = noReport, noReport
		tr.run(t, 40)
		return tr
	}
	honest, lying := run(1), run(1e6)
	t.Logf("rounds of b: honest %d, lying %d", honest.rounds["default/b"], lying.rounds["default/b"])
	if got, fair := lying.rounds["default/b"], honest.rounds["default/b"]; got > fair {
		t.Errorf("b declaring 1e6 for 1 ran %d of 40 rounds, honest %d", got, fair)
	}
	// With reports, the declared rate yields to the measured one.
	tr := newTruth(t, one, []Job{NewJob("a").Work(100).TP(a100, 1).Obj(), NewJob("b").Work(100).TP(a100, 1e6).Obj()})
	tr.run(t, 40)
	t.Logf("rounds of b declaring 1e6 and reporting its true progress: %d", tr.rounds["default/b"])
	if got, fair := tr.rounds["default/b"], honest.rounds["default/b"]+1; got > fair {
		t.Errorf("b declaring 1e6 for 1 and reporting ran %d of 40 rounds, honest %d", got, honest.rounds["default/b"])
	}
}

// Understated work: b declares fft.work = 10 where it has 100 to do, so it looks nearly done
// from its second round on (the same claim as an inflated rate: W/theta rounds).
func TestLiarUnderstatesWork(t *testing.T) {
	one := []allocator.Model{{Name: a100, GPUs: 1}}
	run := func(declared float64, reports bool) *truth {
		tr := newTruth(t, one, []Job{NewJob("a").Work(100).TP(a100, 1).Obj(), NewJob("b").Work(declared).TP(a100, 1).Obj()})
		tr.work["default/b"] = 100
		if !reports {
			tr.report["default/a"], tr.report["default/b"] = noReport, noReport
		}
		tr.run(t, 40)
		return tr
	}
	for _, reports := range []bool{false, true} {
		honest, lying := run(100, reports), run(10, reports)
		t.Logf("reports %v: rounds of b: honest %d, lying %d", reports, honest.rounds["default/b"], lying.rounds["default/b"])
		if got, fair := lying.rounds["default/b"], honest.rounds["default/b"]; got > fair {
			t.Errorf("reports %v: b declaring 10 units of work for 100 ran %d of 40 rounds, honest %d", reports, got, fair)
		}
	}
}

// Poisoned family estimates: three jobs of mallory's report near-zero progress on an A100
// (and their real rate on a V100); alice's job of the same family, measured on a V100 only,
// is estimated on the A100 from the family's factors. Measured on main: her A100 estimate
// fell from 24.5 to 0.07 units per round.
func TestLiarPoisonsFamilyEstimates(t *testing.T) {
	models := []allocator.Model{{Name: a100, GPUs: 4}, {Name: v100, GPUs: 4}}
	estimate := func(malloryA100 float64, withMallory bool) profile.Throughput {
		t.Helper()
		h := &Harness{Models: models, Jobs: map[string]*Job{}}
		recs := map[string]JobRecord{}
		add := func(ns, name string, measured map[string]float64) {
			j := NewJob(name).Work(1000).Learn("ResNet-50").Obj()
			j.ID, j.Namespace = ns+"/"+name, ns
			j.Spec.User = ns
			h.Set(j)
			m := map[string]profile.Measurement{}
			for model, v := range measured {
				m[model] = profile.Measurement{UnitsPerRound: v, Count: 3, VarFactor: 0.5}
			}
			recs[j.ID] = JobRecord{Status: StatusWaiting, Measured: m}
		}
		add("alice", "a", map[string]float64{v100: 10})
		if withMallory {
			for _, n := range []string{"m1", "m2", "m3"} {
				add("mallory", n, map[string]float64{v100: 10, a100: malloryA100})
			}
		}
		st := NewMemStore(false)
		st.Replace(Ledger{Round: 5, Clock: 5, Jobs: recs})
		l := New(h, h, st)
		// Two rounds: the first tells the estimator every job's data.
		for r := 0; r < 2; r++ {
			if _, err := l.RunRound(context.Background(), TriggerManual, nil); err != nil {
				t.Fatal(err)
			}
		}
		return st.Stored().Jobs["alice/a"].Throughput[a100]
	}
	alone, honest, poisoned := estimate(0, false), estimate(25, true), estimate(0.001, true)
	t.Logf("alice's A100 estimate: from her data alone %.3g (%s), with mallory's honest data %.3g, poisoned %.3g",
		alone.UnitsPerRound, alone.Source, honest.UnitsPerRound, poisoned.UnitsPerRound)
	if poisoned.UnitsPerRound < 0.5*alone.UnitsPerRound {
		t.Errorf("mallory's near-zero reports pull alice's A100 estimate to %.3g, below half of %.3g (her own data and the priors)",
			poisoned.UnitsPerRound, alone.UnitsPerRound)
	}
}

// Split identities: with tenant shares by user (alice = 1, mallory = 1), mallory labels her
// jobs mallory, mallory-2 and mallory-3. Measured on main: she got 0.75 of the cluster's
// fairness reference instead of 0.5.
func TestLiarSplitsIdentity(t *testing.T) {
	var jobs []Job
	add := func(ns, name, user string) {
		j := NewJob(name).Work(1000).TP(a100, 1).Tenant(user, 1).Obj()
		j.ID, j.Namespace = ns+"/"+name, ns
		jobs = append(jobs, j)
	}
	add("alice", "a1", "alice")
	add("alice", "a2", "alice")
	add("mallory", "m1", "mallory")
	add("mallory", "m2", "mallory-2")
	add("mallory", "m3", "mallory-3")
	shares := &TenantShares{By: TenantByUser, Shares: map[string]float64{"alice": 1, "mallory": 1}}
	tr := newTruth(t, []allocator.Model{{Name: a100, GPUs: 2}}, jobs, WithTenantShares(shares))
	tr.run(t, 40)
	rounds := map[string]int{}
	all := 0
	for id, n := range tr.rounds {
		rounds[tr.h.Jobs[id].Namespace] += n
		all += n
	}
	t.Logf("mallory's GPU rounds %d of %d", rounds["mallory"], all)
	if got := float64(rounds["mallory"]) / float64(all); got > 0.5+0.05 {
		t.Errorf("mallory split into three users gets %.3f of the GPU rounds, her share is 0.5", got)
	}
}

// A checkpoint claim (fft.state_size, or the driver's measurement) is priced at most as one
// round's transfer, and a measured restart at most as the configured one.
// An honest job whose runs Nomad interrupts (a drain, a lost node) just as it claims to finish
// is not distrusted: a round after which Nomad shows another run does not count as an overrun
// (claims.go, interrupted). The same stall with no new run seen is an overrun, as before.
func TestInterruptedRunsAreNotOverruns(t *testing.T) {
	one := []allocator.Model{{Name: a100, GPUs: 1}}
	for _, tc := range []struct {
		newRun, distrusted bool
	}{{newRun: true, distrusted: false}, {newRun: false, distrusted: true}} {
		tr := newTruth(t, one, []Job{NewJob("a").Work(10).TP(a100, 1).Obj()})
		// Rounds 9 and 10 claim the last unit of work, and the job does none of it.
		tr.stall["default/a"] = func(r int) (bool, bool) { return r == 9 || r == 10, (r == 9 || r == 10) && tc.newRun }
		tr.run(t, 12)
		rec, ok := tr.st.Stored().Jobs["default/a"]
		if !ok {
			t.Fatalf("new run %v: the job left the ledger before its last round", tc.newRun)
		}
		if got := rec.Distrusted != ""; got != tc.distrusted {
			t.Errorf("new run %v: distrusted %v (%q, overrun %g), want %v", tc.newRun, got, rec.Distrusted, rec.Overrun, tc.distrusted)
		}
		if !tr.h.Jobs["default/a"].Finished {
			t.Errorf("new run %v: the job did not finish in 12 rounds (%g of 10 done)", tc.newRun, tr.done["default/a"])
		}
	}
}

func TestRestartClaimsBounded(t *testing.T) {
	cfg := allocator.DefaultConfig() // R 300 s, 10 Gbit/s, restart 30 s
	j := allocator.Job{StateGB: 1e6}
	secs := 1e6
	p := measure(&j, report.Report{RestartSeconds: &secs}, cfg)
	if most := cfg.RoundSeconds * cfg.TransferGbps / 8; j.StateGB != most || p.ClaimedCheckpointGB != 1e6 {
		t.Errorf("a 1e6 GB checkpoint is priced as %g GB (claimed %g), want %g: one round's transfer", j.StateGB, p.ClaimedCheckpointGB, most)
	}
	if j.RestartSeconds != 0 || p.Seconds != cfg.RestartSeconds || p.ClaimedSeconds != 1e6 {
		t.Errorf("a 1e6 s restart: job %g s, priced %+v; want the configured %g s", j.RestartSeconds, p, cfg.RestartSeconds)
	}
	small := allocator.Job{StateGB: 2}
	if p := measure(&small, report.Report{}, cfg); small.StateGB != 2 || p.ClaimedCheckpointGB != 0 {
		t.Errorf("a 2 GB checkpoint: %g GB, %+v; want it as declared", small.StateGB, p)
	}
}

// The overrun rule needs overdueRounds rounds that span overdueSeconds: Nomad can take tens of
// seconds to show that a task ended, so two 2 s rounds prove nothing.
func TestOverdueSpansTime(t *testing.T) {
	for _, tc := range []struct {
		roundS, overrun float64
		want            bool
	}{
		{300, 1, false}, {300, 2, true}, {60, 2, true},
		{2, 2, false}, {2, 29, false}, {2, 30, true},
		{0, 2, true}, // no round length known: rounds alone
	} {
		rec := JobRecord{Overrun: tc.overrun}
		if got, now := overdue(&rec, tc.roundS); got != tc.want || now != tc.want {
			t.Errorf("%g s rounds, overrun %g: distrusted %v (now %v), want %v", tc.roundS, tc.overrun, got, now, tc.want)
		}
	}
}
