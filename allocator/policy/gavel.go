package policy

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

// GavelRoundSeconds is the round length of Gavel's simulator (360 s).
const GavelRoundSeconds = 360

// GavelResetSeconds is Gavel's minimum time between allocation resets
// (Scheduler's minimum_time_between_allocation_resets, default 1920 s in
// scheduler/scheduler.py of stanford-futuredata/gavel; its sweep scripts,
// e.g. scripts/sweeps/run_sweep_continuous.py, keep the default).
const GavelResetSeconds = 1920

// gavelWorkerOrder is the order in which Gavel's round mechanism fills the
// worker types (the list hard-coded in _schedule_jobs_on_workers).
var gavelWorkerOrder = []string{"v100", "p100", "k80"}

// allocator computes a fractional allocation: x[k][i] is the share of time
// job s.Jobs[k] should spend on model s.Models[i].
type fractional func(s *Snapshot, g *gavel) [][]float64

// gavel is Gavel's round-based realisation of a fractional allocation, as
// its simulator runs it (Narayanan et al., OSDI'20, section 5; semantics
// read from scheduler/scheduler.py of stanford-futuredata/gavel, commit
// c4fa400: _update_priorities, _reset_time_run_so_far,
// _schedule_jobs_on_workers(_helper), _done_callback). Reimplemented, not
// copied:
//
//   - The allocation is recomputed only when the set of jobs changed AND at
//     least GavelResetSeconds passed since the last recomputation (or none
//     happened at a time > 0). A job that arrived since then has no
//     allocation: it gets priority 0 and, though it may take GPUs in the
//     greedy pass below, it is not placed (those GPUs idle for the round).
//   - At a recomputation ("reset") each job's deficit on each model grows by
//     the time it should have had there (share x elapsed) minus the time it
//     got, and every job's time per model restarts at R/2 (a prior).
//   - Priority of job j on model i: x_ji / f_ji, f_ji = time j ran on i /
//     time all jobs ran on i since the reset (priors included); x_ji*1e9
//     when f is 0; 0 when x_ji is 0, the job is not in the allocation or
//     does not fit i.
//   - Each round the models are filled one after another (v100, p100, k80;
//     in a random order, reshuffled each round, for heterogeneity-agnostic
//     policies, whose Gavel names lack "Perf"): a model's candidates are
//     all active jobs sorted by (priority, deficit, share) descending, and
//     each not yet placed job that fits in the GPUs left takes them, zero
//     priority included (work conserving), except under FIFO, which skips
//     zero priorities.
type gavel struct {
	name  string
	alloc fractional
	// aware: Gavel's "Perf" policies fill the models in the fixed order;
	// the others shuffle it every round with rng.
	aware bool
	fifo  bool
	rng   *rand.Rand
	// x is the allocation of the last reset, by job ID.
	x          map[string][]float64
	needUpdate bool
	lastReset  float64
	// jobTime[id][i]: seconds job id ran on model i since the last reset,
	// plus the R/2 prior; workerTime[i] the sum over jobs.
	jobTime    map[string][]float64
	workerTime []float64
	deficit    map[string][]float64
	// Fallbacks counts LP failures answered with the isolated allocation.
	Fallbacks int
}

func newGavel(name string, f fractional) *gavel {
	return &gavel{name: name, alloc: f, jobTime: map[string][]float64{}, deficit: map[string][]float64{}}
}

// newGavelPolicy builds the mechanism for one of Gavel's policies: aware
// tells whether Gavel's name has "Perf" (fixed model order), seed drives
// the per-round shuffle of the others.
func newGavelPolicy(name string, f fractional, aware bool, seed int64) *gavel {
	g := newGavel(name, f)
	g.aware = aware
	g.rng = rand.New(rand.NewPCG(uint64(seed), 0x736875666c65))
	return g
}

func (g *gavel) Name() string { return g.name }

// PolicyStats reports how often the LP failed and the isolated allocation
// was used instead.
func (g *gavel) PolicyStats() map[string]float64 {
	return map[string]float64{"lp_fallbacks": float64(g.Fallbacks)}
}

func (g *gavel) RoundSeconds() float64 { return GavelRoundSeconds }

// modelOrder is the order in which this round fills the models.
func (g *gavel) modelOrder(s *Snapshot) []int {
	order := make([]int, 0, len(s.Models))
	used := make([]bool, len(s.Models))
	for _, name := range gavelWorkerOrder {
		for i := range s.Models {
			if !used[i] && s.Models[i].Name == name {
				order = append(order, i)
				used[i] = true
			}
		}
	}
	for i := range s.Models {
		if !used[i] {
			order = append(order, i)
		}
	}
	if !g.aware && g.rng != nil {
		g.rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	}
	return order
}

func (g *gavel) reset(s *Snapshot) {
	half := s.RoundSeconds / 2
	elapsed := s.Now - g.lastReset
	for i := range g.workerTime {
		g.workerTime[i] = 0
	}
	for k := range s.Jobs {
		id := s.Jobs[k].ID
		jt, d, x := g.jobTime[id], g.deficit[id], g.x[id]
		for i := range jt {
			should := 0.0
			if i < len(x) {
				should = x[i] * elapsed
			}
			d[i] += should - (jt[i] - half)
			jt[i] = half
			g.workerTime[i] += half
		}
	}
	g.lastReset = s.Now
	xs := g.alloc(s, g)
	g.x = make(map[string][]float64, len(s.Jobs))
	for k := range s.Jobs {
		g.x[s.Jobs[k].ID] = xs[k]
	}
	g.needUpdate = false
}

