package loop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/report"
	"github.com/nomad-fft/nomad-fft/fairness"
)

const (
	a100 = "NVIDIA A100-SXM4-40GB"
	v100 = "Tesla V100-SXM2-16GB"
)

func TestDiff(t *testing.T) {
	jobs := []Job{
		NewJob("held-selected").TP(a100, 1).Obj(),
		NewJob("held-waiting").TP(a100, 1).Obj(),
		NewJob("running-kept").Running(a100).Obj(),
		NewJob("running-parked").Running(a100).Obj(),
		NewJob("running-moved").Running(v100).Obj(),
		NewJob("placing-same").Ungated(a100).Obj(),
		NewJob("ungated-other").Ungated(v100).Obj(),
		NewJob("ungated-unselected").Ungated(a100).Obj(),
		NewJob("done").Running(a100).Finished().Obj(),
		NewJob("pool-waiting").TP(a100, 1).OffPool().Obj(),
		NewJob("pool-selected").TP(a100, 1).OffPool().Obj(),
		NewJob("pool-steered").OffPool().Ungated(a100).Obj(),
		NewJob("in-pool-unselected").TP(a100, 1).Ungated("").Obj(),
	}
	assign := map[string]string{
		"default/held-selected": a100, "default/running-kept": a100, "default/running-moved": a100,
		"default/placing-same": a100, "default/ungated-other": a100, "default/done": a100,
		"default/pool-selected": a100, "default/pool-steered": a100,
	}
	p := Diff(jobs, assign)
	ids := func(cs []Change) []string {
		var out []string
		for _, c := range cs {
			out = append(out, strings.TrimPrefix(c.Job.ID, "default/")+":"+c.Model)
		}
		return out
	}
	got := map[string][]string{"start": ids(p.Start), "migrate": ids(p.Migrate), "park": ids(p.Park), "keep": ids(p.Keep)}
	// A job held by its pool alone is kept without a write while it waits, and started (moved
	// into the pool) when selected, even if its device block already names the model. A job
	// in the pool without the gate can be placed by Nomad at any time: a round that leaves it
	// out gates it at once.
	want := map[string][]string{
		"start":   {"held-selected:" + a100, "pool-selected:" + a100, "pool-steered:" + a100, "ungated-other:" + a100},
		"migrate": {"running-moved:" + a100},
		"park":    {"in-pool-unselected:", "running-parked:", "ungated-unselected:"},
		"keep":    {"held-waiting:", "placing-same:" + a100, "pool-waiting:", "running-kept:" + a100},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff:\n got  %v\n want %v", got, want)
	}
	if s := p.GoString(); s != "(start 4) (migrate 1) (park 3) (keep 4)" {
		t.Errorf("GoString = %q", s)
	}
	// Applying the decision to a cluster that already matches it is a no-op.
	again := Diff([]Job{NewJob("running-kept").Running(a100).Obj(), NewJob("held-waiting").Obj()}, map[string]string{"default/running-kept": a100})
	if len(again.Changes()) != 0 {
		t.Errorf("Diff of a matching cluster has changes: %#v", again)
	}
}

