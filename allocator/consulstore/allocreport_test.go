package consulstore

import (
	"context"
	"errors"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// TestAllocReportsAndPruneAgainstConsul: a report below the stored one of the same
// allocation is refused by the store itself (so by every replica), a new allocation may go
// lower, and pruned reports are gone.
func TestAllocReportsAndPruneAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	s := New(c, "test/allocreport/v2")
	steps := []struct {
		alloc      string
		done       float64
		wantBehind bool
	}{
		{"alloc-1", 6, false}, {"alloc-1", 4, true}, {"alloc-1", 7, false}, {"alloc-2", 3, false}, {"", 1, false},
	}
	for _, st := range steps {
		err := s.StoreAllocReport(ctx, "default/a", st.alloc, report.Report{Done: st.done})
		var behind *loop.BehindError
		if got := errors.As(err, &behind); got != st.wantBehind || (err != nil && !got) {
			t.Fatalf("report %g from %q: %v, want behind = %v", st.done, st.alloc, err, st.wantBehind)
		}
	}
	if err := s.ReportProgress(ctx, "default/b", 9); err != nil {
		t.Fatal(err)
	}
	reps, err := s.Reports(ctx)
	if err != nil || reps["default/a"].Done != 1 || reps["default/a"].Alloc != "" || reps["default/b"].Done != 9 {
		t.Fatalf("reports %+v, %v; want a at 1 (no allocation), b at 9", reps, err)
	}
	if err := s.PruneProgress(ctx, []string{"default/a", "default/none"}); err != nil {
		t.Fatal(err)
	}
	left, err := s.Progress(ctx)
	if _, ok := left["default/a"]; ok || left["default/b"] != 9 || err != nil {
		t.Errorf("after pruning a: %v, %v; want only b", left, err)
	}
}
