package allocator

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/nomad-fft/nomad-fft/allocator/internal/recycle"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// Terms computes c_j^i and its parts for job j on model m in round t.
// debt is rho_j under the paper's objective and Config.JobDebt under
// ObjectiveUnits.
func (c *Config) Terms(j *Job, m *Model, t int, debt float64) Terms {
	return c.terms(j, m.Name, j.Throughput[m.Name], t, debt, j.BestThroughput())
}

// terms prices one pair; best is theta_j^* (unused by the paper's objective).
func (c *Config) terms(j *Job, model string, theta float64, t int, debt, best float64) Terms {
	work := j.Work
	if c.Volume == VolumeRemaining {
		work = j.Remaining()
	}
	tr := Terms{
		Model:      model,
		Throughput: theta,
		Wait:       c.Weights.JCT * float64(t-j.Arrival) * theta / j.Work,
		Volume:     c.Weights.Volume * float64(j.GPUs) * work / theta,
		Switch:     c.Weights.Switch * (c.SwitchPenalty(j, model) + c.PreemptionPenalty(j, model)),
	}
	switch {
	case c.units() && c.Volume == VolumeRate:
		c.rateTerms(&tr, j, model, debt, best)
	case c.units():
		// GPU-rounds: d_j GPUs held for the debt's rounds, at the speed
		// of model i relative to the job's fastest.
		tr.Credit = c.Weights.Fairness * float64(j.GPUs) * debt * (theta / best)
	default:
		tr.Credit = c.Weights.Fairness * debt * theta
	}
	tr.Cost = tr.Wait + tr.Volume + tr.Switch - tr.Credit
	return tr
}

// rateTerms prices VolumeRate: every term is a fraction of the job's
// remaining work per round. The benefit of a round on model i is
// b_i = w_vol * theta_i / remaining + w_fair * d_j * debt * theta_i /
// theta_j^* (the credit per GPU, so a gang competes for its d_j GPUs). A
// restart this round (a resume, or a move with its checkpoint) loses its
// share of the round, so it costs that share of b_i; parking a running job
// costs the share of b on its last model that its later resume will lose
// (written as a negative price on every model, as PreemptionPenalty does).
func (c *Config) rateTerms(tr *Terms, j *Job, model string, debt, best float64) {
	rem := j.Remaining()
	if !(rem > 0) || !(best > 0) {
		return
	}
	benefit := func(theta float64) float64 {
		return c.Weights.Volume*theta/rem + c.Weights.Fairness*float64(j.GPUs)*debt*theta/best
	}
	tr.Volume = -c.Weights.Volume * tr.Throughput / rem
	tr.Credit = c.Weights.Fairness * float64(j.GPUs) * debt * tr.Throughput / best
	d := float64(j.GPUs)
	lost := math.Min(1, (c.SwitchPenalty(j, model)+math.Max(0, c.PreemptionPenalty(j, model)))/d)
	sw := lost * benefit(tr.Throughput)
	if c.PricePreemption && j.Running && j.LastModel != "" {
		sw -= math.Min(1, c.restartOf(j)/c.RoundSeconds) * benefit(j.Throughput[j.LastModel])
	}
	tr.Switch = c.Weights.Switch * sw
}

// units reports whether the objective is ObjectiveUnits.
func (c *Config) units() bool { return c.Objective == ObjectiveUnits }

// BestThroughput is theta_j^*, the job's largest positive throughput over
// every model it declares (0 when none). ObjectiveUnits measures work in
// rounds on this model: dividing by it is what makes the credit unit-free.
func (j *Job) BestThroughput() float64 {
	best := 0.0
	for _, th := range j.Throughput {
		best = math.Max(best, th)
	}
	return best
}