func TestServiceRounds(t *testing.T) {
	fc := &Harness{
		Models: []allocator.Model{{Name: a100, GPUs: 2}, {Name: v100, GPUs: 2}},
		Jobs: map[string]*Job{
			"default/a": Ptr(NewJob("a").GPUs(2).TP(a100, 4).TP(v100, 1).Obj()),
			"default/b": Ptr(NewJob("b").GPUs(2).TP(a100, 2).TP(v100, 2).Obj()),
			"default/c": Ptr(NewJob("c").GPUs(2).TP(a100, 1).TP(v100, 1).Obj()),
			"default/x": Ptr(NewJob("x").GPUs(4).TP(a100, 1).Obj()), // fits no model: 2 A100 only
		},
	}
	st := NewMemStore(true)
	s := New(fc, fc, st)
	ctx := context.Background()
	rec, err := s.RunRound(ctx, TriggerManual, nil)
	if err != nil {
		t.Fatalf("round 0: %v", err)
	}
	if rec.Round != 0 || len(rec.Assignment) != 2 {
		t.Fatalf("round 0 assigned %v, want 2 jobs (4 GPUs, 2+2 capacity)", rec.Assignment)
	}
	if got := rec.Assignment["default/a"]; got != a100 {
		t.Errorf("job a runs on %q, want %q (4x faster there)", got, a100)
	}
	if fc.Jobs["default/x"].Gated != true || st.Stored().Jobs["default/x"].Status != StatusNoFit {
		t.Errorf("job x: gated %v, status %q; want held and %q", fc.Jobs["default/x"].Gated, st.Stored().Jobs["default/x"].Status, StatusNoFit)
	}
	for _, ja := range rec.Jobs {
		if ja.ID == "default/x" && !strings.Contains(ja.Reason, `device "nvidia/gpu" count = 4: more GPUs than any model`) {
			t.Errorf("job x reason %q does not name the device count", ja.Reason)
		}
		if ja.ID != "default/x" && ja.GPUs != 2 {
			t.Errorf("job %s's audit line has %d GPUs, want its gang size 2", ja.ID, ja.GPUs)
		}
	}
	if used := rec.Usage[a100] + rec.Usage[v100]; used != 4 {
		t.Errorf("round 0 usage %v, want the 4 GPUs of the two running jobs", rec.Usage)
	}
	var waiting string
	for _, id := range []string{"default/b", "default/c"} {
		if rec.Assignment[id] == "" {
			waiting = id
		}
	}
	for _, ja := range rec.Jobs {
		if ja.ID == waiting && !(ja.RhoAfter >= ja.RhoBefore) {
			t.Errorf("waiting job %s: rho %g -> %g, want it not to fall", ja.ID, ja.RhoBefore, ja.RhoAfter)
		}
	}
	if len(rec.InputsDigest) != 64 || rec.Phases["solve"] < 0 || rec.Apply.Calls != 2 {
		t.Errorf("record: digest %q, phases %v, apply %+v", rec.InputsDigest, rec.Phases, rec.Apply)
	}

	// A second round with nothing changed keeps the cluster as it is when
	// the decision is the same: no API writes for kept jobs.
	before := len(fc.Applied)
	rec1, err := s.RunRound(ctx, TriggerManual, nil)
	if err != nil {
		t.Fatalf("round 1: %v", err)
	}
	if rec1.Round != 1 || st.Stored().Round != 2 || len(st.Records()) != 2 {
		t.Errorf("after round 1: record round %d, ledger round %d, %d records", rec1.Round, st.Stored().Round, len(st.Records()))
	}
	for _, line := range fc.Applied[before:] {
		if strings.HasPrefix(line, "start a ") {
			t.Errorf("round 1 restarted job a, which kept its model: %q", fc.Applied[before:])
		}
	}
	if st.Stored().Jobs["default/a"].RoundsRun < 1 || st.Stored().Jobs["default/a"].Done <= 0 {
		t.Errorf("job a record %+v: want rounds run and progress", st.Stored().Jobs["default/a"])
	}

	// A finished job leaves the fairness ledger and is never touched again.
	fc.Jobs["default/a"].Finished = true
	before = len(fc.Applied)
	if _, err := s.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatalf("round 2: %v", err)
	}
	for _, line := range fc.Applied[before:] {
		if strings.Contains(line, " a ") {
			t.Errorf("finished job touched: %q", line)
		}
	}
	if got := st.Stored().Jobs["default/a"].Status; got != StatusFinished {
		t.Errorf("finished job status %q, want %q", got, StatusFinished)
	}
}

