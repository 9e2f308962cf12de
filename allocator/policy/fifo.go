package policy

import (
	"context"
	"math/rand/v2"
)

// FIFO registry names: Gavel's heterogeneity-agnostic "fifo" and its
// heterogeneity-aware "fifo_perf" (fastest model with room).
const (
	FIFOName     = "fifo"
	FIFOPerfName = "fifo-perf"
)

// FIFO runs jobs in arrival order without preemption, as Gavel's FIFO
// baselines: the head of the queue goes to a model chosen at random
// (seeded) among those with room for it, or with Perf to the fastest such
// model; a running job keeps its model until it finishes. When the head
// fits nowhere, the queue waits (no backfilling), as in Gavel.
type FIFO struct {
	rng  *rand.Rand
	perf bool
}

var _ Policy = (*FIFO)(nil)

// NewFIFO is FIFO's factory.
func NewFIFO(opt Options) Policy {
	return &FIFO{rng: rand.New(rand.NewPCG(uint64(opt.Seed), 0x6669666f))}
}

// NewFIFOPerf is the heterogeneity-aware FIFO's factory.
func NewFIFOPerf(Options) Policy { return &FIFO{perf: true} }

func (p *FIFO) Name() string {
	if p.perf {
		return FIFOPerfName
	}
	return FIFOName
}

func (p *FIFO) Schedule(_ context.Context, s *Snapshot) (Assignment, error) {
	a, f := keepRunning(s)
	var room []int
	for k := range s.Jobs {
		j := &s.Jobs[k]
		if _, ok := a[j.ID]; ok {
			continue
		}
		room = room[:0]
		for i := range s.Models {
			if j.Fits(&s.Models[i]) && f[s.Models[i].Name] >= j.GPUs {
				room = append(room, i)
			}
		}
		if len(room) == 0 {
			break
		}
		pick := room[0]
		if p.perf {
			for _, i := range room {
				if j.Rate[s.Models[i].Name] > j.Rate[s.Models[pick].Name] {
					pick = i
				}
			}
		} else {
			pick = room[p.rng.IntN(len(room))]
		}
		f.place(a, j, &s.Models[pick])
	}
	return a, nil
}

// keepRunning assigns every running job to the model it ran on (for
// non-preemptive policies) and returns the GPUs left.
func keepRunning(s *Snapshot) (Assignment, free) {
	a, f := make(Assignment, len(s.Jobs)), newFree(s)
	for k := range s.Jobs {
		j := &s.Jobs[k]
		if j.Running != "" {
			a[j.ID] = j.Running
			f[j.Running] -= j.GPUs
		}
	}
	return a, f
}
