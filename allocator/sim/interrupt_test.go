package sim_test

import (
	"context"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// cancelling interrupts the run inside its third round's solve, as Ctrl-C
// does during a long FFT solve.
type cancelling struct {
	policy.Policy
	cancel func()
	calls  int
}

func (c *cancelling) Schedule(ctx context.Context, s *policy.Snapshot) (policy.Assignment, error) {
	if c.calls++; c.calls == 3 {
		c.cancel()
		return nil, ctx.Err()
	}
	return c.Policy.Schedule(ctx, s)
}

// An interrupt inside a round stops the run with what it has, not an error.
func TestInterruptInsideRound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &cancelling{Policy: policy.NewFIFO(policy.Options{}), cancel: cancel}
	lg, err := sim.Run(ctx, p, workload.NewGenerator(workload.GenConfig{Rate: 2, Seed: 0, MultiGPU: true, Jobs: 20}), sim.Config{Cluster: guardCluster})
	if err != nil {
		t.Fatalf("interrupted run failed: %v", err)
	}
	if lg.Stopped != context.Canceled.Error() || len(lg.Rounds) != 2 {
		t.Errorf("stopped %q after %d rounds, want %q after 2", lg.Stopped, len(lg.Rounds), context.Canceled.Error())
	}
}