func TestServiceConflictAndFailures(t *testing.T) {
	fc := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 1}},
		Jobs: map[string]*Job{"default/a": Ptr(NewJob("a").TP(a100, 1).Obj())}}
	st := NewMemStore(false)
	s := New(fc, fc, st)
	ctx := context.Background()
	if _, err := s.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	// Another replica wrote a round meanwhile: the write is refused, nothing
	// is recorded twice, and the next round reloads and goes on.
	other := *st.Stored()
	other.Version += 5
	other.Round = 7
	st.Replace(other)
	if _, err := s.RunRound(ctx, TriggerManual, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("round over a changed ledger: err = %v, want ErrConflict", err)
	}
	rec, err := s.RunRound(ctx, TriggerManual, nil)
	if err != nil || rec.Round != 7 {
		t.Fatalf("round after reload: %v, %v; want round 7", rec, err)
	}
	// A failing observation fails the round and names the phase.
	fc.FailObserve = errors.New("connection refused")
	_, err = s.RunRound(ctx, TriggerManual, nil)
	var pe *PhaseError
	if !errors.As(err, &pe) || pe.Phase != "observe" {
		t.Errorf("observe failure: err = %v, want a PhaseError for observe", err)
	}
	// A panic is recovered and fails only its round.
	fc.FailObserve, fc.Panic = nil, true
	if _, err := s.RunRound(ctx, TriggerManual, nil); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("panicking round: err = %v", err)
	}
	fc.Panic = false
	if _, err := s.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Errorf("round after a panic: %v", err)
	}
}

func TestNoFitReasons(t *testing.T) {
	snap := &Snapshot{
		Models: []allocator.Model{{Name: a100, GPUs: 2}},
		Jobs: []Job{
			NewJob("unknown").TP("H100", 3).Obj(),
			NewJob("big").GPUs(8).TP(a100, 3).Obj(),
			NewJob("ok").TP(a100, 1).TP("H100", 2).Obj(),
		},
	}
	pr := buildProblem(0, snap, nil, inputs{cfg: allocator.DefaultConfig()})
	want := map[string]string{
		"default/unknown": `fft.throughput = "H100=3" names no GPU model of the cluster; the cluster has NVIDIA A100-SXM4-40GB (2 GPUs)`,
		"default/big":     `device "nvidia/gpu" count = 8: more GPUs than any model named in fft.throughput has; the cluster has NVIDIA A100-SXM4-40GB (2 GPUs)`,
	}
	if !reflect.DeepEqual(pr.noFit, want) {
		t.Errorf("no-fit reasons:\n got  %q\n want %q", pr.noFit, want)
	}
	// The job that fits runs with the cluster's models only.
	if len(pr.instance.Jobs) != 1 || !reflect.DeepEqual(pr.instance.Jobs[0].Throughput, map[string]float64{a100: 1}) {
		t.Errorf("instance jobs %+v", pr.instance.Jobs)
	}
	if err := pr.instance.Validate(); err != nil {
		t.Errorf("built instance is invalid: %v", err)
	}
}

