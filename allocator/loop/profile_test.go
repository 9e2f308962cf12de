package loop

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
)

const k80 = "Tesla K80"

// learnRig is a loop over the harness with the test as the training tasks:
// each running job progresses by its true rate per round and reports it.
type learnRig struct {
	t     *testing.T
	h     *Harness
	store *MemStore
	clock *HarnessClock
	l     *Loop
	rate  map[string]map[string]float64 // job ID -> model -> true units per round
	done  map[string]float64
	log   *bytes.Buffer
}

func newLearnRig(t *testing.T, models []allocator.Model, jobs ...Job) *learnRig {
	r := &learnRig{t: t, h: &Harness{Models: models}, store: NewMemStore(true), clock: &HarnessClock{T: time.Unix(1e9, 0)},
		rate: map[string]map[string]float64{}, done: map[string]float64{}, log: &bytes.Buffer{}}
	for _, j := range jobs {
		r.h.Set(j)
	}
	log := hclog.New(&hclog.LoggerOptions{Output: r.log, Level: hclog.Warn})
	r.l = New(r.h, r.h, r.store, WithClock(r.clock.Now), WithLogger(log))
	return r
}

// round reports progress, runs a round, then lets the jobs run for R.
func (r *learnRig) round() *RoundRecord {
	r.t.Helper()
	for id := range r.h.Jobs {
		if _, ok := r.rate[id]; ok {
			_ = r.store.ReportProgress(context.Background(), id, r.done[id])
		}
	}
	rec, err := r.l.RunRound(context.Background(), TriggerSchedule, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for id, j := range r.h.Jobs {
		if m := j.RunningModel; m != "" {
			r.done[id] += r.rate[id][m]
		}
	}
	r.clock.Advance(300 * time.Second)
	checkNeverEstimatedAsMeasured(r.t, r.store.Stored(), rec)
	return rec
}

// checkNeverEstimatedAsMeasured: a value is "measured" exactly when the
// ledger holds a measurement of that pair, and then it is that measurement.
func checkNeverEstimatedAsMeasured(t *testing.T, l *Ledger, rec *RoundRecord) {
	t.Helper()
	for id, r := range l.Jobs {
		for m, th := range r.Throughput {
			meas, ok := r.Measured[m]
			if (th.Source == profile.SourceMeasured) != ok && th.Source != profile.SourceDeclared {
				t.Fatalf("round %d, job %s on %s: source %s, ledger measurements %v", rec.Round, id, m, th.Source, r.Measured)
			}
			if th.Source == profile.SourceMeasured && (th.UnitsPerRound-meas.UnitsPerRound)/meas.UnitsPerRound > 1e-12 {
				t.Fatalf("round %d, job %s on %s: measured %g, ledger %g", rec.Round, id, m, th.UnitsPerRound, meas.UnitsPerRound)
			}
		}
	}
	for _, line := range rec.Jobs {
		if want := l.Jobs[line.ID].Throughput; line.Throughput != nil && len(line.Throughput) != len(want) {
			t.Fatalf("round %d, job %s: audit throughput %v, ledger %v", rec.Round, line.ID, line.Throughput, want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }

func lineOf(t *testing.T, rec *RoundRecord, id string) JobAudit {
	t.Helper()
	for _, j := range rec.Jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("round %d has no line for %s", rec.Round, id)
	return JobAudit{}
}

// A job without fft.throughput runs first on the model LearnModel picks
// (outside the policy), is measured after a whole round there, is then
// scheduled on its measured and estimated rates, and its estimate on
// another model is replaced by a measurement once it runs there. A reload
// from the store rebuilds the same estimates from the ledger.
func TestLearnJobIsProfiled(t *testing.T) {
	const id = "default/a"
	rig := newLearnRig(t, []allocator.Model{{Name: v100, GPUs: 1}, {Name: k80, GPUs: 1}},
		NewJob("a").Learn("ResNet-50").Work(1e6).Obj())
	rig.rate[id] = map[string]float64{v100: 30, k80: 6}

	rec := rig.round() // round 0: no data, run where its family is fastest
	line := lineOf(t, rec, id)
	if line.Learn == nil || line.Model != v100 || line.Action != ActionStart || line.Learn.Reason != profile.ReasonFastest {
		t.Fatalf("round 0 line %+v (learn %+v): want a start on %s chosen by LearnModel", line, line.Learn, v100)
	}
	rec = rig.round() // round 1: still no measurement (round 0 held its start)
	if line = lineOf(t, rec, id); line.Learn == nil || line.Model != v100 || line.Action != ActionKeep {
		t.Fatalf("round 1 line %+v: want kept on %s to be measured", line, v100)
	}
	rec = rig.round() // round 2: round 1 was whole on the V100, so it is measured
	line = lineOf(t, rec, id)
	got := rig.store.Stored().Jobs[id]
	if line.Learn != nil || got.Throughput[v100].Source != profile.SourceMeasured || !near(got.Throughput[v100].UnitsPerRound, 30) {
		t.Fatalf("round 2: learn %+v, throughput %+v: want the V100 measured at 30", line.Learn, got.Throughput)
	}
	if s := got.Throughput[k80].Source; s != profile.SourcePrior && s != profile.SourceEstimated {
		t.Fatalf("round 2: K80 %+v: want an estimate", got.Throughput[k80])
	}
	if line.Model != v100 || line.Throughput[k80] != got.Throughput[k80] {
		t.Fatalf("round 2 line %+v: want the policy to keep it on the V100, with the ledger's rates", line)
	}

	// A replica taking the lead rebuilds the estimator from the ledger
	// (one more V100 measurement of the same rate comes in meanwhile; the
	// fit kept without it is within the refit tolerance).
	estimate := got.Throughput[k80]
	rig.l.Forget()
	rig.round()
	again := rig.store.Stored().Jobs[id].Throughput[k80]
	if math.Abs(math.Log(again.UnitsPerRound/estimate.UnitsPerRound)) > profile.DefaultRefitLogTolerance ||
		math.Abs(again.LogSD-estimate.LogSD) > 0.01 || again.Source != estimate.Source {
		t.Fatalf("after a reload the K80 estimate is %+v, was %+v", again, estimate)
	}

	// The V100 goes away: the job moves to the K80 and is measured there.
	rig.h.Models = []allocator.Model{{Name: k80, GPUs: 1}}
	if line = lineOf(t, rig.round(), id); line.Model != k80 || line.Action != ActionMigrate {
		t.Fatalf("line %+v: want a migration to the K80", line)
	}
	rig.round() // the first whole round there
	rig.round()
	got = rig.store.Stored().Jobs[id]
	if th := got.Throughput[k80]; th.Source != profile.SourceMeasured || !near(th.UnitsPerRound, 6) {
		t.Fatalf("K80 after a whole round there: %+v, want measured at 6", th)
	}
	if m := got.Measured[v100]; !near(m.UnitsPerRound, 30) || m.Count != 3 {
		t.Fatalf("V100 measurements %+v: want kept in the ledger (30, 3 rounds)", m)
	}
}

// A job that reports no progress is run to be measured for
// maxProfileRounds rounds, then held as no-fit with a reason naming the fix.
func TestLearnJobWithoutReportsIsHeld(t *testing.T) {
	rig := newLearnRig(t, []allocator.Model{{Name: v100, GPUs: 1}}, NewJob("quiet").Learn("").Obj())
	for r := 0; r < maxProfileRounds; r++ {
		if line := lineOf(t, rig.round(), "default/quiet"); line.Model != v100 {
			t.Fatalf("round %d: %+v, want run on %s to be measured", r, line, v100)
		}
	}
	line := lineOf(t, rig.round(), "default/quiet")
	if line.ReasonCode != allocator.CodeNoFit || !strings.Contains(line.Reason, "report progress") || line.Action != ActionPark {
		t.Fatalf("line %+v: want parked as no-fit, naming progress reports", line)
	}
}

// A job without data is measured at once: when running jobs hold the GPUs
// it needs, it takes them anyway and the policy, seeing fewer GPUs, parks
// whom it prefers; only when other jobs being measured hold them does it
// wait, outside the policy.
func TestLearnJobTakesGPUs(t *testing.T) {
	rig := newLearnRig(t, []allocator.Model{{Name: v100, GPUs: 3}},
		NewJob("busy").GPUs(2).TP(v100, 5).Work(1e6).Running(v100).Obj(), NewJob("new").GPUs(2).Learn("LM").Obj(),
		NewJob("next").GPUs(2).Learn("LM").Obj(), NewJob("small").TP(v100, 5).Work(1e6).Obj())
	rig.rate["default/busy"] = map[string]float64{v100: 5}
	rec := rig.round()
	if line := lineOf(t, rec, "default/new"); line.Model != v100 || line.Learn == nil || !strings.Contains(line.Learn.Reason, "the policy makes room") {
		t.Fatalf("new: %+v (learn %+v): want it run on %s to be measured, making room", line, line.Learn, v100)
	}
	if line := lineOf(t, rec, "default/next"); line.ReasonCode != CodeProfileWait || line.Model != "" {
		t.Fatalf("next: %+v: want it waiting with %s", line, CodeProfileWait)
	}
	if line := lineOf(t, rec, "default/busy"); line.Model != "" || line.Action != ActionPark {
		t.Fatalf("busy: %+v: want it parked for the job being measured", line)
	}
	if line := lineOf(t, rec, "default/small"); line.Model != v100 {
		t.Fatalf("small: %+v: want it on the GPU left", line)
	}
}

// A declared throughput far from the measured one is flagged: a warning in
// the log (once) and the mismatch on the job's audit line; the declared
// value stays the one the round uses.
func TestDeclaredMismatchIsFlagged(t *testing.T) {
	const id = "default/d"
	rig := newLearnRig(t, []allocator.Model{{Name: v100, GPUs: 1}}, NewJob("d").TP(v100, 10).Work(1e6).Obj())
	rig.rate[id] = map[string]float64{v100: 30}
	var rec *RoundRecord
	for r := 0; r < 4; r++ {
		rec = rig.round()
	}
	line := lineOf(t, rec, id)
	if len(line.Mismatches) != 1 || !near(line.Mismatches[0].MeasuredUnitsPerRound, 30) || line.Mismatches[0].DeclaredUnitsPerRound != 10 {
		t.Fatalf("mismatches %+v: want declared 10 against measured 30", line.Mismatches)
	}
	if th := line.Throughput[v100]; th.Source != profile.SourceDeclared || th.UnitsPerRound != 10 || line.Chosen.Throughput != 10 {
		t.Fatalf("throughput %+v, chosen %g: want the declared 10 used", th, line.Chosen.Throughput)
	}
	if n := strings.Count(rig.log.String(), "declared throughput far from the measured one"); n != 1 {
		t.Fatalf("%d warnings in the log, want 1:\n%s", n, rig.log.String())
	}
}
