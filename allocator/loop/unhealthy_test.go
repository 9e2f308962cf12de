package loop

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// A running job whose allocation holds a GPU Nomad reports unhealthy is parked by the next
// round (audited with its reason, its rho unchanged, no credit), and a later round starts it
// again.
func TestUnhealthyGPUParksTheJob(t *testing.T) {
	h := &Harness{
		Models: []allocator.Model{{Name: a100, GPUs: 2}},
		Jobs: map[string]*Job{
			"default/a": Ptr(NewJob("a").TP(a100, 1).Obj()),
			"default/b": Ptr(NewJob("b").TP(a100, 1).Obj()),
		},
	}
	st := NewMemStore(true)
	s := New(h, h, st)
	ctx := context.Background()
	rec, err := s.RunRound(ctx, TriggerManual, nil)
	if err != nil || rec.Assignment["default/a"] != a100 || rec.Assignment["default/b"] != a100 {
		t.Fatalf("round 0 assigned %v (%v), want both jobs on the two A100s", rec.Assignment, err)
	}
	// One GPU turns unhealthy under a: capacity drops to 1 and Nomad leaves a where it is.
	h.Models = []allocator.Model{{Name: a100, GPUs: 1}}
	h.Jobs["default/a"].UnhealthyGPU = true
	rhoBefore := st.Stored().Jobs["default/a"].Rho
	runsBefore := st.Stored().Jobs["default/a"].RoundsRun
	rec, err = s.RunRound(ctx, TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.Assignment["default/a"]; ok {
		t.Errorf("round 1 assigned a on its unhealthy GPU: %v", rec.Assignment)
	}
	if !h.Jobs["default/a"].Gated || len(h.Jobs["default/a"].Allocs) != 0 {
		t.Errorf("job a not parked: %+v", h.Jobs["default/a"])
	}
	found := false
	for _, l := range rec.Jobs {
		if l.ID == "default/a" {
			found = true
			if l.ReasonCode != CodeUnhealthyGPU || l.Action != ActionPark || l.RhoBefore != rhoBefore || l.RhoAfter != rhoBefore {
				t.Errorf("audit line %+v, want %s, park, rho %g kept", l, CodeUnhealthyGPU, rhoBefore)
			}
		}
	}
	if !found {
		t.Errorf("round 1 has no audit line for a: %+v", rec.Jobs)
	}
	if r := st.Stored().Jobs["default/a"]; r.RoundsRun != runsBefore || r.Status != StatusWaiting {
		t.Errorf("ledger of a %+v, want %d rounds run and waiting", r, runsBefore)
	}
	// A later round runs a again (Nomad puts it on a healthy GPU) once there is room.
	h.Models = []allocator.Model{{Name: a100, GPUs: 2}}
	if rec, err = s.RunRound(ctx, TriggerManual, nil); err != nil || rec.Assignment["default/a"] != a100 {
		t.Errorf("round 2 assigned %v (%v), want a back on A100", rec.Assignment, err)
	}
}