// TestRunningFlag: the engine sees a job as running (a park would stop it)
// only when the ledger chose it last round and it still holds an
// allocation, or its start is in flight: ungated on that model, Nomad has
// not placed it yet (it had no allocation when the last round looked, and
// has none now) and has not refused it.
func TestRunningFlag(t *testing.T) {
	prev := map[string]JobRecord{
		"default/holds":     {JobState: fairness.JobState{Work: 10, Tau: 5}, LastModel: a100, Status: StatusRunning},
		"default/gone":      {JobState: fairness.JobState{Work: 10, Tau: 5}, LastModel: a100, Status: StatusRunning, RunID: 7},
		"default/in-flight": {JobState: fairness.JobState{Work: 10, Tau: 5}, LastModel: a100, Status: StatusRunning},
		"default/refused":   {JobState: fairness.JobState{Work: 10, Tau: 5}, LastModel: a100, Status: StatusRunning},
		"default/parked":    {JobState: fairness.JobState{Work: 10, Tau: 5}, LastModel: a100, Status: StatusWaiting},
		"default/no-last":   {JobState: fairness.JobState{Work: 10, Tau: 5}, Status: StatusRunning},
	}
	refused := NewJob("refused").TP(a100, 1).Ungated(a100).Obj()
	refused.Refused = "no node has its GPUs"
	snap := &Snapshot{Models: []allocator.Model{{Name: a100, GPUs: 4}}, Jobs: []Job{
		NewJob("holds").TP(a100, 1).Running(a100).Obj(),
		NewJob("gone").TP(a100, 1).Ungated(a100).Obj(),
		NewJob("in-flight").TP(a100, 1).Ungated(a100).Obj(),
		refused,
		NewJob("parked").TP(a100, 1).Running(a100).Obj(),
		NewJob("no-last").TP(a100, 1).Running(a100).Obj(),
	}}
	pr := buildProblem(3, snap, prev, inputs{cfg: allocator.DefaultConfig()})
	got := map[string]bool{}
	for _, j := range pr.instance.Jobs {
		got[strings.TrimPrefix(j.ID, "default/")] = j.Running
	}
	if want := map[string]bool{"holds": true, "gone": false, "in-flight": true, "refused": false, "parked": false, "no-last": false}; !reflect.DeepEqual(got, want) {
		t.Errorf("running flags %v, want %v", got, want)
	}
	if err := pr.instance.Validate(); err != nil {
		t.Errorf("built instance is invalid: %v", err)
	}
}

// A job that fits nowhere for a while (its model's node drained) keeps its rho, frozen, and
// comes back with it; its audit line shows the frozen rho.
func TestNoFitKeepsRho(t *testing.T) {
	prev := map[string]JobRecord{
		"default/big": {JobState: fairness.JobState{Work: 10, Tau: 5, Rho: 0.7}, LastModel: a100, Status: StatusRunning},
	}
	job := NewJob("big").GPUs(4).TP(a100, 1).Obj()
	small := buildProblem(3, &Snapshot{Models: []allocator.Model{{Name: a100, GPUs: 2}}, Jobs: []Job{job}}, prev, inputs{cfg: allocator.DefaultConfig()})
	rec := small.records["default/big"]
	if rec.Status != StatusNoFit || rec.Rho != 0.7 {
		t.Fatalf("on 2 GPUs: status %q rho %g, want %q and 0.7", rec.Status, rec.Rho, StatusNoFit)
	}
	back := buildProblem(4, &Snapshot{Models: []allocator.Model{{Name: a100, GPUs: 4}}, Jobs: []Job{job}}, small.records, inputs{cfg: allocator.DefaultConfig()})
	if got := back.instance.Fairness.Rho("default/big"); got != 0.7 {
		t.Errorf("back on 4 GPUs: rho %g, want the 0.7 it had", got)
	}
}

func TestFinishedAndFailedLeaveTheLedger(t *testing.T) {
	done := NewJob("done").TP(a100, 1).Finished().Obj()
	failed := NewJob("failed").TP(a100, 1).Finished().Obj()
	failed.Failed = true
	prev := map[string]JobRecord{
		"default/done":   {JobState: fairness.JobState{Work: 10, Tau: 5, Rho: 1}, Status: StatusRunning},
		"default/failed": {JobState: fairness.JobState{Work: 10, Tau: 5, Rho: 2}, Status: StatusRunning},
	}
	pr := buildProblem(3, &Snapshot{Models: []allocator.Model{{Name: a100, GPUs: 1}}, Jobs: []Job{done, failed}}, prev, inputs{cfg: allocator.DefaultConfig()})
	if pr.records["default/done"].Status != StatusFinished || pr.records["default/failed"].Status != StatusFailed {
		t.Errorf("records %+v: want finished and failed", pr.records)
	}
	if len(pr.instance.Jobs) != 0 || len(pr.instance.Fairness.Jobs) != 0 {
		t.Errorf("ended jobs are still in the round: %+v, ledger %+v", pr.instance.Jobs, pr.instance.Fairness.Jobs)
	}
}

