package policy

import (
	"context"
	"sort"
)

// TiresiasName is the registry name of Tiresias.
const TiresiasName = "tiresias"

// TiresiasThreshold is the attained service (GPU-seconds) at which a job
// drops from the high- to the low-priority queue. Tiresias tunes it per
// cluster; one GPU-hour is our default.
const TiresiasThreshold = 3600.0

// Tiresias is two-queue discretised least-attained-service (Gu et al.,
// NSDI'19) adapted to heterogeneous clusters as the FFT paper does: one
// queue pair per GPU model. A job is bound at arrival to the model whose
// queue is least loaded relative to its size (ties: the faster model);
// each round, per model, jobs run by queue (attained service below the
// threshold first), then arrival, preempting as needed.
type Tiresias struct {
	bound map[string]string
}

var _ Policy = (*Tiresias)(nil)

// NewTiresias is Tiresias's factory.
func NewTiresias(Options) Policy { return &Tiresias{bound: map[string]string{}} }

func (*Tiresias) Name() string { return TiresiasName }

func (p *Tiresias) Schedule(_ context.Context, s *Snapshot) (Assignment, error) {
	load := make(map[string]int, len(s.Models))
	live := make(map[string]bool, len(s.Jobs))
	for k := range s.Jobs {
		j := &s.Jobs[k]
		live[j.ID] = true
		if m, ok := p.bound[j.ID]; ok {
			load[m] += j.GPUs
		}
	}
	for id := range p.bound {
		if !live[id] {
			delete(p.bound, id)
		}
	}
	for k := range s.Jobs {
		j := &s.Jobs[k]
		if _, ok := p.bound[j.ID]; ok {
			continue
		}
		best, bestLoad := -1, 0.0
		for i := range s.Models {
			m := &s.Models[i]
			if !j.Fits(m) {
				continue
			}
			l := float64(load[m.Name]+j.GPUs) / float64(m.GPUs)
			if best < 0 || l < bestLoad || (l == bestLoad && j.RatePerSecond[m.Name] > j.RatePerSecond[s.Models[best].Name]) {
				best, bestLoad = i, l
			}
		}
		if best >= 0 {
			p.bound[j.ID] = s.Models[best].Name
			load[s.Models[best].Name] += j.GPUs
		}
	}
	order := make([]int, len(s.Jobs))
	for k := range order {
		order[k] = k
	}
	queue := func(j *Job) int {
		if j.AttainedGPUSeconds < TiresiasThreshold {
			return 0
		}
		return 1
	}
	// s.Jobs is sorted by arrival, so a stable sort by queue keeps FIFO
	// order within each queue.
	sort.SliceStable(order, func(a, b int) bool { return queue(&s.Jobs[order[a]]) < queue(&s.Jobs[order[b]]) })
	a, f := make(Assignment, len(s.Jobs)), newFree(s)
	byName := make(map[string]*Model, len(s.Models))
	for i := range s.Models {
		byName[s.Models[i].Name] = &s.Models[i]
	}
	for _, k := range order {
		j := &s.Jobs[k]
		if m := byName[p.bound[j.ID]]; m != nil {
			f.place(a, j, m)
		}
	}
	return a, nil
}