func (g *gavel) Schedule(_ context.Context, s *Snapshot) (Assignment, error) {
	m := len(s.Models)
	half := s.RoundSeconds / 2
	if len(g.workerTime) != m {
		g.workerTime = make([]float64, m)
		g.jobTime, g.deficit, g.x = map[string][]float64{}, map[string][]float64{}, nil
	}
	seen := make(map[string]bool, len(s.Jobs))
	for k := range s.Jobs {
		id := s.Jobs[k].ID
		seen[id] = true
		if _, ok := g.jobTime[id]; !ok {
			jt := make([]float64, m)
			for i := range jt {
				jt[i] = half
			}
			g.jobTime[id] = jt
			g.deficit[id] = make([]float64, m)
			g.needUpdate = true
		}
	}
	for id := range g.jobTime {
		if !seen[id] {
			delete(g.jobTime, id)
			delete(g.deficit, id)
			g.needUpdate = true
		}
	}
	if g.x == nil || (g.needUpdate && (s.Now-g.lastReset >= GavelResetSeconds || g.lastReset == 0)) {
		g.reset(s)
	}
	type entry struct {
		k          int
		prio, d, x float64
	}
	left := newFree(s)
	placed := make(map[string]bool, len(s.Jobs))
	a := make(Assignment, len(s.Jobs))
	entries := make([]entry, len(s.Jobs))
	for _, i := range g.modelOrder(s) {
		mod := &s.Models[i]
		for k := range s.Jobs {
			j := &s.Jobs[k]
			e := entry{k: k}
			if x, ok := g.x[j.ID]; ok && i < len(x) {
				e.x = x[i]
				e.d = g.deficit[j.ID][i]
				switch {
				case e.x <= 1e-9 || !j.Fits(mod):
				case g.workerTime[i] > 0 && g.jobTime[j.ID][i] > 0:
					e.prio = e.x / (g.jobTime[j.ID][i] / g.workerTime[i])
				default:
					e.prio = e.x * 1e9
				}
			} else if d := g.deficit[j.ID]; d != nil {
				e.d = d[i]
			}
			entries[k] = e
		}
		sort.SliceStable(entries, func(p, q int) bool {
			ep, eq := entries[p], entries[q]
			if ep.prio != eq.prio {
				return ep.prio > eq.prio
			}
			if ep.d != eq.d {
				return ep.d > eq.d
			}
			return ep.x > eq.x
		})
		for _, e := range entries {
			if left[mod.Name] == 0 {
				break
			}
			j := &s.Jobs[e.k]
			if placed[j.ID] || !j.Fits(mod) || (g.fifo && e.prio <= 0) || j.GPUs > left[mod.Name] {
				continue
			}
			left[mod.Name] -= j.GPUs
			placed[j.ID] = true
			if _, ok := g.x[j.ID]; ok {
				a[j.ID] = mod.Name
			}
		}
	}
	return a, nil
}

// Observe adds the seconds each placed job ran (its work divided by its
// rate, at most a round: a job that finished early ran until it finished)
// to its time on the model, as Gavel's _done_callback does.
func (g *gavel) Observe(s *Snapshot, a Assignment, achieved map[string]float64) {
	for k := range s.Jobs {
		j := &s.Jobs[k]
		name, ok := a[j.ID]
		if !ok {
			continue
		}
		for i := range s.Models {
			if s.Models[i].Name != name {
				continue
			}
			secs := s.RoundSeconds
			if w, ok := achieved[j.ID]; ok && j.RatePerSecond[name] > 0 {
				secs = math.Min(secs, w/j.RatePerSecond[name])
			}
			if jt := g.jobTime[j.ID]; jt != nil && i < len(jt) {
				jt[i] += secs
				g.workerTime[i] += secs
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
		r += j.RatePerSecond[s.Models[i].Name] * x[i]
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
			sum += j.RatePerSecond[s.Models[i].Name]
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
			out[i] = j.RatePerSecond[s.Models[i].Name]
		}
	}
	return out
}

// Isolated policy: the reference Gavel's mean finish-time fairness divides by.

// IsolatedName is the registry name of the isolated reference policy.
const IsolatedName = "gavel-isolated"

// NewIsolated is Gavel's "isolated" policy (policies/isolated.py of
// stanford-futuredata/gavel) through Gavel's round mechanism: with m
// active jobs, job j gets Y_i/(m*d_j) of every model i, and all shares are
// divided by the largest row sum, so the job with the smallest gang sums to
// exactly 1 (even when that scales shares up past capacity at high load:
// the mechanism then time-slices by priority). Gavel's name has no "Perf",
// so the models are filled in a shuffled order. Its JCTs are the
// denominator of Gavel's finish-time fairness.
func NewIsolated(opt Options) Policy {
	return newGavelPolicy(IsolatedName, func(s *Snapshot, _ *gavel) [][]float64 { return gavelIsolatedShares(s) }, false, opt.Seed)
}

// gavelIsolatedShares is IsolatedPolicy._get_allocation: x_ji =
// Y_i/(m d_j) over every model, divided by max_j sum_i x_ji.
func gavelIsolatedShares(s *Snapshot) [][]float64 {
	m := float64(len(s.Jobs))
	out := make([][]float64, len(s.Jobs))
	maxRow := 0.0
	for k := range s.Jobs {
		x := make([]float64, len(s.Models))
		row := 0.0
		for i := range s.Models {
			x[i] = float64(s.Models[i].GPUs) / (m * float64(s.Jobs[k].GPUs))
			row += x[i]
		}
		maxRow = math.Max(maxRow, row)
		out[k] = x
	}
	if maxRow > 0 {
		for k := range out {
			for i := range out[k] {
				out[k][i] /= maxRow
			}
		}
	}
	return out
}

// activeKey identifies a snapshot's active set and cluster (AlloX recomputes
// its matching when it changes).
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