func TestReportedProgressReplacesTheEstimate(t *testing.T) {
	fc := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 1}},
		Jobs: map[string]*Job{"default/a": Ptr(NewJob("a").TP(a100, 1).Obj())}}
	st := NewMemStore(false)
	s := New(fc, fc, st)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := s.RunRound(ctx, TriggerManual, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Stored().Jobs["default/a"].Done; got != 2 {
		t.Fatalf("estimated progress after 2 rounds at 1 per round = %g, want 2", got)
	}
	// The job reports it is behind: the report wins, and the round adds its own estimate on
	// top until the next report.
	_ = st.ReportProgress(ctx, "default/a", 1)
	if _, err := s.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	if got := st.Stored().Jobs["default/a"].Done; got != 2 {
		t.Errorf("progress after a report of 1 and one more round = %g, want 2", got)
	}
	// It reports it is further along than the 3 rounds it held allow at its rate: the report
	// is capped by what it earned (claims.go).
	_ = st.ReportProgress(ctx, "default/a", 7)
	if _, err := s.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	if got, r := st.Stored().Jobs["default/a"].Done, st.Stored().Jobs["default/a"]; got != 4 || r.Earned != 4 {
		t.Errorf("progress after a report of 7 with 3 earned and one more round = %g (earned %g), want 4", got, r.Earned)
	}
	// Bad reports are ignored.
	_ = st.ReportProgress(ctx, "default/a", -1)
	if _, err := s.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	if got := st.Stored().Jobs["default/a"].Done; got != 5 {
		t.Errorf("progress after a negative report = %g, want 5 (the estimate)", got)
	}
}

func TestTenantWeights(t *testing.T) {
	// Two jobs share one A100 (1 unit per round, 12 units of work each):
	// the paper gives each half of it (tau 24); with weights 2 and 0.5 they
	// get 2/3 and 1/3 (tau 18 and 36): a's 2 counts as 1, since a job may
	// only lower its own weight (issue 20).
	for _, tc := range []struct {
		name       string
		weighted   bool
		wantTau    map[string]float64
		wantWeight map[string]float64
	}{
		{"paper: weights recorded as labels only", false,
			map[string]float64{"default/a": 24, "default/b": 24}, map[string]float64{"default/a": 0, "default/b": 0}},
		{"tenant weights", true,
			map[string]float64{"default/a": 18, "default/b": 36}, map[string]float64{"default/a": 0, "default/b": 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 1}}, Jobs: map[string]*Job{}}
			for _, j := range []Job{
				NewJob("a").TP(a100, 1).Tenant("alice", 2).Obj(),
				NewJob("b").TP(a100, 1).Tenant("bob", 0.5).Obj(),
			} {
				j.Spec.Work = 12
				fc.Jobs[j.ID] = Ptr(j)
			}
			st := NewMemStore(false)
			s := New(fc, fc, st, WithTenantWeights(tc.weighted))
			rec, err := s.RunRound(context.Background(), TriggerManual, nil)
			if err != nil {
				t.Fatal(err)
			}
			gotTau, gotWeight, gotAudit := map[string]float64{}, map[string]float64{}, map[string]string{}
			for id, r := range s.Ledger().Jobs {
				gotTau[id], gotWeight[id] = r.Tau, r.Weight
			}
			for _, ja := range rec.Jobs {
				gotAudit[ja.ID] = fmt.Sprintf("%s %g", ja.User, ja.Weight)
			}
			if !reflect.DeepEqual(gotTau, tc.wantTau) || !reflect.DeepEqual(gotWeight, tc.wantWeight) {
				t.Errorf("tau %v weights %v, want %v %v", gotTau, gotWeight, tc.wantTau, tc.wantWeight)
			}
			wantAudit := map[string]string{
				"default/a": fmt.Sprintf("alice %g", tc.wantWeight["default/a"]),
				"default/b": fmt.Sprintf("bob %g", tc.wantWeight["default/b"]),
			}
			if !reflect.DeepEqual(gotAudit, wantAudit) || rec.TenantWeights != tc.weighted {
				t.Errorf("audit user/weight %v tenant_weights %v, want %v %v", gotAudit, rec.TenantWeights, wantAudit, tc.weighted)
			}
			if u := st.Stored().Jobs["default/b"].User; u != "bob" {
				t.Errorf("stored record of b has user %q, want bob", u)
			}
		})
	}
}

