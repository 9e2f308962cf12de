package live

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/fairness"
)

const (
	a100 = "NVIDIA A100-SXM4-40GB"
	v100 = "Tesla V100-SXM2-16GB"
)

// jobB builds a Job fixture: jobB("a").GPUs(2).TP(a100, 2).Obj().
type jobB struct{ j Job }

func newJob(id string) *jobB {
	return &jobB{Job{ID: "default/" + id, Namespace: "default", Name: id, Gated: true, ModifyIndex: 10,
		Spec: &jobmeta.Spec{Work: 10, WorkUnit: "steps", Weight: 1, GPUs: 1, Throughput: map[string]float64{}}}}
}
func (b *jobB) GPUs(n int) *jobB                 { b.j.Spec.GPUs = n; return b }
func (b *jobB) TP(model string, v float64) *jobB { b.j.Spec.Throughput[model] = v; return b }
func (b *jobB) Tenant(user string, weight float64) *jobB {
	b.j.Spec.User, b.j.Spec.Weight = user, weight
	return b
}
func (b *jobB) Running(model string) *jobB {
	b.j.Gated, b.j.Model, b.j.RunningModel, b.j.Allocs = false, model, model, []string{"alloc-" + b.j.Name}
	return b
}
func (b *jobB) Ungated(model string) *jobB { b.j.Gated, b.j.Model = false, model; return b }

// OffPool holds the job by its node pool instead of the gate, as a plain
// `nomad job run` in the default pool leaves it.
func (b *jobB) OffPool() *jobB  { b.j.Gated, b.j.OffPool = false, true; return b }
func (b *jobB) Finished() *jobB { b.j.Finished = true; return b }
func (b *jobB) Obj() Job        { return b.j }

