package policy

import "context"

// BinpackName is the registry name of the Nomad-like binpack.
const BinpackName = "binpack"

// Binpack is what Nomad's scheduler does with GPU jobs on its own: jobs in
// arrival order, each placed on the model that is fullest after placement
// (Nomad's binpack score), never preempted and never moved. It knows
// nothing of throughput differences.
type Binpack struct{}

var _ Policy = Binpack{}

// NewBinpack is Binpack's factory.
func NewBinpack(Options) Policy { return Binpack{} }

func (Binpack) Name() string { return BinpackName }

func (Binpack) Schedule(_ context.Context, s *Snapshot) (Assignment, error) {
	a, f := keepRunning(s)
	for k := range s.Jobs {
		j := &s.Jobs[k]
		if _, ok := a[j.ID]; ok {
			continue
		}
		best, bestFill := -1, -1.0
		for i := range s.Models {
			m := &s.Models[i]
			if !j.Fits(m) || f[m.Name] < j.GPUs {
				continue
			}
			fill := float64(m.GPUs-f[m.Name]+j.GPUs) / float64(m.GPUs)
			if fill > bestFill {
				best, bestFill = i, fill
			}
		}
		if best >= 0 {
			f.place(a, j, &s.Models[best])
		}
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
