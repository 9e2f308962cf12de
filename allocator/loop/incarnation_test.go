package loop

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// TestReRegisteredJobStartsFresh: a job purged and registered again under the same ID (what
// `nomad job run` of the same file does after `nomad job stop -purge`) is a new job: it
// inherits neither the old one's ledger record nor its progress report, and the stale report
// is deleted. A job that leaves Nomad has its report deleted too.
func TestReRegisteredJobStartsFresh(t *testing.T) {
	ctx := context.Background()
	// Both run, fast enough that a report of 98 after one round is within what their rate
	// allows (reports are capped by the progress the job can have earned: issue 20).
	h := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 2}}}
	h.Set(NewJob("a").Work(1000).TP(a100, 100).Created(100).Obj())
	h.Set(NewJob("gone").Work(1000).TP(a100, 100).Created(101).Obj())
	store := NewMemStore(false)
	l := New(h, h, store)
	if _, err := l.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"default/a", "default/gone"} {
		if err := store.ReportProgress(ctx, id, 98); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	if got := l.Ledger().Jobs["default/a"].Done; got < 98 {
		t.Fatalf("the first incarnation's done = %g, want its report 98 or more", got)
	}
	firstArrival := l.Ledger().Jobs["default/a"].Arrival

	// Purged and registered again (a new create index); "gone" is purged for good.
	h.mu.Lock()
	delete(h.Jobs, "default/gone")
	h.mu.Unlock()
	h.Set(NewJob("a").Work(1000).TP(a100, 1).Created(200).Obj())
	if _, err := l.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	rec := l.Ledger().Jobs["default/a"]
	// One round at most ran it since (1 work unit a round on the A100).
	if rec.Done > 1 || rec.Arrival == firstArrival || rec.CreateIndex != 200 {
		t.Errorf("the new incarnation's record: done %g (want at most 1), arrival %d (the old one's %d), create index %d (want 200)",
			rec.Done, rec.Arrival, firstArrival, rec.CreateIndex)
	}
	left, _ := store.Progress(ctx)
	for _, id := range []string{"default/a", "default/gone"} {
		if v, ok := left[id]; ok {
			t.Errorf("the stale report of %s (%g) is still stored", id, v)
		}
	}
	// And it stays fresh round after round.
	if _, err := l.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	if got := l.Ledger().Jobs["default/a"].Done; got > 2 {
		t.Errorf("done = %g two rounds after re-registration, want at most 2", got)
	}
}

// TestLateReportOfAPurgedJob: the old job's last report can land after a round forgot the
// purged job; a report tied to its allocation's job (JobCreateIndex) still does not count
// for the job registered again, and is deleted.
func TestLateReportOfAPurgedJob(t *testing.T) {
	ctx := context.Background()
	h := &Harness{Models: []allocator.Model{{Name: a100, GPUs: 1}}}
	h.Set(NewJob("a").Work(1000).TP(a100, 10).Created(100).Obj())
	store := NewMemStore(false)
	l := New(h, h, store)
	if _, err := l.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	// Purged: a round forgets it.
	h.mu.Lock()
	delete(h.Jobs, "default/a")
	h.mu.Unlock()
	if _, err := l.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	// Its last report lands, tied to the old job; then it is registered again.
	if err := store.StoreAllocReport(ctx, "default/a", "alloc-old", report.Report{Done: 98, JobCreateIndex: 100}); err != nil {
		t.Fatal(err)
	}
	h.Set(NewJob("a").Work(1000).TP(a100, 10).Created(200).Obj())
	if _, err := l.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	if got := l.Ledger().Jobs["default/a"].Done; got > 10 {
		t.Errorf("the new job's done = %g, want at most one round's 10: the old job's late report counted", got)
	}
	if left, _ := store.Progress(ctx); len(left) != 0 {
		t.Errorf("reports left %v, want the late one deleted", left)
	}
	// A report of the new job's own allocation counts.
	if err := store.StoreAllocReport(ctx, "default/a", "alloc-new", report.Report{Done: 7, JobCreateIndex: 200}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RunRound(ctx, TriggerManual, nil); err != nil {
		t.Fatal(err)
	}
	if got := l.Ledger().Jobs["default/a"].Done; got < 7 {
		t.Errorf("the new job's own report 7: done %g", got)
	}
}
