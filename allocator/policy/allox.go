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
		p.key = key
		p.order = alloxMatch(s)
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
func alloxMatch(s *Snapshot) []alloxSlot {
	n := len(s.Jobs)
	if n == 0 {
		return nil
	}
	type col struct{ model, layer int }
	var cols []col
	for i, m := range s.Models {
		if m.GPUs <= 0 {
			continue
		}
		layers := (n + m.GPUs - 1) / m.GPUs
		for l := 1; l <= layers; l++ {
			for g := 0; g < m.GPUs && len(cols) < 1<<20; g++ {
				cols = append(cols, col{i, l})
			}
		}
	}
	const big = 1e18
	cost := make([][]float64, n)
	ptime := make([][]float64, n)
	for k := range s.Jobs {
		j := &s.Jobs[k]
		cost[k] = make([]float64, len(cols))
		ptime[k] = make([]float64, len(s.Models))
		for i := range s.Models {
			ptime[k][i] = math.Inf(1)
			if j.Fits(&s.Models[i]) {
				ptime[k][i] = j.Remaining() / j.RatePerSecond[s.Models[i].Name]
			}
		}
		for c, cl := range cols {
			if pt := ptime[k][cl.model]; !math.IsInf(pt, 1) {
				cost[k][c] = float64(cl.layer) * pt
			} else {
				cost[k][c] = big
			}
		}
	}
	match := hungarian(cost)
	out := make([]alloxSlot, 0, n)
	for k, c := range match {
		if c < 0 || cost[k][c] >= big {
			continue
		}
		out = append(out, alloxSlot{s.Jobs[k].ID, cols[c].model, cols[c].layer, ptime[k][cols[c].model]})
	}
	// The job in the k-th last position runs before those after it, so a
	// higher layer runs earlier.
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].position != out[b].position {
			return out[a].position > out[b].position
		}
		return out[a].p < out[b].p
	})
	return out
}

// hungarian returns, for each row of an n x m cost matrix (n <= m), the
// column of a minimum-cost matching (shortest augmenting paths with
// potentials, O(n^2 m)).
func hungarian(cost [][]float64) []int {
	n := len(cost)
	if n == 0 {
		return nil
	}
	m := len(cost[0])
	u := make([]float64, n+1)
	v := make([]float64, m+1)
	p := make([]int, m+1) // p[c] = row matched to column c (1-based), 0 = free
	way := make([]int, m+1)
	minv := make([]float64, m+1)
	used := make([]bool, m+1)
	for r := 1; r <= n; r++ {
		p[0] = r
		c0 := 0
		for c := range minv {
			minv[c] = math.Inf(1)
			used[c] = false
		}
		for {
			used[c0] = true
			r0, delta, c1 := p[c0], math.Inf(1), 0
			for c := 1; c <= m; c++ {
				if used[c] {
					continue
				}
				cur := cost[r0-1][c-1] - u[r0] - v[c]
				if cur < minv[c] {
					minv[c], way[c] = cur, c0
				}
				if minv[c] < delta {
					delta, c1 = minv[c], c
				}
			}
			for c := 0; c <= m; c++ {
				if used[c] {
					u[p[c]] += delta
					v[c] -= delta
				} else {
					minv[c] -= delta
				}
			}
			c0 = c1
			if p[c0] == 0 {
				break
			}
		}
		for c0 != 0 {
			c1 := way[c0]
			p[c0] = p[c1]
			c0 = c1
		}
	}
	out := make([]int, n)
	for k := range out {
		out[k] = -1
	}
	for c := 1; c <= m; c++ {
		if p[c] > 0 {
			out[p[c]-1] = c - 1
		}
	}
	return out
}