func TestDiff(t *testing.T) {
	jobs := []Job{
		newJob("held-selected").TP(a100, 1).Obj(),
		newJob("held-waiting").TP(a100, 1).Obj(),
		newJob("running-kept").Running(a100).Obj(),
		newJob("running-parked").Running(a100).Obj(),
		newJob("running-moved").Running(v100).Obj(),
		newJob("placing-same").Ungated(a100).Obj(),
		newJob("ungated-other").Ungated(v100).Obj(),
		newJob("ungated-unselected").Ungated(a100).Obj(),
		newJob("done").Running(a100).Finished().Obj(),
		newJob("pool-waiting").TP(a100, 1).OffPool().Obj(),
		newJob("pool-selected").TP(a100, 1).OffPool().Obj(),
		newJob("pool-steered").OffPool().Ungated(a100).Obj(),
		newJob("in-pool-unselected").TP(a100, 1).Ungated("").Obj(),
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
	again := Diff([]Job{newJob("running-kept").Running(a100).Obj(), newJob("held-waiting").Obj()}, map[string]string{"default/running-kept": a100})
	if len(again.Changes()) != 0 {
		t.Errorf("Diff of a matching cluster has changes: %#v", again)
	}
}

// fakeCluster is an Observer and Applier over in-memory jobs; it applies a
// plan the way Nomad would, instantly.
type fakeCluster struct {
	models  []allocator.Model
	jobs    map[string]*Job
	applied []string
	calls   int
	failObs error
	panicky bool
}

func (f *fakeCluster) Observe(context.Context) (*Snapshot, error) {
	if f.panicky {
		panic("observer bug")
	}
	if f.failObs != nil {
		return nil, f.failObs
	}
	s := &Snapshot{Models: f.models, Calls: 1}
	for _, id := range sortedKeys(f.jobs) {
		s.Jobs = append(s.Jobs, *f.jobs[id])
	}
	return s, nil
}

func sortedKeys(m map[string]*Job) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func (f *fakeCluster) Apply(_ context.Context, p *Plan) ApplyResult {
	var r ApplyResult
	for _, c := range p.Changes() {
		j := f.jobs[c.Job.ID]
		f.applied = append(f.applied, fmt.Sprintf("%s %s %s", c.Action, j.Name, c.Model))
		r.Calls++
		switch c.Action {
		case ActionStart, ActionMigrate:
			j.Gated, j.Model, j.RunningModel, j.Allocs = false, c.Model, c.Model, []string{"a"}
		case ActionPark:
			j.Gated, j.RunningModel, j.Allocs = true, "", nil
		}
		if r.Applied == nil {
			r.Applied = map[Action]int{}
		}
		r.Applied[c.Action]++
	}
	return r
}

// memStore is an in-memory Store with check-and-set.
type memStore struct {
	ledger  Ledger
	records []*RoundRecord
}

func (m *memStore) Load(context.Context) (*Ledger, error) {
	l := m.ledger
	l.Jobs = map[string]JobRecord{}
	for k, v := range m.ledger.Jobs {
		l.Jobs[k] = v
	}
	return &l, nil
}

func (m *memStore) Record(_ context.Context, prev, next *Ledger, rec *RoundRecord) error {
	if prev.Version != m.ledger.Version {
		return fmt.Errorf("writing round %d: %w", rec.Round, ErrConflict)
	}
	next.Version = m.ledger.Version + 1
	m.ledger = *next
	m.records = append(m.records, rec)
	return nil
}

func TestServiceRounds(t *testing.T) {
	fc := &fakeCluster{
		models: []allocator.Model{{Name: a100, GPUs: 2}, {Name: v100, GPUs: 2}},
		jobs: map[string]*Job{
			"default/a": ptr(newJob("a").GPUs(2).TP(a100, 4).TP(v100, 1).Obj()),
			"default/b": ptr(newJob("b").GPUs(2).TP(a100, 2).TP(v100, 2).Obj()),
			"default/c": ptr(newJob("c").GPUs(2).TP(a100, 1).TP(v100, 1).Obj()),
			"default/x": ptr(newJob("x").GPUs(4).TP(a100, 1).Obj()), // fits no model: 2 A100 only
		},
	}
	st := &memStore{}
	s := New(fc, fc, st)
	ctx := context.Background()
	rec, err := s.RunRound(ctx)
	if err != nil {
		t.Fatalf("round 0: %v", err)
	}
	if rec.Round != 0 || len(rec.Assignment) != 2 {
		t.Fatalf("round 0 assigned %v, want 2 jobs (4 GPUs, 2+2 capacity)", rec.Assignment)
	}
	if got := rec.Assignment["default/a"]; got != a100 {
		t.Errorf("job a runs on %q, want %q (4x faster there)", got, a100)
	}
	if fc.jobs["default/x"].Gated != true || st.ledger.Jobs["default/x"].Status != StatusNoFit {
		t.Errorf("job x: gated %v, status %q; want held and %q", fc.jobs["default/x"].Gated, st.ledger.Jobs["default/x"].Status, StatusNoFit)
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
	before := len(fc.applied)
	rec1, err := s.RunRound(ctx)
	if err != nil {
		t.Fatalf("round 1: %v", err)
	}
	if rec1.Round != 1 || st.ledger.Round != 2 || len(st.records) != 2 {
		t.Errorf("after round 1: record round %d, ledger round %d, %d records", rec1.Round, st.ledger.Round, len(st.records))
	}
	for _, line := range fc.applied[before:] {
		if strings.HasPrefix(line, "start a ") {
			t.Errorf("round 1 restarted job a, which kept its model: %q", fc.applied[before:])
		}
	}
	if st.ledger.Jobs["default/a"].RoundsRun < 1 || st.ledger.Jobs["default/a"].Done <= 0 {
		t.Errorf("job a record %+v: want rounds run and progress", st.ledger.Jobs["default/a"])
	}

	// A finished job leaves the fairness ledger and is never touched again.
	fc.jobs["default/a"].Finished = true
	before = len(fc.applied)
	if _, err := s.RunRound(ctx); err != nil {
		t.Fatalf("round 2: %v", err)
	}
	for _, line := range fc.applied[before:] {
		if strings.Contains(line, " a ") {
			t.Errorf("finished job touched: %q", line)
		}
	}
	if got := st.ledger.Jobs["default/a"].Status; got != StatusFinished {
		t.Errorf("finished job status %q, want %q", got, StatusFinished)
	}
}

func TestServiceConflictAndFailures(t *testing.T) {
	fc := &fakeCluster{models: []allocator.Model{{Name: a100, GPUs: 1}},
		jobs: map[string]*Job{"default/a": ptr(newJob("a").TP(a100, 1).Obj())}}
	st := &memStore{}
	s := New(fc, fc, st)
	ctx := context.Background()
	if _, err := s.RunRound(ctx); err != nil {
		t.Fatal(err)
	}
	// Another replica wrote a round meanwhile: the write is refused, nothing
	// is recorded twice, and the next round reloads and goes on.
	st.ledger.Version += 5
	st.ledger.Round = 7
	if _, err := s.RunRound(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("round over a changed ledger: err = %v, want ErrConflict", err)
	}
	rec, err := s.RunRound(ctx)
	if err != nil || rec.Round != 7 {
		t.Fatalf("round after reload: %v, %v; want round 7", rec, err)
	}
	// A failing observation fails the round and names the phase.
	fc.failObs = errors.New("connection refused")
	_, err = s.RunRound(ctx)
	var pe *PhaseError
	if !errors.As(err, &pe) || pe.Phase != "observe" {
		t.Errorf("observe failure: err = %v, want a PhaseError for observe", err)
	}
	// A panic is recovered and fails only its round.
	fc.failObs, fc.panicky = nil, true
	if _, err := s.RunRound(ctx); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("panicking round: err = %v", err)
	}
	fc.panicky = false
	if _, err := s.RunRound(ctx); err != nil {
		t.Errorf("round after a panic: %v", err)
	}
	if got := s.Status(); got.Failures != 3 || got.Rounds != 6 {
		t.Errorf("status counts rounds %d failures %d, want 6 and 3", got.Rounds, got.Failures)
	}
}

func ptr[T any](v T) *T { return &v }

func TestHandler(t *testing.T) {
	fc := &fakeCluster{models: []allocator.Model{{Name: a100, GPUs: 1}},
		jobs: map[string]*Job{"default/a": ptr(newJob("a").TP(a100, 1).Obj())}}
	s := New(fc, fc, &memStore{})
	h := Handler(s)
	get := func(path string) (int, string) {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest("GET", path, nil))
		return rr.Code, rr.Body.String()
	}
	if code, body := get("/v1/health"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("health before any round: %d %s", code, body)
	}
	if _, err := s.RunRound(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/v1/status"); code != 200 || !strings.Contains(body, `"next_round": 1`) || !strings.Contains(body, `"default/a"`) {
		t.Errorf("status: %d %s", code, body)
	}
	code, body := get("/v1/metrics")
	for _, want := range []string{"fft_rounds_total 1", `fft_jobs{state="running"} 1`, `fft_rho{job="default/a"}`, "fft_solve_seconds",
		`fft_applied_changes_total{action="start"} 1`, `fft_applied_changes_total{action="park"} 0`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	fc.failObs = errors.New("down")
	_, _ = s.RunRound(context.Background())
	if code, body := get("/v1/health"); code != 503 || !strings.Contains(body, "down") {
		t.Errorf("health after a failed round: %d %s", code, body)
	}
}

func TestNoFitReasons(t *testing.T) {
	snap := &Snapshot{
		Models: []allocator.Model{{Name: a100, GPUs: 2}},
		Jobs: []Job{
			newJob("unknown").TP("H100", 3).Obj(),
			newJob("big").GPUs(8).TP(a100, 3).Obj(),
			newJob("ok").TP(a100, 1).TP("H100", 2).Obj(),
		},
	}
	pr := buildProblem(0, snap, nil, nil, allocator.DefaultConfig(), false)
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
// allocation.
func TestRunningFlag(t *testing.T) {
	prev := map[string]JobRecord{
		"default/holds":   {JobState: fairness.JobState{Work: 10, Tau: 5}, LastModel: a100, Status: StatusRunning},
		"default/gone":    {JobState: fairness.JobState{Work: 10, Tau: 5}, LastModel: a100, Status: StatusRunning},
		"default/parked":  {JobState: fairness.JobState{Work: 10, Tau: 5}, LastModel: a100, Status: StatusWaiting},
		"default/no-last": {JobState: fairness.JobState{Work: 10, Tau: 5}, Status: StatusRunning},
	}
	snap := &Snapshot{Models: []allocator.Model{{Name: a100, GPUs: 4}}, Jobs: []Job{
		newJob("holds").TP(a100, 1).Running(a100).Obj(),
		newJob("gone").TP(a100, 1).Ungated(a100).Obj(),
		newJob("parked").TP(a100, 1).Running(a100).Obj(),
		newJob("no-last").TP(a100, 1).Running(a100).Obj(),
	}}
	pr := buildProblem(3, snap, prev, nil, allocator.DefaultConfig(), false)
	got := map[string]bool{}
	for _, j := range pr.instance.Jobs {
		got[strings.TrimPrefix(j.ID, "default/")] = j.Running
	}
	if want := map[string]bool{"holds": true, "gone": false, "parked": false, "no-last": false}; !reflect.DeepEqual(got, want) {
		t.Errorf("running flags %v, want %v", got, want)
	}
	if err := pr.instance.Validate(); err != nil {
		t.Errorf("built instance is invalid: %v", err)
	}
}

func TestFinishedAndFailedLeaveTheLedger(t *testing.T) {
	done := newJob("done").TP(a100, 1).Finished().Obj()
	failed := newJob("failed").TP(a100, 1).Finished().Obj()
	failed.Failed = true
	prev := map[string]JobRecord{
		"default/done":   {JobState: fairness.JobState{Work: 10, Tau: 5, Rho: 1}, Status: StatusRunning},
		"default/failed": {JobState: fairness.JobState{Work: 10, Tau: 5, Rho: 2}, Status: StatusRunning},
	}
	pr := buildProblem(3, &Snapshot{Models: []allocator.Model{{Name: a100, GPUs: 1}}, Jobs: []Job{done, failed}}, prev, nil, allocator.DefaultConfig(), false)
	if pr.records["default/done"].Status != StatusFinished || pr.records["default/failed"].Status != StatusFailed {
		t.Errorf("records %+v: want finished and failed", pr.records)
	}
	if len(pr.instance.Jobs) != 0 || len(pr.instance.Fairness.Jobs) != 0 {
		t.Errorf("ended jobs are still in the round: %+v, ledger %+v", pr.instance.Jobs, pr.instance.Fairness.Jobs)
	}
}

// progressStore is a memStore whose jobs report progress.
type progressStore struct {
	memStore
	reports map[string]float64
}

func (p *progressStore) Progress(context.Context) (map[string]float64, error) { return p.reports, nil }

func TestReportedProgressReplacesTheEstimate(t *testing.T) {
	fc := &fakeCluster{models: []allocator.Model{{Name: a100, GPUs: 1}},
		jobs: map[string]*Job{"default/a": ptr(newJob("a").TP(a100, 1).Obj())}}
	st := &progressStore{reports: map[string]float64{}}
	s := New(fc, fc, st)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := s.RunRound(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.ledger.Jobs["default/a"].Done; got != 2 {
		t.Fatalf("estimated progress after 2 rounds at 1 per round = %g, want 2", got)
	}
	// The job reports it is further along (or behind): the report wins, and the round adds
	// its own estimate on top until the next report.
	st.reports["default/a"] = 7
	if _, err := s.RunRound(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.ledger.Jobs["default/a"].Done; got != 8 {
		t.Errorf("progress after a report of 7 and one more round = %g, want 8", got)
	}
	// Bad reports are ignored.
	st.reports["default/a"] = -1
	if _, err := s.RunRound(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.ledger.Jobs["default/a"].Done; got != 9 {
		t.Errorf("progress after a negative report = %g, want 9 (the estimate)", got)
	}
}

func TestTenantWeights(t *testing.T) {
	// Two jobs share one A100 (1 unit per round, 12 units of work each):
	// the paper gives each half of it (tau 24); with weights 2 and 1 they
	// get 2/3 and 1/3 (tau 18 and 36).
	for _, tc := range []struct {
		name       string
		weighted   bool
		wantTau    map[string]float64
		wantWeight map[string]float64
	}{
		{"paper: weights recorded as labels only", false,
			map[string]float64{"default/a": 24, "default/b": 24}, map[string]float64{"default/a": 0, "default/b": 0}},
		{"tenant weights", true,
			map[string]float64{"default/a": 18, "default/b": 36}, map[string]float64{"default/a": 2, "default/b": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeCluster{models: []allocator.Model{{Name: a100, GPUs: 1}}, jobs: map[string]*Job{}}
			for _, j := range []Job{
				newJob("a").TP(a100, 1).Tenant("alice", 2).Obj(),
				newJob("b").TP(a100, 1).Tenant("bob", 1).Obj(),
			} {
				j.Spec.Work = 12
				fc.jobs[j.ID] = ptr(j)
			}
			st := &memStore{}
			s := New(fc, fc, st, WithTenantWeights(tc.weighted))
			rec, err := s.RunRound(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			gotTau, gotWeight, gotAudit := map[string]float64{}, map[string]float64{}, map[string]string{}
			for id, r := range s.Status().Jobs {
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
				"default/b": "bob 0",
			}
			if !reflect.DeepEqual(gotAudit, wantAudit) || rec.TenantWeights != tc.weighted {
				t.Errorf("audit user/weight %v tenant_weights %v, want %v %v", gotAudit, rec.TenantWeights, wantAudit, tc.weighted)
			}
			if u := st.ledger.Jobs["default/b"].User; u != "bob" {
				t.Errorf("stored record of b has user %q, want bob", u)
			}
		})
	}
}

// reportStore is a memStore that takes progress reports (or fails to).
type reportStore struct {
	memStore
	reports map[string]float64
	err     error
}

func (r *reportStore) ReportProgress(_ context.Context, id string, done float64) error {
	if r.err != nil {
		return r.err
	}
	r.reports[id] = done
	return nil
}

func TestProgressEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body string
		storeErr                 error
		noReporter               bool
		wantCode                 int
		// wantBody must appear in the answer; wantStored is what the store holds after.
		wantBody   string
		wantStored map[string]float64
	}{
		{name: "number", method: "PUT", path: "/v1/progress/default/train", body: "42",
			wantCode: 200, wantBody: `"job": "default/train"`, wantStored: map[string]float64{"default/train": 42}},
		{name: "number with newline (curl --data-binary)", method: "PUT", path: "/v1/progress/ml/train", body: " 12.5\n",
			wantCode: 200, wantBody: `"done": 12.5`, wantStored: map[string]float64{"ml/train": 12.5}},
		{name: "a driver's report, on a store that keeps the work done only", method: "PUT", path: "/v1/progress/default/train",
			body:     `{"done": 7, "throughput_per_second": 2.5, "gpu_model": "V100", "gpus": 2}`,
			wantCode: 200, wantStored: map[string]float64{"default/train": 7}},
		{name: "JSON, POST", method: "POST", path: "/v1/progress/default/train", body: `{"done": 0}`,
			wantCode: 200, wantStored: map[string]float64{"default/train": 0}},
		{name: "empty body", method: "PUT", path: "/v1/progress/default/train",
			wantCode: 400, wantBody: `empty body: the body is the work units done, a number >= 0 such as 42 or JSON {\"done\": 42}`},
		{name: "text", method: "PUT", path: "/v1/progress/default/train", body: "ten",
			wantCode: 400, wantBody: `body \"ten\" is not a number: the body is the work units done`},
		{name: "negative", method: "PUT", path: "/v1/progress/default/train", body: "-1",
			wantCode: 400, wantBody: `done = -1 is not a finite number >= 0: the body is`},
		{name: "NaN", method: "PUT", path: "/v1/progress/default/train", body: "NaN",
			wantCode: 400, wantBody: `done = NaN`},
		{name: "JSON typo", method: "PUT", path: "/v1/progress/default/train", body: `{"dnoe": 3}`,
			wantCode: 400, wantBody: `unknown field \"dnoe\"`},
		{name: "JSON without done", method: "PUT", path: "/v1/progress/default/train", body: `{}`,
			wantCode: 400, wantBody: `has no field \"done\"`},
		{name: "JSON string", method: "PUT", path: "/v1/progress/default/train", body: `{"done": "3"}`,
			wantCode: 400, wantBody: `is not a JSON progress report`},
		{name: "two objects", method: "PUT", path: "/v1/progress/default/train", body: `{"done": 1} {"done": 2}`,
			wantCode: 400, wantBody: `text after the object`},
		{name: "too big", method: "PUT", path: "/v1/progress/default/train", body: strings.Repeat(" ", maxProgressBody+1) + "1",
			wantCode: 413, wantBody: "body over 1024 bytes"},
		{name: "escaped slash in the job", method: "PUT", path: "/v1/progress/default/a%2Fb", body: "1",
			wantCode: 400, wantBody: `path job \"a/b\": expected one non-empty path segment`},
		{name: "GET is not allowed", method: "GET", path: "/v1/progress/default/train", wantCode: 405},
		{name: "no job", method: "PUT", path: "/v1/progress/default", body: "1", wantCode: 404},
		{name: "too many segments", method: "PUT", path: "/v1/progress/default/a/b", body: "1", wantCode: 404},
		{name: "store down", method: "PUT", path: "/v1/progress/default/train", body: "1", storeErr: errors.New("connection refused"),
			wantCode: 503, wantBody: "storing the report failed, retry: connection refused"},
		{name: "store takes no reports", method: "PUT", path: "/v1/progress/default/train", body: "1", noReporter: true,
			wantCode: 501, wantBody: "takes no progress reports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := &reportStore{reports: map[string]float64{}, err: tc.storeErr}
			var store Store = rs
			if tc.noReporter {
				store = &memStore{}
			}
			// The service never leads here: a standby takes reports too.
			s := New(&fakeCluster{}, &fakeCluster{}, store)
			rr := httptest.NewRecorder()
			Handler(s).ServeHTTP(rr, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rr.Code != tc.wantCode || !strings.Contains(rr.Body.String(), tc.wantBody) {
				t.Errorf("%s %s %q: %d %s, want %d containing %q", tc.method, tc.path, tc.body, rr.Code, rr.Body.String(), tc.wantCode, tc.wantBody)
			}
			if tc.wantCode == 405 && !strings.Contains(rr.Header().Get("Allow"), "PUT") {
				t.Errorf("405 without PUT in Allow: %q", rr.Header().Get("Allow"))
			}
			if diff := cmp.Diff(tc.wantStored, rs.reports, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("stored reports (-want,+got):\n%s", diff)
			}
		})
	}
}
