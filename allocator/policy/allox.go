package policy

import (
	"context"
	"math"
	"sort"
)

// AlloXName is the registry name of AlloX.
const AlloXName = "allox"

// AlloX (Le et al., EuroSys'20) minimises the sum of completion times of
// single-GPU jobs on heterogeneous GPUs by a min-cost matching of jobs to
// (machine, position-from-last) slots: job j in the k-th last position on a
// machine of model i costs k * p_ji, p_ji its remaining time there. Every
// GPU of a model is one machine. The matching is recomputed when the active
// set changes; each round jobs are started in matching order (the job
// furthest from the end of its machine's sequence runs first) while their
// model has room. Multi-GPU jobs (outside AlloX's model) are matched
// as if they needed one machine and gang-placed when room allows.
//
// The matching is solved exactly as a min-cost flow over (model, layer)
// slots (matchSlots), not over the GPUs' positions one by one: at the FFT
// paper's scale (4,000 jobs, 1,000 GPUs) that was a 4,000 × 32,000 dense
// matrix for the Hungarian method, which remains the tests' oracle.
type AlloX struct {
	key   string
	order []alloxSlot
}

type alloxSlot struct {
	id       string
	model    int
	position int
	p        float64
}

var _ Policy = (*AlloX)(nil)

// NewAlloX is AlloX's factory.
func NewAlloX(Options) Policy { return &AlloX{} }

func (*AlloX) Name() string { return AlloXName }

func (p *AlloX) Schedule(_ context.Context, s *Snapshot) (Assignment, error) {
	if key := activeKey(s); key != p.key {
		order, err := alloxMatch(s)
		if err != nil {
			return nil, err
		}
		p.key, p.order = key, order
	}
	a, f := make(Assignment, len(s.Jobs)), newFree(s)
	byID := make(map[string]*Job, len(s.Jobs))
	for k := range s.Jobs {
		byID[s.Jobs[k].ID] = &s.Jobs[k]
	}
	for _, sl := range p.order {
		if j := byID[sl.id]; j != nil {
			f.place(a, j, &s.Models[sl.model])
		}
	}
	return a, nil
}

// alloxMatch solves the matching and returns jobs by (position descending
// from the machine's end, i.e. who runs first), then processing time.
func alloxMatch(s *Snapshot) ([]alloxSlot, error) {
	ptime := make([][]float64, len(s.Jobs))
	gpus := make([]int, len(s.Models))
	for i := range s.Models {
		gpus[i] = s.Models[i].GPUs
	}
	for k := range s.Jobs {
		j := &s.Jobs[k]
		ptime[k] = make([]float64, len(s.Models))
		for i := range s.Models {
			ptime[k][i] = math.Inf(1)
			if j.Fits(&s.Models[i]) {
				ptime[k][i] = j.Remaining() / j.RatePerSecond[s.Models[i].Name]
			}
		}
	}
	model, layer, err := matchSlots(ptime, gpus)
	if err != nil {
		return nil, err
	}
	out := make([]alloxSlot, 0, len(s.Jobs))
	for k, i := range model {
		if i >= 0 {
			out = append(out, alloxSlot{s.Jobs[k].ID, i, layer[k], ptime[k][i]})
		}
	}
	// The job in the k-th last position runs before those after it, so a
	// higher layer runs earlier.
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].position != out[b].position {
			return out[a].position > out[b].position
		}
		return out[a].p < out[b].p
	})
	return out, nil
}