// JobDebt is job j's fairness debt in round t under ObjectiveUnits, in
// rounds or, for DebtFTF, as a fraction (Config.Debt says which): the ledger's rho_j over theta_j^*
// (DebtShortfall), or the work it is behind its equal-share reference over
// theta_j^* (DebtLag) or over its fair rate f_j (DebtLate). Each is a ratio
// of two quantities in the job's work unit, so it does not depend on it.
// Under the paper's objective it is rho_j, unchanged.
func (c *Config) JobDebt(j *Job, t int, st fairness.JobState) float64 {
	if !c.units() {
		return st.Rho
	}
	best := j.BestThroughput()
	if !(best > 0) {
		return 0
	}
	switch c.Debt {
	case DebtShortfall:
		return st.Rho / best
	case DebtLate:
		return st.Behind(t, j.Done) / st.FairShare()
	case DebtFTF:
		if !(st.Work > 0) {
			return 0
		}
		return st.Behind(t, j.Done) / st.Work
	}
	return st.Behind(t, j.Done) / best
}

// SwitchPenalty is s_j^i in GPU-rounds: 0 when the job stays on its last
// model or never ran, else the rounds spent moving its checkpoint and
// restarting, times its GPUs (they sit idle meanwhile; our unit choice).
func (c *Config) SwitchPenalty(j *Job, model string) float64 {
	if j.LastModel == "" || j.LastModel == model {
		return 0
	}
	return c.MovePrice(j)
}

// MovePrice is what moving job j costs in GPU-rounds, whether to another
// model or to other hosts of its own (the placement stage's consolidation):
// its GPUs idle while its checkpoint moves and it restarts.
func (c *Config) MovePrice(j *Job) float64 {
	secs := c.restartOf(j) + j.StateGB*8/c.TransferGbps
	return float64(j.GPUs) * secs / c.RoundSeconds
}

// restartOf is job j's restart time: what its task driver measured, else
// the configured one.
func (c *Config) restartOf(j *Job) float64 {
	if j.RestartSeconds > 0 {
		return j.RestartSeconds
	}
	return c.RestartSeconds
}

// PreemptionPenalty is our option's addition to s_j^i (0 unless
// PricePreemption): the paper's s_j^i makes a preemption free, so two jobs
// can trade the same GPUs every round, each trade a real checkpoint and
// restart. With p_j = d_j * RestartSeconds / R (GPU-rounds, the unit of
// s_j^i):
//   - a job running now that is parked pays p_j, the restart it will need
//     to resume. The solver's "not scheduled" option costs 0, so that is
//     written as -p_j on every model of the job: the objective then differs
//     from "park costs p_j" only by the constant sum of p_j over running
//     jobs, which leaves the optimum unchanged (Decision.Objective is
//     lower by that constant);
//   - a parked job that resumes on its last model pays p_j, the restart it
//     spends this round; on another model SwitchPenalty already charges it;
//   - a job that never ran pays nothing, as in the paper.
//
// A swap of a running and a parked job thus costs 2 p_j: the restart the
// resumed job spends now and the one the parked job will spend later.
func (c *Config) PreemptionPenalty(j *Job, model string) float64 {
	if !c.PricePreemption || j.LastModel == "" {
		return 0
	}
	p := float64(j.GPUs) * c.restartOf(j) / c.RoundSeconds
	switch {
	case j.Running:
		return -p
	case model == j.LastModel:
		return p
	}
	return 0
}

// Problem validates the instance and prices every (job, model) pair: the
// solver's form of Eq. 6 with (1a), (1b) and the exclusions. MinUsage is
// left 0; Decide sets it to K(t). The parts of each cost (Terms) are not
// kept: at 100,000 jobs x 16 models they would be most of the round's
// memory, and only the audit reads them, so JobDecision.Options prices
// them again on demand (Instance.options, the same arithmetic).
func (in *Instance) Problem() (*solver.Problem, error) {
	return in.problem(make([]float64, len(in.Jobs)*len(in.Models)), nil)
}

// costs keeps the cost matrix of the last round Decide solved (12.8 MB at
// 100,000 jobs x 16 models) for the next: a fresh one costs its page
// faults and its garbage, and the simulator decides round after round.
var costs recycle.Keeper[[]float64]

