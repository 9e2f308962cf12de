package consulstore

import (
	"context"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// TestChildJobsAgainstConsul: dispatched and periodic children of a parameterized or
// periodic job ("parent/dispatch-…", "parent/periodic-…") have a "/" in their ID, as Nomad
// names them. Their reports and overrides are stored under one escaped key each, below their
// namespace, and read back under their own IDs; a child never lands on its parent's key.
func TestChildJobsAgainstConsul(t *testing.T) {
	c := startConsul(t)
	ctx := context.Background()
	s := New(c, "test/childjobs")
	ids := []string{"default/parent", "default/parent/dispatch-1700000000-abcd1234", "team-x/nightly/periodic-1700000000", "default/odd%2Fname"}
	for i, id := range ids {
		if err := s.StoreAllocReport(ctx, id, "alloc-1", report.Report{Done: float64(i + 1)}); err != nil {
			t.Fatalf("storing a report of %s: %v", id, err)
		}
		if err := s.SetOverride(ctx, id, loop.Override{Action: loop.OverridePark, Note: "child " + id}); err != nil {
			t.Fatalf("overriding %s: %v", id, err)
		}
	}
	reps, err := s.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ovs, err := s.Overrides(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if r := reps[id]; r.Done != float64(i+1) {
			t.Errorf("report of %s read back as %+v, want done %d", id, r, i+1)
		}
		if o := ovs[id]; o.Action != loop.OverridePark || o.Note != "child "+id {
			t.Errorf("override of %s read back as %+v", id, o)
		}
	}
	if len(reps) != len(ids) || len(ovs) != len(ids) {
		t.Errorf("read back %d reports and %d overrides, want %d each: %v", len(reps), len(ovs), len(ids), reps)
	}
	// One key step below the namespace each: no key of a child is below its parent's.
	pairs, _, err := c.KV().Keys("test/childjobs/progress/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range pairs {
		if rest := strings.TrimPrefix(k, "test/childjobs/progress/"); strings.Count(rest, "/") != 1 {
			t.Errorf("key %s is not one step below its namespace", k)
		}
	}
	if err := s.PruneProgress(ctx, []string{"default/parent/dispatch-1700000000-abcd1234"}); err != nil {
		t.Fatal(err)
	}
	left, _ := s.Progress(ctx)
	if _, ok := left["default/parent/dispatch-1700000000-abcd1234"]; ok || left["default/parent"] != 1 {
		t.Errorf("after pruning the dispatched child: %v, want its parent left", left)
	}
}