// An operator's park holds across rounds and freezes the job's rho; resume brings it back
// with that rho; a pin lets the job run on its model only.
func TestOverrides(t *testing.T) {
	fc := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 2}, {Name: v100, GPUs: 2}}, Jobs: map[string]*Job{
		"default/a": Ptr(NewJob("a").GPUs(2).Work(100).TP(a100, 4).TP(v100, 1).Obj()),
		"default/b": Ptr(NewJob("b").GPUs(2).Work(100).TP(a100, 2).TP(v100, 2).Obj()),
		"default/c": Ptr(NewJob("c").GPUs(2).Work(100).TP(a100, 1).TP(v100, 1).Obj()),
	}}
	st := NewMemStore(true)
	s := New(fc, fc, st)
	ctx := context.Background()
	round := func() *RoundRecord {
		t.Helper()
		rec, err := s.RunRound(ctx, TriggerManual, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	line := func(rec *RoundRecord, id string) JobAudit {
		for _, l := range rec.Jobs {
			if l.ID == id {
				return l
			}
		}
		t.Fatalf("round %d has no line for %s", rec.Round, id)
		return JobAudit{}
	}
	r0 := round()
	if r0.Assignment["default/a"] != a100 {
		t.Fatalf("round 0: %v, want a on the A100", r0.Assignment)
	}
	// Park a: it is stopped, stays off across rounds, and its rho does not move.
	if err := st.SetOverride(ctx, "default/a", Override{Action: OverridePark, By: "ops"}); err != nil {
		t.Fatal(err)
	}
	r1 := round()
	l := line(r1, "default/a")
	if _, runs := r1.Assignment["default/a"]; runs || l.Action != ActionPark || l.ReasonCode != CodeParkedByOperator || l.Override != "park by ops" {
		t.Fatalf("round 1: a %+v, assignment %v; want parked by the operator", l, r1.Assignment)
	}
	rho := st.Stored().Jobs["default/a"].Rho
	for i := 0; i < 3; i++ {
		rec := round()
		if _, runs := rec.Assignment["default/a"]; runs || line(rec, "default/a").Action != ActionKeep {
			t.Fatalf("round %d: parked a runs or is touched: %+v", rec.Round, line(rec, "default/a"))
		}
	}
	if got := st.Stored().Jobs["default/a"]; got.Rho != rho || got.Status != StatusParked {
		t.Errorf("parked a: rho %g status %q, want %g frozen and %q", got.Rho, got.Status, rho, StatusParked)
	}
	// Resume: a is back in the round with the rho it had.
	if err := st.LiftOverride(ctx, "default/a"); err != nil {
		t.Fatal(err)
	}
	r := round()
	if got := line(r, "default/a"); got.RhoBefore != rho || got.ReasonCode == CodeParkedByOperator {
		t.Errorf("resumed a: %+v, want rho before %g", got, rho)
	}
	// Pin b to the V100: wherever the policy runs it, it is there.
	if err := st.SetOverride(ctx, "default/b", Override{Action: OverridePin, Model: v100}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		rec := round()
		if m, runs := rec.Assignment["default/b"]; runs && m != v100 {
			t.Fatalf("round %d: pinned b runs on %s", rec.Round, m)
		}
		if l := line(rec, "default/b"); l.Override != "pin on "+v100 {
			t.Errorf("round %d: b's line has override %q", rec.Round, l.Override)
		}
		for _, o := range line(rec, "default/b").Options {
			if o.Model != v100 {
				t.Errorf("round %d: pinned b priced on %s", rec.Round, o.Model)
			}
		}
	}
	// A pin to a model the job declares nothing on holds it, saying why.
	if err := st.SetOverride(ctx, "default/c", Override{Action: OverridePin, Model: "H100"}); err != nil {
		t.Fatal(err)
	}
	if l := line(round(), "default/c"); l.ReasonCode != allocator.CodeNoFit || !strings.Contains(l.Reason, "pinned to H100") {
		t.Errorf("c pinned to an unknown model: %+v", l)
	}
	for _, bad := range []Override{{Action: "stop"}, {Action: OverridePin}, {Action: OverridePark, Model: v100}} {
		if err := st.SetOverride(ctx, "default/c", bad); err == nil {
			t.Errorf("override %+v accepted", bad)
		}
	}
}

// Tenant shares: with every share equal and one job per tenant the ledger is exactly the
// paper's; a tenant's ten jobs split one share, so a lone job of another tenant is owed half
// the cluster.
func TestTenantShares(t *testing.T) {
	ledger := func(shares *TenantShares, users ...string) map[string]JobRecord {
		t.Helper()
		fc := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 1}}, Jobs: map[string]*Job{}}
		for k, u := range users {
			fc.Set(NewJob(fmt.Sprintf("j%02d", k)).Work(12).TP(a100, 1).Tenant(u, 1).Obj())
		}
		st := NewMemStore(false)
		s := New(fc, fc, st, WithTenantShares(shares))
		for r := 0; r < 3; r++ {
			if _, err := s.RunRound(context.Background(), TriggerManual, nil); err != nil {
				t.Fatal(err)
			}
		}
		return st.Stored().Jobs
	}
	// The operator maps every user to the namespace its jobs run in.
	users := map[string]string{"a": "default", "b": "default", "c": "default", "solo": "default", "crowd": "default"}
	equal := &TenantShares{By: TenantByUser, Users: users}
	if d := cmp.Diff(ledger(nil, "a", "b", "c"), ledger(equal, "a", "b", "c")); d != "" {
		t.Errorf("equal shares, one job per tenant: ledger differs from the paper's (-paper,+shares):\n%s", d)
	}
	ten := append([]string{"solo"}, strings.Split(strings.Repeat("crowd ", 10), " ")[:10]...)
	paper, shared := ledger(nil, ten...), ledger(equal, ten...)
	// Paper: 11 jobs, each 1/11 of the A100 (tau 132). Shares: solo 1/2 (tau 24), each crowd
	// job 1/20 (tau 240).
	if got := paper["default/j00"].Tau; got != 132 {
		t.Errorf("paper tau of the lone job %g, want 132", got)
	}
	if got, want := shared["default/j00"].Tau, 24.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("shared tau of the lone job %g, want %g", got, want)
	}
	if got, want := shared["default/j01"].Tau, 240.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("shared tau of a crowd job %g, want %g", got, want)
	}
	if err := (&TenantShares{By: "team"}).Validate(); err == nil {
		t.Error("tenants by team accepted")
	}
	if err := (&TenantShares{By: TenantByUser, Shares: map[string]float64{"a": -1}}).Validate(); err == nil {
		t.Error("a negative share accepted")
	}
}