// takeCosts returns n zeros, recycled when a large enough matrix is kept.
func takeCosts(n int) []float64 {
	if v := costs.Take(); v != nil && cap(*v) >= n {
		b := (*v)[:n]
		clear(b)
		return b
	}
	return make([]float64, n)
}

// problem is Problem; seen (if not nil) is called with job k, its fairness
// record and the debt its options were priced with, once the job is valid
// and priced, so Decide reads the ledger's map once per job.
//
// cost holds N*M zeros; it becomes the problem's costs.
func (in *Instance) problem(cost []float64, seen func(k int, st fairness.JobState, debt float64)) (*solver.Problem, error) {
	m, n := len(in.Models), len(in.Jobs)
	p := &solver.Problem{
		Capacity: make([]int, m),
		Size:     make([]int, n),
		Cost:     cost,
	}
	for i := range in.Models {
		p.Capacity[i] = in.Models[i].GPUs
	}
	units := in.Config.units()
	// The costs' place holds the throughputs until each is priced: job k's
	// row is filled by validation and priced right after, while in cache.
	price := func(k int, st fairness.JobState) {
		j := &in.Jobs[k]
		debt := in.Config.JobDebt(j, in.Round, st)
		best := 0.0
		if units {
			best = j.BestThroughput()
		}
		p.Size[k] = j.GPUs
		row := p.Cost[k*m : (k+1)*m]
		for i := range in.Models {
			mod, th := &in.Models[i], row[i]
			row[i] = math.Inf(1)
			if j.runs(mod, th) {
				row[i] = in.Config.terms(j, mod.Name, th, in.Round, debt, best).Cost
			}
		}
		if seen != nil {
			seen(k, st, debt)
		}
	}
	if err := in.validate(p.Cost, price); err != nil {
		return nil, err
	}
	return p, nil
}

// options are job k's terms on every model it may use, in model order,
// priced as Problem prices them; debt is the one Problem used (the
// decision's Rho or Debt: the ledger moves on after the round).
func (in *Instance) options(k int, debt float64) []Terms {
	j := &in.Jobs[k]
	best := 0.0
	if in.Config.units() {
		best = j.BestThroughput()
	}
	out := make([]Terms, 0, len(in.Models))
	for i := range in.Models {
		mod := &in.Models[i]
		if th := j.Throughput[mod.Name]; j.runs(mod, th) {
			out = append(out, in.Config.terms(j, mod.Name, th, in.Round, debt, best))
		}
	}
	return out
}

// runs reports whether job j is an option for model mod at throughput th:
// it has work left and fits.
func (j *Job) runs(mod *Model, th float64) bool { return j.Remaining() > 0 && j.fits(mod, th) }

// Decide solves one round: it validates the instance, prices every
// (job, model) pair, computes K(t), solves the program exactly and returns
// the decision with every job's terms. Bad input returns a *FieldError.
func Decide(ctx context.Context, in *Instance) (*Decision, error) {
	m, n := len(in.Models), len(in.Jobs)
	d := &Decision{Round: in.Round, Jobs: make([]JobDecision, n), Usage: make(map[string]int, m)}
	units := in.Config.units()
	// Nothing Decide returns refers to the problem: its costs go back to
	// the pool.
	cost := takeCosts(n * m)
	defer costs.Put(&cost)
	p, err := in.problem(cost, func(k int, st fairness.JobState, debt float64) {
		d.Jobs[k] = JobDecision{ID: in.Jobs[k].ID, Rho: st.Rho, src: in, k: k}
		if units {
			d.Jobs[k].Debt = debt
		}
	})
	if err != nil {
		return nil, err
	}
	pack, err := solver.MaxUsage(ctx, p, solver.Options{NodeLimit: in.Config.NodeLimit})
	if err != nil {
		return nil, fmt.Errorf("computing K(t) for round %d: %w", in.Round, err)
	}
	p.MinUsage = pack.Usage
	start := pack.Choice
	if k, choice, err := in.starvingBound(ctx, p, pack.Usage); err != nil {
		return nil, fmt.Errorf("computing K(t) for the starving jobs of round %d: %w", in.Round, err)
	} else if k < pack.Usage {
		p.MinUsage, start = k, choice
	}
	res, err := solver.Solve(ctx, p, solver.Options{NodeLimit: in.Config.NodeLimit, GapTolerance: in.Config.GapTolerance, Start: start})
	if err != nil {
		return nil, fmt.Errorf("solving round %d: %w", in.Round, err)
	}
	d.MaxUsage, d.Objective, d.Bound, d.Gap = p.MinUsage, res.Objective, res.Bound, res.Gap
	d.Status, d.Stats = res.Status, res.Stats
	for k := range in.Jobs {
		j, jd := &in.Jobs[k], &d.Jobs[k]
		switch c := res.Choice[k]; {
		case c >= 0:
			name := in.Models[c].Name
			jd.Model = name
			d.Usage[name] += j.GPUs
			best := 0.0
			if in.Config.units() {
				best = j.BestThroughput()
			}
			jd.Chosen = in.Config.terms(j, name, j.Throughput[name], in.Round, jd.debt(), best)
		case j.Remaining() <= 0:
			jd.Reason = ReasonDone
		default:
			jd.Reason = ReasonNotSelected
		}
	}
	return d, nil
}

