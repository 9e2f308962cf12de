package policy

import (
	"context"
	"sort"
	"strings"
)

// GavelRoundSeconds is the round length of Gavel's simulator (360 s).
const GavelRoundSeconds = 360

// allocator computes a fractional allocation: x[k][i] is the share of time
// job s.Jobs[k] should spend on model s.Models[i].
type fractional func(s *Snapshot, g *gavel) [][]float64

// gavel is Gavel's round-based realisation of a fractional allocation
// (Narayanan et al., OSDI'20, section 5): the allocation is recomputed when
// the set of active jobs changes; every round, each (job, model) pair with
// a positive share gets a priority from its deficit (time it should have
// had on the model minus time it got), and pairs are granted greedily in
// priority order, each job on at most one model, within capacity.
type gavel struct {
	name  string
	alloc fractional
	// key identifies the active set the current allocation was made for.
	key string
	x   map[string][]float64
	// deficit[id][i] accumulates x*R minus seconds actually run on i.
	deficit map[string][]float64
	// Fallbacks counts LP failures answered with the isolated allocation.
	Fallbacks int
}

func newGavel(name string, f fractional) *gavel {
	return &gavel{name: name, alloc: f, deficit: map[string][]float64{}}
}

func (g *gavel) Name() string { return g.name }

// PolicyStats reports how often the LP failed and the isolated allocation
// was used instead.
func (g *gavel) PolicyStats() map[string]float64 {
	return map[string]float64{"lp_fallbacks": float64(g.Fallbacks)}
}

func (g *gavel) RoundSeconds() float64 { return GavelRoundSeconds }

func activeKey(s *Snapshot) string {
	var b strings.Builder
	for k := range s.Jobs {
		b.WriteString(s.Jobs[k].ID)
		b.WriteByte(0)
	}
	for _, m := range s.Models {
		b.WriteString(m.Name)
		b.WriteByte(byte(m.GPUs))
	}
	return b.String()
}

func (g *gavel) Schedule(_ context.Context, s *Snapshot) (Assignment, error) {
	if key := activeKey(s); key != g.key || g.x == nil {
		g.key = key
		xs := g.alloc(s, g)
		g.x = make(map[string][]float64, len(s.Jobs))
		for k := range s.Jobs {
			g.x[s.Jobs[k].ID] = xs[k]
		}
		for id := range g.deficit {
			if _, ok := g.x[id]; !ok {
				delete(g.deficit, id)
			}
		}
	}
	type pair struct {
		k, i    int
		deficit float64
		x       float64
	}
	var pairs []pair
	for k := range s.Jobs {
		id := s.Jobs[k].ID
		d := g.deficit[id]
		for i, x := range g.x[id] {
			if x > 1e-9 {
				var def float64
				if d != nil {
					def = d[i]
				}
				pairs = append(pairs, pair{k, i, def, x})
			}
		}
	}
	sort.SliceStable(pairs, func(a, b int) bool {
		if pairs[a].deficit != pairs[b].deficit {
			return pairs[a].deficit > pairs[b].deficit
		}
		return pairs[a].x > pairs[b].x
	})
	a, f := make(Assignment, len(s.Jobs)), newFree(s)
	for _, p := range pairs {
		j := &s.Jobs[p.k]
		if _, ok := a[j.ID]; ok {
			continue
		}
		f.place(a, j, &s.Models[p.i])
	}
	return a, nil
}

func (g *gavel) Observe(s *Snapshot, a Assignment, _ map[string]float64) {
	for k := range s.Jobs {
		j := &s.Jobs[k]
		x := g.x[j.ID]
		d := g.deficit[j.ID]
		if d == nil {
			d = make([]float64, len(s.Models))
			g.deficit[j.ID] = d
		}
		for i := range d {
			if i < len(x) {
				d[i] += x[i] * s.RoundSeconds
			}
			if a[j.ID] == s.Models[i].Name {
				d[i] -= s.RoundSeconds
			}
		}
	}
}

// isolatedShares is the isolated reference allocation: with m active jobs,
// job j may use model i a share Y_i/(m*d_j) of the time (1/m of that
// model's GPUs), scaled down so the shares sum to at most 1. Models the job
// does not fit get 0. Summed over jobs it never exceeds any capacity.
func isolatedShares(s *Snapshot) [][]float64 {
	m := float64(len(s.Jobs))
	out := make([][]float64, len(s.Jobs))
	for k := range s.Jobs {
		j := &s.Jobs[k]
		x := make([]float64, len(s.Models))
		sum := 0.0
		for i := range s.Models {
			if j.Fits(&s.Models[i]) {
				x[i] = float64(s.Models[i].GPUs) / (m * float64(j.GPUs))
				sum += x[i]
			}
		}
		if sum > 1 {
			for i := range x {
				x[i] /= sum
			}
		}
		out[k] = x
	}
	return out
}

// proportionalShares is Gavel's proportional allocation used to normalise
// max-min fairness: a share Y_i/m of every model, scaled to sum to at most
// 1, independent of the job's gang size.
func proportionalShares(s *Snapshot, j *Job) []float64 {
	m := float64(len(s.Jobs))
	x := make([]float64, len(s.Models))
	sum := 0.0
	for i := range s.Models {
		if j.Fits(&s.Models[i]) {
			x[i] = float64(s.Models[i].GPUs) / m
			sum += x[i]
		}
	}
	if sum > 1 {
		for i := range x {
			x[i] /= sum
		}
	}
	return x
}

// dot is the job's rate under shares x.
func dot(s *Snapshot, j *Job, x []float64) float64 {
	r := 0.0
	for i := range s.Models {
		r += j.Rate[s.Models[i].Name] * x[i]
	}
	return r
}

// agnosticRates replaces a job's rates by their mean over the models it
// fits: the heterogeneity-agnostic view (every model looks the same).
func agnosticRates(s *Snapshot, j *Job) []float64 {
	out := make([]float64, len(s.Models))
	sum, n := 0.0, 0
	for i := range s.Models {
		if j.Fits(&s.Models[i]) {
			sum += j.Rate[s.Models[i].Name]
			n++
		}
	}
	for i := range s.Models {
		if j.Fits(&s.Models[i]) {
			out[i] = sum / float64(n)
		}
	}
	return out
}

// rates returns the job's per-model rates as the policy sees them.
func rates(s *Snapshot, j *Job, aware bool) []float64 {
	if !aware {
		return agnosticRates(s, j)
	}
	out := make([]float64, len(s.Models))
	for i := range s.Models {
		if j.Fits(&s.Models[i]) {
			out[i] = j.Rate[s.Models[i].Name]
		}
	}
	return out
}

// Isolated policy: the reference Gavel's mean finish-time fairness divides by.

// IsolatedName is the registry name of the isolated reference policy.
const IsolatedName = "gavel-isolated"

// NewIsolated runs every job on its isolated share (see isolatedShares)
// through Gavel's round mechanism. Its JCTs are the denominator of Gavel's
// finish-time fairness.
func NewIsolated(Options) Policy {
	return newGavel(IsolatedName, func(s *Snapshot, _ *gavel) [][]float64 { return isolatedShares(s) })
}