// A job's measured restart time and checkpoint size (its task driver's report) replace the
// configured restart_seconds and its declared fft.state_size in its prices, and the audit
// line says so; a job that reported nothing is priced as configured. A measured restart
// longer than the configured one is a claim that would make the job harder to park: it is
// priced at the configured one, and the line keeps the claim (issue 20).
func TestMeasuredRestartPrices(t *testing.T) {
	fc := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 2}, {Name: v100, GPUs: 2}}, Jobs: map[string]*Job{
		"default/m": Ptr(NewJob("m").GPUs(2).TP(a100, 4).TP(v100, 1).Running(a100).Obj()),
		"default/c": Ptr(NewJob("c").GPUs(2).TP(a100, 4).TP(v100, 1).Running(v100).Obj()),
	}}
	st := NewMemStore(false)
	ctx := context.Background()
	// m ran on the A100 before (its ledger says so), c on the V100.
	st.Replace(Ledger{Round: 3, Clock: 3, Jobs: map[string]JobRecord{
		"default/m": {Status: StatusRunning, LastModel: a100}, "default/c": {Status: StatusRunning, LastModel: v100}}})
	secs, bytes := 20.0, 4e9
	if err := st.StoreReport(ctx, "default/m", report.Report{Done: 1, RestartSeconds: &secs, CheckpointBytes: &bytes}); err != nil {
		t.Fatal(err)
	}
	long := 90.0
	if err := st.StoreReport(ctx, "default/c", report.Report{Done: 1, RestartSeconds: &long}); err != nil {
		t.Fatal(err)
	}
	cfg := allocator.DefaultConfig()
	rec, err := New(fc, fc, st, WithConfig(cfg)).RunRound(ctx, TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	switchOn := func(l JobAudit, model string) float64 {
		for _, o := range l.Options {
			if o.Model == model {
				return o.Switch
			}
		}
		t.Fatalf("%s has no option on %s", l.ID, model)
		return 0
	}
	for _, l := range rec.Jobs {
		switch l.ID {
		case "default/m":
			want := &RestartPrice{Seconds: 20, SecondsSource: SourceMeasured, CheckpointGB: 4, CheckpointSource: SourceMeasured}
			if d := cmp.Diff(want, l.Restart); d != "" {
				t.Errorf("m's restart price (-want,+got):\n%s", d)
			}
			// A move to the V100: d * (20 s + 4 GB * 8 / 10 Gbit/s) / 300 s.
			if got, want := switchOn(l, v100), 2*(20+3.2)/300; math.Abs(got-want) > 1e-12 {
				t.Errorf("m's switching penalty %g, want %g from the measured values", got, want)
			}
		case "default/c":
			want := &RestartPrice{Seconds: 30, SecondsSource: SourceConfigured, ClaimedSeconds: 90, CheckpointSource: SourceDeclared}
			if d := cmp.Diff(want, l.Restart); d != "" {
				t.Errorf("c's restart price (-want,+got):\n%s", d)
			}
			if got, want := switchOn(l, a100), 2*30.0/300; math.Abs(got-want) > 1e-12 {
				t.Errorf("c's switching penalty %g, want %g from the configured 30 s", got, want)
			}
		}
	}
}

