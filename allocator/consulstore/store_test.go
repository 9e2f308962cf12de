package consulstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/report"
	"github.com/nomad-fft/nomad-fft/e2e/consultest"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// startConsul runs a dev agent on loopback ports and stops it when the test ends.
func startConsul(t *testing.T) *api.Client {
	_, c := consultest.Start(t)
	return c
}

func record(id string, rho float64) loop.JobRecord {
	return loop.JobRecord{JobState: fairness.JobState{Arrival: 0, Work: 10, Tau: 5, Rho: rho}, Status: loop.StatusWaiting}
}

func TestStoreAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	s := New(c, "test/nomad-fft/v1")

	l, err := s.Load(ctx)
	if err != nil || l.Round != 0 || l.Version != 0 || len(l.Jobs) != 0 {
		t.Fatalf("Load of an empty store = %+v, %v; want round 0, version 0", l, err)
	}
	// Round 0: two jobs, plus enough more to need several transactions.
	next := &loop.Ledger{Round: 1, Jobs: map[string]loop.JobRecord{}}
	for i := 0; i < 150; i++ {
		next.Jobs[fmt.Sprintf("default/job-%03d", i)] = record("", float64(i))
	}
	rec := &loop.RoundRecord{Round: 0, InputsDigest: "abc", Assignment: map[string]string{"default/job-001": "A100"},
		Jobs: []loop.JobAudit{{ID: "default/job-001", Model: "A100", RhoBefore: 0, RhoAfter: 0.5}}}
	if err := s.Record(ctx, l, next, rec); err != nil {
		t.Fatalf("Record round 0: %v", err)
	}
	if next.Version == 0 {
		t.Fatal("Record did not set the new version")
	}
	got, err := s.Load(ctx)
	if err != nil || got.Round != 1 || got.Version != next.Version || len(got.Jobs) != 150 || got.Jobs["default/job-007"].Rho != 7 {
		t.Fatalf("Load after round 0 = round %d version %d (want %d), %d jobs, job-007 %+v, err %v",
			got.Round, got.Version, next.Version, len(got.Jobs), got.Jobs["default/job-007"], err)
	}
	back, err := s.ReadRound(ctx, 0)
	if err != nil || back.InputsDigest != "abc" || back.Jobs[0].RhoAfter != 0.5 {
		t.Fatalf("ReadRound(0) = %+v, %v", back, err)
	}

	// A stale writer (still at the empty store's version) loses and writes nothing.
	stale := &loop.Ledger{Round: 1, Jobs: map[string]loop.JobRecord{"default/intruder": record("", 1)}}
	err = s.Record(ctx, l, stale, &loop.RoundRecord{Round: 0, InputsDigest: "other"})
	if !errors.Is(err, loop.ErrConflict) {
		t.Fatalf("stale Record: err = %v, want ErrConflict", err)
	}
	if l, _ := s.Load(ctx); !reflect.DeepEqual(l.Jobs["default/intruder"], loop.JobRecord{}) {
		t.Errorf("a lost CAS wrote job default/intruder: %+v", l.Jobs["default/intruder"])
	}
	if back, _ := s.ReadRound(ctx, 0); back.InputsDigest != "abc" {
		t.Errorf("a lost CAS replaced round 0's record: %+v", back)
	}

	// Round 1 from the current version: one job changes, one leaves.
	cur, _ := s.Load(ctx)
	next2 := &loop.Ledger{Round: 2, Jobs: map[string]loop.JobRecord{}}
	for id, r := range cur.Jobs {
		next2.Jobs[id] = r
	}
	delete(next2.Jobs, "default/job-000")
	r := next2.Jobs["default/job-001"]
	r.Rho, r.Status, r.User, r.Weight = 0.25, loop.StatusRunning, "alice", 2
	next2.Jobs["default/job-001"] = r
	if err := s.Record(ctx, cur, next2, &loop.RoundRecord{Round: 1}); err != nil {
		t.Fatalf("Record round 1: %v", err)
	}
	got, _ = s.Load(ctx)
	if _, ok := got.Jobs["default/job-000"]; ok || !reflect.DeepEqual(got.Jobs["default/job-001"], r) || got.Round != 2 {
		t.Errorf("after round 1: job-000 kept %v, job-001 %+v, round %d", ok, got.Jobs["default/job-001"], got.Round)
	}
	// The fairness clock and the last round's start survive; a ledger written before they
	// existed counted whole rounds, so its clock is its round and its start unknown.
	start := time.Date(2025, 6, 1, 12, 0, 0, 500, time.UTC)
	next3 := &loop.Ledger{Round: 3, Clock: 2.25, Start: start, Jobs: got.Jobs}
	if err := s.Record(ctx, got, next3, &loop.RoundRecord{Round: 2}); err != nil {
		t.Fatalf("Record round 2: %v", err)
	}
	if got, _ = s.Load(ctx); got.Clock != 2.25 || !got.Start.Equal(start) {
		t.Errorf("clock %g, start %v after recording %g, %v", got.Clock, got.Start, next3.Clock, start)
	}
	if _, err := c.KV().Put(&api.KVPair{Key: "test/old/v2/ledger", Value: []byte(`{"layout":2,"round":7}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if old, err := New(c, "test/old/v2").Load(ctx); err != nil || old.Round != 7 || old.Clock != 7 || !old.Start.IsZero() {
		t.Errorf("Load of a ledger without clock = %+v, %v; want round 7, clock 7, no start", old, err)
	}
	// A layout-1 store (one key per job) is refused, naming the layouts.
	if _, err := c.KV().Put(&api.KVPair{Key: "test/old/v1/ledger", Value: []byte(`{"layout":1,"round":7}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(c, "test/old/v1").Load(ctx); err == nil || !strings.Contains(err.Error(), "layout 1, this code reads layout 2") {
		t.Errorf("Load of a layout-1 ledger: err = %v, want a refusal naming both layouts", err)
	}
	if _, err := s.ReadRound(ctx, 9); !errors.Is(err, ErrNoRound) {
		t.Errorf("ReadRound of a missing round: %v", err)
	}
	// Progress reports: plain numbers a script writes; bad ones are named and skipped.
	for key, v := range map[string]string{"default/job-001": "42.5\n", "default/job-002": "-3", "team/job-x": "7"} {
		if _, err := c.KV().Put(&api.KVPair{Key: s.ProgressKey(key), Value: []byte(v)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	prog, err := s.Progress(ctx)
	if want := map[string]float64{"default/job-001": 42.5, "team/job-x": 7}; !reflect.DeepEqual(prog, want) {
		t.Errorf("Progress = %v, want %v", prog, want)
	}
	if err == nil || !strings.Contains(err.Error(), "progress/default/job-002") {
		t.Errorf("Progress error %v does not name the bad key", err)
	}
	// ReportProgress writes what Progress reads, and refuses what it would skip.
	if err := s.ReportProgress(ctx, "team/job-x", 9.25); err != nil {
		t.Fatal(err)
	}
	if prog, _ := s.Progress(ctx); prog["team/job-x"] != 9.25 {
		t.Errorf("after ReportProgress(9.25): %v", prog)
	}
	for _, bad := range []struct {
		id   string
		done float64
	}{{"team/job-x", -1}, {"team/job-x", math.NaN()}, {"job-x", 1}, {"a/..", 1}, {"../ledger", 1}} {
		if err := s.ReportProgress(ctx, bad.id, bad.done); err == nil {
			t.Errorf("ReportProgress(%q, %g) accepted", bad.id, bad.done)
		}
	}
	// A driver's full report: Progress still reads its done, Reports the rest.
	full := report.Report{Done: 11, ThroughputPerSecond: report.Float(2.5), GPUModel: "V100", GPUs: 2, CheckpointBytes: report.Float(4096)}
	if err := s.StoreReport(ctx, "team/job-z", full); err != nil {
		t.Fatal(err)
	}
	if prog, _ := s.Progress(ctx); prog["team/job-z"] != 11 {
		t.Errorf("Progress after StoreReport(done 11): %v", prog)
	}
	if reps, _ := s.Reports(ctx); !reflect.DeepEqual(reps["team/job-z"], full) || reps["team/job-x"].Done != 9.25 {
		t.Errorf("Reports = %+v, want team/job-z = %+v and team/job-x done 9.25", reps, full)
	}
	if err := s.StoreReport(ctx, "team/job-z", report.Report{Done: 1, RestartSeconds: report.Float(-1)}); err == nil || !strings.Contains(err.Error(), "restart_seconds") {
		t.Errorf("StoreReport of a negative restart_seconds: %v", err)
	}
	// The allocator's progress endpoint writes the same key, through a
	// service that does not lead (a standby).
	srv := httptest.NewServer(live.Handler(live.New(loop.New(nil, nil, s))))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/v1/progress/team/job-y", strings.NewReader(`{"done": 3.5}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if prog, _ := s.Progress(ctx); resp.StatusCode != http.StatusOK || prog["team/job-y"] != 3.5 {
		t.Errorf("PUT /v1/progress/team/job-y: status %d, then Progress = %v; want 200 and 3.5", resp.StatusCode, prog)
	}

	// Keys live under the versioned prefix.
	keys, _, _ := c.KV().Keys("test/nomad-fft/v1/", "", nil)
	for _, k := range keys {
		if !strings.HasPrefix(k, "test/nomad-fft/v1/ledger") && !strings.HasPrefix(k, "test/nomad-fft/v1/jobs/") && !strings.HasPrefix(k, "test/nomad-fft/v1/rounds/") && !strings.HasPrefix(k, "test/nomad-fft/v1/leader") && !strings.HasPrefix(k, "test/nomad-fft/v1/progress/") {
			t.Errorf("unexpected key %q", k)
		}
	}
}

func TestLeadAgainstConsul(t *testing.T) {
	c := startConsul(t)
	a, b := New(c, "test/lead/v1"), New(c, "test/lead/v1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ctxA, stopA := context.WithCancel(ctx)
	aRunning, aDone := make(chan struct{}), make(chan error, 1)
	go func() {
		aDone <- a.Lead(ctxA, "replica-a", MinLeaderTTL, func(run context.Context) {
			close(aRunning)
			<-run.Done()
		})
	}()
	select {
	case <-aRunning:
	case <-time.After(20 * time.Second):
		t.Fatal("replica a did not get the lock")
	}
	bRunning, bDone := make(chan struct{}), make(chan error, 1)
	go func() {
		bDone <- b.Lead(ctx, "replica-b", MinLeaderTTL, func(run context.Context) {
			close(bRunning)
			<-run.Done()
		})
	}()
	select {
	case <-bRunning:
		t.Fatal("replica b runs while a holds the lock")
	case <-time.After(2 * time.Second):
	}
	if id, err := a.Leader(ctx); err != nil || id != "replica-a" {
		t.Errorf("Leader = %q, %v; want replica-a", id, err)
	}
	// a stops (releasing the lock): b takes over.
	stopA()
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Errorf("a.Lead returned %v", err)
	}
	select {
	case <-bRunning:
	case <-time.After(20 * time.Second):
		t.Fatal("replica b did not take over")
	}
	if id, _ := b.Leader(ctx); id != "replica-b" {
		t.Errorf("Leader = %q, want replica-b", id)
	}
	cancel()
	<-bDone
}

func TestNeedsNamesPolicy(t *testing.T) {
	s := New(nil, "team/fft/v1")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{api.StatusError{Code: 403, Body: "Permission denied"}, `lacks key_prefix "team/fft/v1/" policy "write"`},
		{errors.New("transaction refused: op 0: Permission denied"), `lacks key_prefix "team/fft/v1/" policy "write"`},
		{errors.New("connection refused"), ""},
	} {
		got := s.needs(tc.err, "write")
		if tc.want == "" {
			if got != tc.err {
				t.Errorf("needs(%v) = %v, want it unchanged", tc.err, got)
			}
			continue
		}
		if !errors.Is(got, tc.err) || !strings.Contains(got.Error(), tc.want) {
			t.Errorf("needs(%v) = %v, want it wrapped naming %q", tc.err, got, tc.want)
		}
	}
}