// maxStarving bounds the starving jobs one round lowers K(t) for (the
// latest first): each costs a packing per model it fits.
const maxStarving = 8

// starvingBound is K(t) as Config.StarveRounds lowers it: for each waiting
// job at least StarveRounds late against its equal-share finish time
// (fairness.JobState.Behind over its fair share), the most GPUs an
// assignment that runs it keeps busy; the least of those and k. A starving
// job then can win its GPUs when its credit outweighs what the others
// gain, and never needs the bound to leave GPUs idle that some assignment
// running it would use. It returns k unchanged when the option is off or
// no job starves, with a choice that reaches the bound it returns.
func (in *Instance) starvingBound(ctx context.Context, p *solver.Problem, k int) (int, []int, error) {
	if !(in.Config.StarveRounds > 0) {
		return k, nil, nil
	}
	type late struct {
		job    int
		rounds float64
	}
	var starving []late
	for j := range in.Jobs {
		job := &in.Jobs[j]
		st, ok := in.Fairness.Jobs[job.ID]
		if job.Running || !ok || !(st.FairShare() > 0) {
			continue
		}
		if r := st.Behind(in.Round, job.Done) / st.FairShare(); r >= in.Config.StarveRounds {
			starving = append(starving, late{j, r})
		}
	}
	sort.SliceStable(starving, func(a, b int) bool { return starving[a].rounds > starving[b].rounds })
	best, choice := k, []int(nil)
	for _, s := range starving[:min(len(starving), maxStarving)] {
		kj, cj, err := usageWith(ctx, p, s.job, in.Config.NodeLimit)
		if err != nil {
			return k, nil, err
		}
		if cj != nil && kj < best {
			best, choice = kj, cj
		}
	}
	return best, choice, nil
}

// usageWith is the most GPUs any feasible assignment that runs item j
// keeps busy, with one such assignment (nil when j fits no model).
func usageWith(ctx context.Context, p *solver.Problem, j, nodeLimit int) (int, []int, error) {
	m := p.M()
	best, choice := -1, []int(nil)
	for i := 0; i < m; i++ {
		if !p.Allowed(j, i) || p.Size[j] > p.Capacity[i] {
			continue
		}
		q := &solver.Problem{Capacity: slices.Clone(p.Capacity), Size: p.Size, Cost: slices.Clone(p.Cost)}
		q.Capacity[i] -= p.Size[j]
		for c := 0; c < m; c++ {
			q.Cost[j*m+c] = math.Inf(1)
		}
		pack, err := solver.MaxUsage(ctx, q, solver.Options{NodeLimit: nodeLimit})
		if err != nil {
			return 0, nil, err
		}
		if u := pack.Usage + p.Size[j]; u > best {
			best, choice = u, slices.Clone(pack.Choice)
			choice[j] = i
		}
	}
	return best, choice, nil
}