// panicky is a policy whose Observe panics, as a learning policy's bug would.
type panicky struct{ policy.Policy }

func (panicky) Observe(*policy.Snapshot, policy.Assignment, map[string]float64) {
	panic("observe failed")
}

// A panic in the bookkeeping, which runs beside the apply in its own goroutine, fails the
// round and not the process, with the panicking goroutine's stack.
func TestRoundRecoversBookkeepingPanic(t *testing.T) {
	fc := &Harness{
		Models: []allocator.Model{{Name: a100, GPUs: 2}},
		Jobs:   map[string]*Job{"default/a": Ptr(NewJob("a").GPUs(1).TP(a100, 1).Obj())},
	}
	st := NewMemStore(true)
	pol := New(fc, fc, st).Policy()
	_, err := New(fc, fc, st, WithPolicy(panicky{pol})).RunRound(context.Background(), TriggerManual, nil)
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "observe failed" || !strings.Contains(pe.Stack, "panicky.Observe") {
		t.Fatalf("round with a panicking Observe: err %v; want a PanicError with Observe's stack", err)
	}
	if st.Stored().Round != 0 {
		t.Errorf("the failed round was recorded: stored round %d", st.Stored().Round)
	}
	if _, err := New(fc, fc, st, WithPolicy(pol)).RunRound(context.Background(), TriggerManual, nil); err != nil {
		t.Errorf("the round after: %v", err)
	}
}
