package solver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// Options bound and seed the search.
type Options struct {
	// NodeLimit caps branch-and-bound nodes; 0 means DefaultNodeLimit.
	NodeLimit int
	// WorkLimit caps the search's work, counted in units of about one
	// option (an item's model) that a node handles once (see nodeCost,
	// roundWork and knapsackWork); 0 means DefaultWorkLimit. Unlike a
	// clock it stops every run of the same round at the same node, so
	// simulations stay deterministic.
	WorkLimit int
	// GapTolerance, when above 0, stops proving once the incumbent is
	// within that relative gap (Result.Gap's measure) of optimal: a node
	// whose bound is that close to the incumbent is cut, and its bound
	// stays in the proven Bound. The answer is then Feasible whenever the
	// gap it proved is above float noise. 0, the default, proves the
	// optimum; it must be below 1.
	GapTolerance float64
	// Start, when it is a feasible assignment (len N, -1 = left out), is
	// the first incumbent. MaxUsage's packing is a good one.
	Start []int
	// noDP turns the dynamic program for small clusters off, so that
	// tests can check branch and bound on the same small instances.
	noDP bool
	// twoPhase makes every search run its second phase (branchAndBound),
	// with the Lagrangian ascent and fixing, from the root: tests check it
	// on instances small enough for brute force.
	twoPhase bool
	// strongAlways makes every node outside the core heuristic branch by
	// strong branching, even where the Lagrangian bound cuts its children
	// and the search would not: tests check it against brute force and
	// the DP.
	strongAlways bool
	// noClasses turns the class search (classes.go) off, so that tests
	// and benchmarks check and time the item search alone;
	// classesAlways makes the class search do all the work after the
	// root, so that tests check it against brute force and the DP.
	noClasses, classesAlways bool
}

// DefaultNodeLimit stops a search that has not closed its gap; the answer
// is then the best assignment with Status Feasible and the gap it proved.
// The rounds we benchmark close well inside it: 4,000 jobs in about a
// hundred nodes, 100,000 jobs in a few thousand.
const DefaultNodeLimit = 100000

// DefaultWorkLimit stops a search that has not closed its gap after about
// a second of this project's shared 2-core benchmark machine, whatever the
// round's size (a unit costs about 17-28 ns there, see nodeCost): the
// answer is then Feasible, with the gap it proved. Most rounds close far
// inside it.
const DefaultWorkLimit = 40_000_000

// phaseOneShare: the first phase of a two-phase search (branchAndBound)
// gets the work limit over this.
const phaseOneShare = 8

// A unit of work is about one option handled once by a node: its LP (costs
// per GPU, flows, heaps), the child's restricted copy, its warm start and
// reduced-cost fixing each walk every option of the node's free items. A
// node also has a fixed part (nodeWork), the rounding heuristic sorts its
// candidate options (roundWork) and the Lagrangian bound runs knapsacks
// (knapsackWork). The weights come from a least-squares fit of CPU time on
// rounds of 400 to 4,000 jobs of the large setting (default, fft and sia
// policies), where they predict each round's time within about 25%
// (issue 21); counting items alone made a unit cost 67 ns on late rounds
// and 420 ns on large ones. The fixed part is what a node of a few dozen
// items costs beyond its options (its LP's heaps and buffers, shortest
// paths over the models, the warm start's repair): a run of the default
// whose late rounds searched up to 67,000 such nodes, when it was 96,
// spent about 66 microseconds a node at load 9 beyond the units.
const nodeWork = 700

// nodeCost is the work of solving and expanding node p.
func nodeCost(p *Problem) int { return p.N()*p.M() + nodeWork }

// roundWork is the work of the rounding heuristic over scanned candidate
// options, of which it sorts c: about a third of a unit per comparison.
func roundWork(scanned, c int) int { return scanned/4 + c*bits.Len(uint(c))/3 }

// relTolObjective times max(1, |incumbent's value|) is the absolute tolerance
// under which two objective values count as equal: far below the 1e-6
// relative gap we promise, far above float rounding of the sums.
const relTolObjective = 1e-9

// Solve returns an optimal assignment for p:
//
//	min sum_ji c_ji x_ji  s.t. (1a), (1b), (7), x binary, exclusions,
//
// by branch and bound over the transportation relaxation (see lp.go) with
// Lagrangian reduced-cost fixing at every node, so that only items whose
// choice is really in doubt are branched on. It is deterministic. It
// returns ErrInfeasible when no assignment reaches p.MinUsage, an error
// for NaN costs or non-positive sizes, and ctx.Err() if ctx ends first.
// It panics when len(p.Cost) != N*M or len(opt.Start) is neither 0 nor N.
func Solve(ctx context.Context, p *Problem, opt Options) (res Result, err error) {
	if err := p.check(); err != nil {
		return Result{}, err
	}
	if !ValidGapTolerance(opt.GapTolerance) {
		return Result{}, fmt.Errorf("solver: GapTolerance %g: want 0 (prove the optimum) up to below 1, for example 1e-4", opt.GapTolerance)
	}
	return solve(ctx, p, opt, math.Inf(-1))
}

// ValidGapTolerance says whether v is a gap tolerance Solve takes: 0
// (prove the optimum) up to below 1. Callers that read one from users
// check it with this and name their own field.
func ValidGapTolerance(v float64) bool { return v >= 0 && v < 1 }

// WithinGapTolerance says whether an answer not proven optimal, whose
// proven gap is gap (Result.Gap), was stopped within the gap tolerance:
// only a tolerance above 0 lets a search stop short, so with 0 it never
// is. Callers that count or settle such answers share this rule.
func WithinGapTolerance(gap, tolerance float64) bool { return tolerance > 0 && gap <= tolerance }

// solve stops early once the incumbent reaches target (a known lower
// bound), which MaxUsage uses when its packing bound is met.
func solve(ctx context.Context, p *Problem, opt Options, target float64) (Result, error) {
	start := time.Now()
	byDP := func(states int) (Result, error) {
		choice, obj, ok := solveDP(p, states)
		if !ok {
			return Result{}, ErrInfeasible
		}
		return Result{Choice: choice, Objective: obj, Bound: obj, Usage: p.usage(choice), Status: Optimal,
			Stats: Stats{Runtime: time.Since(start)}}, nil
	}
	fallback := 0
	if !opt.noDP {
		if states := dpSize(p, dpRootWork); states > 0 {
			return byDP(states)
		}
		// A mid-sized cluster: branch and bound usually proves the
		// optimum in a few nodes; when it cannot (the usage bound can
		// force a parity the LP does not see), the DP settles it.
		if fallback = dpSize(p, dpFallbackWork); fallback > 0 && (opt.NodeLimit <= 0 || opt.NodeLimit > dpTryNodes) {
			opt.NodeLimit = dpTryNodes
		}
	}
	res, err := branchAndBound(ctx, p, opt, target, start)
	// An answer proven within the caller's gap tolerance is settled too:
	// the DP would only redo, exactly, the work the tolerance skipped.
	settled := err == nil && (res.Status == Optimal || WithinGapTolerance(res.Gap, opt.GapTolerance)) ||
		errors.Is(err, ErrInfeasible)
	if fallback > 0 && !settled && ctx.Err() == nil {
		return byDP(fallback)
	}
	return res, err
}

// branchAndBound is solve's search for rounds too large for the DP.
func branchAndBound(ctx context.Context, p *Problem, opt Options, target float64, start time.Time) (Result, error) {
	s := newSearch(ctx, p, opt, target, takeArena())
	defer func() {
		s.ar.putInts(s.assign)
		putArena(s.ar)
	}()
	if opt.Start != nil {
		if len(opt.Start) != p.N() {
			panic(fmt.Sprintf("solver: len(Start) = %d, want N = %d", len(opt.Start), p.N()))
		}
		if p.feasible(opt.Start) {
			s.offer(slices.Clone(opt.Start))
		}
	}
	// The root explores p itself: nodes never change their problem, and
	// every step already skips options larger than their model.
	//
	// A round small enough for the class search (classes.go) gets an
	// eighth of the work for the item search; when that does not prove
	// it, the class search goes on from its incumbent with the rest.
	// Otherwise a round too large for the Lagrangian bound at every node
	// but small enough for its fixing (hundreds of multi-GPU jobs on a
	// thousand GPUs) is searched in two phases: the first, on an eighth
	// of the work, finds a good incumbent (the root's heuristics rarely do
	// when every GPU must be filled) and usually proves it; if not, the
	// second starts again from the root with it, where the Lagrangian
	// ascent aims at it and its fixing drops most options before
	// branching.
	classes := !opt.noClasses && classSearchSize(p)
	twoPhase := opt.twoPhase || !lagrangeSize(p) && lagrangeFixSize(p)
	workLimit := s.workLimit
	if classes || twoPhase {
		s.workLimit = workLimit / phaseOneShare
		if opt.classesAlways || opt.twoPhase {
			s.workLimit = 0 // tests: the next stage does it all
		}
	}
	s.root(p)
	goOn := s.stopped && s.work > s.workLimit && s.nodes <= s.limit && ctx.Err() == nil
	classBound, classesRan, settled := math.Inf(-1), false, false
	switch {
	case classes && goOn:
		classBound, settled = s.proveByClasses(p, max(0, workLimit-s.work))
		classesRan = true
	case twoPhase && goOn:
		s2 := newSearch(ctx, p, opt, target, s.ar)
		s.ar.putInts(s.assign) // the deferred release returns s2's
		if s.best != nil {
			s2.offer(s.best)
		}
		s2.nodes, s2.work, s2.augs, s2.coldSolves = s.nodes, s.work, s.augs, s.coldSolves
		s2.workLimit, s2.lagLarge = workLimit, true
		s2.root(p)
		s = s2
	}
	if s.best == nil {
		if s.stopped || classesRan && !settled {
			if err := ctx.Err(); err != nil {
				return Result{}, fmt.Errorf("solver: stopped before any feasible assignment: %w", err)
			}
			return Result{}, fmt.Errorf("solver: node limit %d or work limit %d reached before any feasible assignment", s.limit, workLimit)
		}
		return Result{}, ErrInfeasible
	}
	res := Result{Choice: s.best, Objective: s.bestVal, Status: Optimal}
	res.Usage = p.usage(s.best)
	res.Bound = max(min(s.bestVal, s.minOpen), classBound)
	proven := !s.stopped && !s.unproven
	if classesRan {
		proven = settled
	}
	// A gap tolerance may cut nodes that could still improve the answer.
	if !proven || s.gapTol > 0 && res.Objective-res.Bound > s.tol {
		res.Status = Feasible
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	res.Gap = max(0, res.Objective-res.Bound) / max(1, math.Abs(res.Objective))
	res.Stats = Stats{Runtime: time.Since(start), Augmentations: s.augs, Nodes: s.nodes, Work: s.work, Core: s.core, ColdStarts: s.coldSolves}
	return res, nil
}

// search is one branch-and-bound run over the original problem.
type search struct {
	ctx   context.Context
	p     *Problem
	limit int
	// workLimit bounds work (Options.WorkLimit).
	workLimit, work int
	// gapTol is Options.GapTolerance.
	gapTol float64
	target float64
	// assign holds fixings of the current path (original indices).
	assign []int
	best   []int
	// roundChoice and roundCand are round's buffers: it runs at nearly
	// every node.
	roundChoice []int
	roundCand   []option
	// spare is the buffer of an assignment that lost to best (as long
	// as the round): offerSub fills it next, so a search allocates about
	// two however often it improves.
	spare []int
	// bestVal is +Inf until an incumbent exists.
	bestVal float64
	// minOpen is the least bound of a node cut by its bound or left
	// unexplored: with bestVal, the proven lower bound.
	minOpen float64
	nodes   int
	augs    int
	core    int
	stopped bool
	// nested marks the core heuristic's own search, which must not
	// recurse into another core heuristic.
	nested bool
	// tol is the absolute tolerance under which objective values count
	// as equal, set at the root (retol): relative to the objective, and
	// never below the rounding of the root LP's terms (noise). rootValue is
	// the root LP's value, the objective's scale until an incumbent exists.
	tol, noise, rootValue float64
	// unproven: some node was left without proof (an LP stalled on float
	// noise); the answer is then Feasible with the gap that is proven.
	unproven bool
	// coldSolves counts warm starts that were not optimal.
	coldSolves int
	// ar recycles per-node buffers; it is pooled across searches, so
	// nothing a search returns may come from it.
	ar *arena
	// noDP, strongAlways: see Options.
	noDP, strongAlways bool
	// coreTried: the core heuristic runs once, at the first large node;
	// after it the incumbent is rarely improved by running it again.
	coreTried bool
	// lagU are the Lagrangian multipliers (lagrange.go) by original item,
	// nil until lagrangeRoot ran; lagScratch is the knapsacks'; lagTried:
	// it runs once.
	lagU       []float64
	lagMu      float64
	lagScratch knapsackScratch
	lagTried   bool
	// lagCut: the node is small enough (lagrangeSize) for the bound to cut
	// every node; lagLarge: the search may run the ascent and its fixing
	// on a larger node once (lagrangeFixSize), the second phase of
	// branchAndBound.
	lagCut, lagLarge bool
	// repChoice and repFill are lagrangeRepair's buffers.
	repChoice []int
	repFill   knapsackScratch
}

// newSearch starts a search with the buffers of ar; its assign goes back
// to ar when the search is done.
func newSearch(ctx context.Context, p *Problem, opt Options, target float64, ar *arena) *search {
	s := &search{
		ctx: ctx, p: p, limit: opt.NodeLimit, workLimit: opt.WorkLimit, gapTol: opt.GapTolerance, target: target, noDP: opt.noDP, strongAlways: opt.strongAlways,
		assign:  ar.zeroInts(p.N()),
		bestVal: math.Inf(1), minOpen: math.Inf(1),
		ar: ar,
	}
	if s.limit <= 0 {
		s.limit = DefaultNodeLimit
	}
	if s.workLimit <= 0 {
		s.workLimit = DefaultWorkLimit
	}
	for j := range s.assign {
		s.assign[j] = -1
	}
	return s
}

// offer takes a complete feasible assignment as incumbent if it is better.
func (s *search) offer(choice []int) {
	if v := s.p.objective(choice); v < s.bestVal {
		s.best, s.bestVal, choice = choice, v, s.best
		if s.tol != 0 {
			s.retol()
		}
	}
	s.spare = choice // the loser's buffer serves the next offer
}

// cutAt is the bound from which a node is cut: it cannot beat the
// incumbent by more than float noise (tol) or, with a gap tolerance, by
// more than that share of the incumbent's value.
func (s *search) cutAt() float64 {
	if s.gapTol == 0 || math.IsInf(s.bestVal, 1) {
		return s.bestVal - s.tol
	}
	return s.bestVal - max(s.tol, s.gapTol*max(1, math.Abs(s.bestVal)))
}

func (s *search) done() bool {
	return s.bestVal <= s.target+s.tol
}

// root searches p from scratch: all its items free, nothing fixed.
func (s *search) root(p *Problem) {
	idx := s.ar.zeroInts(p.N())
	defer s.ar.putInts(idx)
	for j := range idx {
		idx[j] = j
	}
	if lp := s.solveNode(p, idx, nil, 0, math.Inf(-1)); lp != nil {
		s.explore(p, idx, lp, 0, math.Inf(-1))
	}
}

// solveNode counts the node whose free items are sub (idx maps them to the
// original problem; everything else is fixed in s.assign at fixedCost) and
// solves its LP. It returns nil when nothing is left to explore: the node
// is over the limits (parentBound, a valid bound for it, then counts as
// open), settled by the DP, infeasible or stalled.
func (s *search) solveNode(sub *Problem, idx []int, warm *warmStart, fixedCost, parentBound float64) *lpSolution {
	if s.done() {
		return nil
	}
	s.nodes++
	s.work += nodeCost(sub)
	if s.nodes > s.limit || s.work > s.workLimit || (s.nodes%64 == 0 && s.ctx.Err() != nil) {
		s.stopped = true
		s.minOpen = min(s.minOpen, parentBound)
		return nil
	}
	if !s.noDP {
		if states := dpSize(sub, dpNodeWork); states > 0 {
			// Few GPUs are left: the DP settles the node exactly.
			if choice, _, ok := solveDP(sub, states); ok {
				s.offerSub(sub, idx, fixedCost, func(j int) int { return choice[j] })
			}
			return nil
		}
	}
	lp, cold := warmLP(sub, warm, s.ar)
	if cold {
		s.coldSolves++
	}
	s.augs += lp.augs
	if lp.stalled {
		// Float noise stopped the LP: its bound holds, but neither its
		// infeasibility nor its flow proves anything about the node.
		s.unproven = true
		s.minOpen = min(s.minOpen, max(parentBound, fixedCost+lp.bound))
	}
	if lp.stalled || !lp.feasible {
		s.ar.release(lp)
		return nil
	}
	if s.tol == 0 { // the root
		s.noise, s.rootValue = lp.noise, fixedCost+lp.value
		s.retol()
	}
	return lp
}

// retol scales tol to the incumbent's value, or to the root LP's while
// there is none. The LP's value alone is not the objective's scale: when a
// huge cost runs only in the relaxation (a gang that fits no integral
// assignment), 1e-9 of it can exceed the difference between two
// assignments, and the search would cut the better one.
func (s *search) retol() {
	scale := s.rootValue
	if !math.IsInf(s.bestVal, 1) {
		scale = s.bestVal
	}
	s.tol = max(relTolObjective*max(1, math.Abs(scale)), s.noise)
}

// explore goes on from a node that solveNode solved: it prunes, offers
// what the LP suggests, fixes by reduced costs and branches. It releases
// lp.
func (s *search) explore(sub *Problem, idx []int, lp *lpSolution, fixedCost, parentBound float64) {
	defer func() { s.ar.release(lp) }() // lp is nil once released early
	var undo []int
	defer func() {
		for _, j := range undo {
			s.assign[j] = -1
		}
	}()
	bound := max(parentBound, fixedCost+lp.bound)
	if bound >= s.cutAt() {
		s.minOpen = min(s.minOpen, bound)
		return
	}
	// cut is bound or the Lagrangian bound (lagrange.go), whichever is
	// higher: it cuts the node, but reduced-cost fixing below needs the
	// LP's own bound.
	cut := bound
	if s.lagrangeCuts(sub) {
		lag := s.lagrangeNode(sub, idx, fixedCost)
		if cut = max(bound, fixedCost+lag); cut >= s.cutAt() {
			s.minOpen = min(s.minOpen, cut)
			return
		}
	}
	if s.integral(sub, lp) {
		m := sub.M()
		s.offerSub(sub, idx, fixedCost, func(j int) int { return lpModel(lp, j, m, sub.Size[j]) })
		if !lp.optimal {
			// The integral flow may not be the node's best: keep the
			// bound in the proven gap instead of claiming the node.
			s.unproven = true
			s.minOpen = min(s.minOpen, bound)
		}
		return
	}
	// On a large node the core heuristic is both better and cheaper than
	// rounding, whose sort covers every option.
	if !s.nested && !s.coreTried && sub.N() > 2*coreSize(sub.M()) {
		s.coreTried = true
		s.coreHeuristic(sub, idx, lp, fixedCost)
	} else {
		s.round(sub, idx, lp, fixedCost)
	}
	if !s.lagTried && !s.nested && s.best != nil && (lagrangeSize(sub) || s.lagLarge && lagrangeFixSize(sub)) {
		// A tight round whose LP did not settle it at once: the
		// Lagrangian bound is worth its cost from here on.
		s.lagTried = true
		s.lagCut = lagrangeSize(sub)
		cut = max(cut, fixedCost+s.lagrangeRoot(sub, idx, lp, fixedCost))
		if s.done() || cut >= s.cutAt() {
			s.minOpen = min(s.minOpen, cut)
			return
		}
		// Its multipliers also fix: the node goes on without the options
		// they rule out, from a new LP.
		if next, nextIdx, fc, ok := s.lagrangeDrop(sub, idx, fixedCost, &undo); next != nil {
			s.lagCut = lagrangeSize(next)
			// bound, not cut: reduced-cost fixing below measures the gap
			// from a bound the LP's duals prove.
			lp2 := s.solveNode(next, nextIdx, nil, fc, bound)
			if lp2 != nil {
				s.explore(next, nextIdx, lp2, fc, bound)
			}
			s.ar.putFloats(next.Cost)
			s.ar.putInts(next.Size, nextIdx)
			return
		} else if !ok {
			return // no assignment of the node beats the incumbent
		}
	}
	if s.done() || cut >= s.cutAt() {
		s.minOpen = min(s.minOpen, cut)
		return
	}
	parentSub, parentLP := sub, lp
	// Fixing keeps the LP optimal for what is left (fixed items sit at
	// their LP values, and the duals stay feasible), so the node needs no
	// second LP: branch on the smaller problem directly.
	next, nextIdx, newIndex, fixedCost, undo := s.fix(sub, idx, lp, s.bestVal-bound, fixedCost, undo)
	// The fixed node, its LP and the flow carried to its children are
	// done with once the children are solved: the search dives hundreds
	// of levels deep on large rounds, and what every level held of size
	// N*M was most of its memory and its cache misses.
	release := func() {
		if newIndex != nil {
			s.ar.putFloats(next.Cost)
			s.ar.putInts(next.Size, next.Capacity, nextIdx)
			s.ar.putInt32s(newIndex)
			newIndex = nil
		}
	}
	defer release()
	sub, idx = next, nextIdx
	if slices.ContainsFunc(sub.Capacity, func(y int) bool { return y < 0 }) {
		return // float ties forced items past a capacity: nothing here beats the incumbent
	}
	if s.core == 0 {
		s.core = sub.N()
	}
	// Where the node's LP bound is what cuts its children (no Lagrangian
	// cut at this size), strong branching chooses the item to branch on;
	// the nested search of the core heuristic only looks for an
	// incumbent and keeps the plain rule.
	strong := !s.nested && (s.strongAlways || !s.lagrangeCuts(sub))
	jb, kids, shared, warm := s.branch(parentSub, parentLP, sub, idx, newIndex, fixedCost, bound, strong)
	branched := idx[jb]
	s.ar.release(lp)
	lp = nil
	release()
	for _, k := range kids {
		if !s.stopped && !s.done() {
			if k.lp == nil {
				// explore's own first test, before solving the LP again.
				if b := max(bound, k.bound); b >= s.cutAt() {
					s.minOpen = min(s.minOpen, b)
					s.ar.putInts(k.sub.Capacity)
					continue
				}
				k.lp = s.resolve(k.sub, warm)
			}
			s.assign[branched] = k.model
			s.explore(k.sub, k.idx, k.lp, k.fixedCost, bound)
			s.assign[branched] = -1
		} else {
			s.ar.release(k.lp)
		}
		s.ar.putInts(k.sub.Capacity)
	}
	s.dropChildren(nil, shared, warm) // the children went back one by one above
	if s.stopped {
		s.minOpen = min(s.minOpen, bound)
	}
}

// lagrangeCuts says whether the Lagrangian bound cuts node sub: once its
// multipliers exist, at every node of a tight round, else at nodes small
// enough (lagrangeSize).
func (s *search) lagrangeCuts(sub *Problem) bool {
	return s.lagU != nil && (s.lagCut || lagrangeSize(sub))
}

// carry maps the node's LP optimum (over parentSub's items) to the items
// its children keep: those of sub (newIndex maps parentSub's items to
// them, nil when fixing changed nothing) less the branched item jb.
func (s *search) carry(parentSub *Problem, parentLP *lpSolution, sub *Problem, newIndex []int32, jb int) []int {
	m := sub.M()
	var carried []int
	if parentLP.rows == nil {
		// A dense flow has a row for every item: every row of carried is
		// written below.
		carried = s.ar.anyInts((sub.N() - 1) * m)
	} else {
		carried = s.ar.zeroInts((sub.N() - 1) * m)
	}
	for j := 0; j < parentSub.N(); j++ {
		nj := j
		if newIndex != nil {
			nj = int(newIndex[j])
		}
		if nj < 0 || nj == jb {
			continue
		}
		if nj > jb {
			nj--
		}
		copy(carried[nj*m:], parentLP.row(j, m))
	}
	return carried
}

// siblings is what the children of one node share: they differ only in
// their capacities and usage bound, so one copy of the costs, sizes and
// items serves them all (Capacity is the parent's, a template).
type siblings struct {
	*Problem
	idx []int
}

// child is a solved child node waiting to be explored.
type child struct {
	model     int // the branched item's model, -1 when left out
	sub       *Problem
	idx       []int
	lp        *lpSolution
	fixedCost float64
	bound     float64
}

// children solves the LP of every child that branching on item jb of sub
// makes (one per option in opts) and returns those left to explore, least
// bound first: the search then dives where the optimum most likely is, and
// a good incumbent early prunes and fixes more in the siblings after it.
// Each child's Capacity and LP go back to the arena once explored, and the
// siblings' shared problem once all are.
func (s *search) children(sub *Problem, idx []int, jb int, opts []int, carried *warmStart, fixedCost, bound float64) ([]child, siblings) {
	m := sub.M()
	var kids []child
	held := -1 // the child that keeps its LP
	shared := siblings{restrict(sub, idx, idx[jb], s.ar), append(append(s.ar.anyInts(len(idx) - 1)[:0], idx[:jb]...), idx[jb+1:]...)}
	for _, o := range opts {
		if o >= 0 && (math.IsInf(sub.Cost[jb*m+o], 1) || sub.Size[jb] > sub.Capacity[o]) {
			continue // fixing ruled this option out
		}
		k := child{model: o, fixedCost: fixedCost, idx: shared.idx}
		k.sub = &Problem{Capacity: append(s.ar.anyInts(m)[:0], shared.Capacity...), Size: shared.Size, Cost: shared.Cost, MinUsage: shared.MinUsage}
		if o >= 0 {
			k.fixedCost += sub.Cost[jb*m+o]
			k.sub.Capacity[o] -= sub.Size[jb]
			k.sub.MinUsage = max(0, k.sub.MinUsage-sub.Size[jb])
		}
		warm := s.childWarm(k.sub, carried)
		s.assign[idx[jb]] = o // a child the DP settles offers its assignment
		k.lp = s.solveNode(k.sub, k.idx, warm, k.fixedCost, bound)
		s.assign[idx[jb]] = -1
		s.ar.putInts(warm.flow)
		if k.lp == nil {
			s.ar.putInts(k.sub.Capacity)
			if s.stopped {
				break
			}
			continue
		}
		k.bound = k.fixedCost + k.lp.bound
		// Only the child explored first (least bound, the first of
		// equals) keeps its LP: the others would hold an N*M flow each
		// while its subtree is searched, hundreds of levels deep on large
		// rounds, and most of them are cut by their bound before their
		// turn; resolve solves the LP again for those that are not.
		if held < 0 || k.bound < kids[held].bound {
			if held >= 0 {
				s.ar.release(kids[held].lp)
				kids[held].lp = nil
			}
			held = len(kids)
		} else {
			s.ar.release(k.lp)
			k.lp = nil
		}
		kids = append(kids, k)
	}
	slices.SortStableFunc(kids, func(a, b child) int { return cmp.Compare(a.bound, b.bound) })
	return kids, shared
}

// resolve solves again the LP of a child that children solved and let go
// of: the same problem from the same warm start, as solveNode did, gives
// the same LP, and is not counted again.
func (s *search) resolve(sub *Problem, carried *warmStart) *lpSolution {
	warm := s.childWarm(sub, carried)
	lp, _ := warmLP(sub, warm, s.ar)
	s.ar.putInts(warm.flow)
	return lp
}

// childWarm is a child's warm start: the carried flow fitted to its
// capacities. The child's LP keeps that flow as its own when it solves
// (warm.flow is then nil): one copy of N*M less per node.
func (s *search) childWarm(sub *Problem, carried *warmStart) *warmStart {
	return &warmStart{flow: fitWarm(sub, carried.flow, s.ar), pi: carried.pi, owned: true}
}

// warmLP solves sub's LP from warm, or cold when warm leads to none (cold
// says so).
func warmLP(sub *Problem, warm *warmStart, ar *arena) (lp *lpSolution, cold bool) {
	if lp = solveLP(sub, warm, ar); lp != nil {
		return lp, false
	}
	return solveLP(sub, nil, ar), true
}

// fitWarm copies a carried flow and takes out what no longer fits: flow on
// options the child excludes, and GPUs over a model's reduced capacity
// (the costliest per GPU first, the LP's own order of preference).
func fitWarm(p *Problem, carried []int, ar *arena) []int {
	m := p.M()
	warm := ar.anyInts(len(carried))
	load := make([]int, m)
	for j, k := 0, 0; j < p.N(); j, k = j+1, k+m {
		d := p.Size[j]
		for i, f := range carried[k : k+m] {
			if f > 0 && (math.IsInf(p.Cost[k+i], 1) || d > p.Capacity[i]) {
				f = 0
			}
			warm[k+i] = f
			load[i] += f
		}
	}
	trimToCapacity(p, warm, load)
	return warm
}

// trimToCapacity takes GPUs out of warm, whose loads per model are load, on every model over
// its capacity: the costliest per GPU first, the LP's own order of preference.
func trimToCapacity(p *Problem, warm, load []int) {
	m := p.M()
	for i := 0; i < m; i++ {
		if load[i] <= p.Capacity[i] {
			continue
		}
		var on []int
		for j := 0; j < p.N(); j++ {
			if warm[j*m+i] > 0 {
				on = append(on, j)
			}
		}
		unit := func(j int) float64 { return p.Cost[j*m+i] / float64(p.Size[j]) }
		slices.SortFunc(on, func(a, b int) int {
			if c := cmp.Compare(unit(b), unit(a)); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		for _, j := range on {
			if load[i] <= p.Capacity[i] {
				break
			}
			cut := min(warm[j*m+i], load[i]-p.Capacity[i])
			warm[j*m+i] -= cut
			load[i] -= cut
		}
	}
}

// restrict copies sub without the item whose original index is drop,
// excluding options whose size exceeds the capacity.
func restrict(sub *Problem, idx []int, drop int, ar *arena) *Problem {
	m := sub.M()
	out := &Problem{Capacity: append(ar.zeroInts(m)[:0], sub.Capacity...), MinUsage: sub.MinUsage}
	out.Size = ar.anyInts(sub.N())[:0]
	out.Cost = ar.float64s(len(sub.Cost))[:0]
	for j := 0; j < sub.N(); j++ {
		if idx[j] == drop {
			continue
		}
		out.Size = append(out.Size, sub.Size[j])
		for i, c := range sub.Cost[j*m : (j+1)*m] {
			if sub.Size[j] > out.Capacity[i] {
				c = math.Inf(1)
			}
			out.Cost = append(out.Cost, c)
		}
	}
	return out
}

// offerSub offers the node's fixings plus choice for its items. The cost
// follows from fixedCost without building the complete assignment, which
// is built (and priced exactly, in item order) only when it may improve:
// large rounds offer often, and each assignment is as long as the round.
func (s *search) offerSub(sub *Problem, idx []int, fixedCost float64, choice func(j int) int) {
	m, v := sub.M(), fixedCost
	for j := range idx {
		if i := choice(j); i >= 0 {
			v += sub.Cost[j*m+i]
		}
	}
	if v >= s.bestVal+s.tol {
		return
	}
	out := append(s.spare[:0], s.assign...)
	s.spare = nil
	for j, o := range idx {
		out[o] = choice(j)
	}
	s.offer(out)
}

// integral reports whether the LP chose whole items.
func (s *search) integral(sub *Problem, lp *lpSolution) bool {
	m := sub.M()
	for j := 0; j < sub.N(); j++ {
		if a := lp.assigned[j]; a != 0 && lpModel(lp, j, m, sub.Size[j]) < 0 {
			return false
		}
	}
	return true
}

// lpModel is the model holding all of item j in the LP, or -1.
func lpModel(lp *lpSolution, j, m, size int) int {
	for i, f := range lp.row(j, m) {
		if f == size {
			return i
		}
	}
	return -1
}

type option struct {
	j, i int // i = -1: leave item j out
	r    float64
	flow int
}

// modelOptions appends item j's admissible models with their reduced cost
// and LP flow.
func modelOptions(out []option, sub *Problem, lp *lpSolution, j int) []option {
	m := sub.M()
	row := lp.row(j, m)
	for i := 0; i < m; i++ {
		if c := sub.Cost[j*m+i]; !math.IsInf(c, 1) && sub.Size[j] <= sub.Capacity[i] {
			f := 0
			if row != nil {
				f = row[i]
			}
			out = append(out, option{j: j, i: i, r: c - float64(sub.Size[j])*lp.q[i], flow: f})
		}
	}
	return out
}

// lpPreference orders options as the LP prefers them: most GPUs placed
// there by the LP first, then by reduced cost, then by position.
func lpPreference(a, b option) int {
	if c := cmp.Compare(b.flow, a.flow); c != 0 {
		return c
	}
	if c := cmp.Compare(a.r, b.r); c != 0 {
		return c
	}
	if c := cmp.Compare(a.j, b.j); c != 0 {
		return c
	}
	return cmp.Compare(a.i, b.i)
}

// round is the primal heuristic: keep the LP's whole items, then take
// options in order of reduced cost while they fit and either are needed
// for the usage bound or lower the objective.
func (s *search) round(sub *Problem, idx []int, lp *lpSolution, fixedCost float64) {
	m, n := sub.M(), sub.N()
	choice := s.roundChoice[:0]
	load := make([]int, m)
	usage := 0
	for j := 0; j < n; j++ {
		choice = append(choice, -1)
		if i := lpModel(lp, j, m, sub.Size[j]); i >= 0 {
			choice[j] = i
			load[i] += sub.Size[j]
			usage += sub.Size[j]
		}
	}
	// Loads only grow, so an option larger than what the LP's whole items
	// leave of its model can never be taken: only the others are sorted.
	// In a large round that is a small part of them (sorting them all was
	// a fifth of such a round's time).
	cand := s.roundCand[:0]
	scanned := 0
	for j := 0; j < n; j++ {
		if choice[j] >= 0 {
			continue
		}
		from := len(cand)
		cand = modelOptions(cand, sub, lp, j)
		scanned += len(cand) - from
		kept := cand[:from]
		for _, o := range cand[from:] {
			if load[o.i]+sub.Size[j] <= sub.Capacity[o.i] {
				kept = append(kept, o)
			}
		}
		cand = kept
	}
	s.roundChoice, s.roundCand = choice, cand
	s.work += roundWork(scanned, len(cand))
	slices.SortFunc(cand, lpPreference)
	for _, o := range cand {
		d := sub.Size[o.j]
		if choice[o.j] >= 0 || load[o.i]+d > sub.Capacity[o.i] {
			continue
		}
		if usage < sub.MinUsage || sub.Cost[o.j*m+o.i] < 0 {
			choice[o.j] = o.i
			load[o.i] += d
			usage += d
		}
	}
	if usage >= sub.MinUsage {
		s.offerSub(sub, idx, fixedCost, func(j int) int { return choice[j] })
	}
}

// coreSize is how many items the core heuristic leaves free: enough to
// absorb the LP's (at most M+1) fractional items and the holes they leave.
func coreSize(m int) int { return 16 + 4*m }

// coreHeuristic finds a strong incumbent on a large node, so that
// reduced-cost fixing afterwards leaves few items (the "core problem" idea
// of large knapsack solvers). Items whose best and second-best options are
// closest in reduced cost stay free; the rest keep the LP's choice; the
// small problem left is solved by a nested search.
func (s *search) coreHeuristic(sub *Problem, idx []int, lp *lpSolution, fixedCost float64) {
	m, n := sub.M(), sub.N()
	type cand struct {
		j     int
		delta float64
	}
	// The core's first coreSize items are those of least delta: a bounded
	// max-heap keeps them (ties: lower index first) without sorting all.
	worse := func(a, b cand) bool { return a.delta > b.delta || a.delta == b.delta && a.j > b.j }
	k := coreSize(m)
	kept := make([]cand, 0, k)
	for j := 0; j < n; j++ {
		d := float64(sub.Size[j])
		best, second := 0.0, math.Inf(1)
		for i := 0; i < m; i++ {
			if c := sub.Cost[j*m+i]; !math.IsInf(c, 1) && sub.Size[j] <= sub.Capacity[i] {
				r := c - d*lp.q[i]
				if r < best {
					best, second = r, best
				} else if r < second {
					second = r
				}
			}
		}
		delta := second - best
		if lp.assigned[j] != 0 && lpModel(lp, j, m, sub.Size[j]) < 0 {
			delta = math.Inf(-1) // fractional: always free
		}
		kept = keepLeast(kept, k, cand{j, delta}, worse)
	}
	free := make([]bool, n)
	for _, c := range kept {
		free[c.j] = true
	}
	for _, j := range fillers(sub, lp) {
		free[j] = true
	}
	core := &Problem{Capacity: slices.Clone(sub.Capacity), MinUsage: sub.MinUsage}
	var coreIdx []int
	fixed := s.ar.zeroInts(n)
	defer s.ar.putInts(fixed)
	for j := 0; j < n; j++ {
		fixed[j] = -1
		if free[j] {
			core.Size = append(core.Size, sub.Size[j])
			core.Cost = append(core.Cost, sub.Cost[j*m:(j+1)*m]...)
			coreIdx = append(coreIdx, j)
			continue
		}
		if i := lpModel(lp, j, m, sub.Size[j]); i >= 0 {
			fixed[j] = i
			core.Capacity[i] -= sub.Size[j]
			core.MinUsage = max(0, core.MinUsage-sub.Size[j])
		}
	}
	// The nested search runs inside this node and gives back what it takes.
	inner := newSearch(s.ctx, core, Options{NodeLimit: coreNodeLimit}, math.Inf(-1), s.ar)
	inner.nested = true
	inner.root(core)
	s.ar.putInts(inner.assign)
	s.nodes += inner.nodes
	s.work += inner.work
	s.augs += inner.augs
	if inner.best == nil {
		return
	}
	for k, j := range coreIdx {
		fixed[j] = inner.best[k]
	}
	s.offerSub(sub, idx, fixedCost, func(j int) int { return fixed[j] })
}

// keepLeast adds x to h, a max-heap under worse of at most k elements,
// keeping the k least seen.
func keepLeast[T any](h []T, k int, x T, worse func(a, b T) bool) []T {
	if len(h) == k {
		if worse(h[0], x) {
			h[0] = x // x displaces the worst kept
			siftDown(h, 0, worse)
		}
		return h
	}
	h = append(h, x)
	for c := len(h) - 1; c > 0; {
		p := (c - 1) / 2
		if !worse(h[c], h[p]) {
			break
		}
		h[c], h[p] = h[p], h[c]
		c = p
	}
	return h
}

// siftDown restores the max-heap order under worse below h[k].
func siftDown[T any](h []T, k int, worse func(a, b T) bool) {
	for {
		l, r, m := 2*k+1, 2*k+2, k
		if l < len(h) && worse(h[l], h[m]) {
			m = l
		}
		if r < len(h) && worse(h[r], h[m]) {
			m = r
		}
		if m == k {
			return
		}
		h[k], h[m] = h[m], h[k]
		k = m
	}
}

// fillersPerSize is how many waiting items per (model, size) the core
// keeps as candidates to fill the holes the fractional items leave.
const fillersPerSize = 3

// fillers returns, for every model and gang size, the fillersPerSize items
// the LP left out that are cheapest there in reduced cost. Without them a
// core may have no item that fits a hole, and no incumbent.
func fillers(sub *Problem, lp *lpSolution) []int {
	m := sub.M()
	type entry struct {
		r float64
		j int
	}
	// best[class*m+i] holds up to fillersPerSize entries for model i and
	// the gang size numbered class, ascending.
	var best [][]entry
	class := map[int]int{}
	for j := 0; j < sub.N(); j++ {
		if lp.assigned[j] != 0 {
			continue
		}
		d := sub.Size[j]
		c, ok := class[d]
		if !ok {
			c = len(class)
			class[d] = c
			best = append(best, make([][]entry, m)...)
		}
		lists := best[c*m : (c+1)*m]
		for i, cost := range sub.Cost[j*m : (j+1)*m] {
			if math.IsInf(cost, 1) || d > sub.Capacity[i] {
				continue
			}
			e := entry{cost - float64(d)*lp.q[i], j}
			l := lists[i]
			if len(l) == fillersPerSize && e.r >= l[len(l)-1].r {
				continue
			}
			k := len(l)
			if k < fillersPerSize {
				l = append(l, e)
			} else {
				k--
			}
			for ; k > 0 && l[k-1].r > e.r; k-- {
				l[k] = l[k-1]
			}
			l[k] = e
			lists[i] = l
		}
	}
	var out []int
	for _, l := range best {
		for _, e := range l {
			out = append(out, e.j)
		}
	}
	return out
}

// coreNodeLimit bounds the nested search of the core heuristic; it only
// has to find a good incumbent, not prove it.
const coreNodeLimit = 200

// fix applies reduced-cost fixing with the node's duals: an option whose
// reduced cost exceeds the item's best by gap or more cannot be part of an
// assignment better than the incumbent. Items left with one option are
// fixed; others lose their hopeless models. It returns the smaller node.
func (s *search) fix(sub *Problem, idx []int, lp *lpSolution, gap, fixedCost float64, undo []int) (*Problem, []int, []int32, float64, []int) {
	if math.IsInf(gap, 1) {
		return sub, idx, nil, fixedCost, undo
	}
	m, n := sub.M(), sub.N()
	keep := gap + s.tol
	// leastReduced is item j's least reduced cost, 0 for "not scheduled".
	leastReduced := func(j int) float64 {
		d, rmin := float64(sub.Size[j]), 0.0
		for i := 0; i < m; i++ {
			if c := sub.Cost[j*m+i]; !math.IsInf(c, 1) && sub.Size[j] <= sub.Capacity[i] {
				rmin = min(rmin, c-d*lp.q[i])
			}
		}
		return rmin
	}
	// freeOptions counts item j's options within the gap of its least
	// reduced cost rmin ("not scheduled" included) and, in row when not
	// nil, keeps their costs and +Inf for the others; only is the last
	// model kept and dropped whether an option was left out.
	freeOptions := func(j int, rmin float64, row []float64) (free, only int, dropped bool) {
		d := float64(sub.Size[j])
		only = -1
		if -rmin < keep {
			free++
		}
		for i := 0; i < m; i++ {
			if row != nil {
				row[i] = math.Inf(1)
			}
			c := sub.Cost[j*m+i]
			if math.IsInf(c, 1) || sub.Size[j] > sub.Capacity[i] {
				continue
			}
			if c-d*lp.q[i]-rmin < keep {
				if row != nil {
					row[i] = c
				}
				free++
				only = i
			} else {
				dropped = true
			}
		}
		return free, only, dropped
	}
	// One pass settles each item's fate: -2 stays free (free > 1), i >= 0
	// is fixed to model i, -1 is left unscheduled or as it is; it keeps
	// each item's least reduced cost. The costs of the free items are then
	// copied, sized to them: at the root of a large round they are a few
	// hundred of 100,000, so only they are walked twice.
	fate, rmins := s.ar.zeroInts(n), s.ar.float64s(n)
	defer func() {
		s.ar.putInts(fate)
		s.ar.putFloats(rmins)
	}()
	kept, changed := 0, false
	for j := 0; j < n; j++ {
		rmin := leastReduced(j)
		rmins[j] = rmin
		free, only, dropped := freeOptions(j, rmin, nil)
		changed = changed || dropped
		switch {
		case free > 1:
			fate[j] = -2
			kept++
			continue
		case only >= 0 && -rmin >= keep:
			fate[j] = only
		default:
			fate[j] = -1
		}
		changed = true
	}
	if !changed {
		return sub, idx, nil, fixedCost, undo
	}
	out := &Problem{Capacity: append(s.ar.zeroInts(m)[:0], sub.Capacity...), MinUsage: sub.MinUsage,
		Size: s.ar.zeroInts(kept)[:0], Cost: s.ar.float64s(kept * m)[:0]}
	outIdx := s.ar.zeroInts(kept)[:0]
	newIndex := s.ar.int32s(n)
	row := s.ar.float64s(m)
	defer s.ar.putFloats(row)
	for j := 0; j < n; j++ {
		newIndex[j] = -1
		switch f := fate[j]; {
		case f == -2:
			freeOptions(j, rmins[j], row)
			newIndex[j] = int32(len(outIdx))
			out.Size = append(out.Size, sub.Size[j])
			out.Cost = append(out.Cost, row...)
			outIdx = append(outIdx, idx[j])
		case f >= 0:
			fixedCost += sub.Cost[j*m+f]
			out.Capacity[f] -= sub.Size[j]
			out.MinUsage = max(0, out.MinUsage-sub.Size[j])
			s.assign[idx[j]] = f
			undo = append(undo, idx[j])
		}
	}
	return out, outIdx, newIndex, fixedCost, undo
}

// strongCandidates caps how many fractional items strong branching tries
// at a node (the largest first): the LP has at most M+1 of them, and each
// costs the LPs of its children.
const strongCandidates = 8

// branch chooses the item to branch on among the fractional items of the
// node's LP (parentSub's items, before fixing; newIndex maps them to sub's,
// nil when fixing changed nothing) and solves its children (children). The
// plain rule takes the largest (ties: lowest index). With strong, up to
// strongCandidates of them, largest first, have their children solved, and
// the item whose children leave the least search (strongScore) wins, the
// first of equals: on the late rounds of the large setting the LP splits a
// few gangs, branching on the largest mostly moves the split to another,
// and the item whose children raise the bound most shrinks the tree (the
// LPs of the losers are counted as work like every node's). It returns the
// item (in sub's numbering), the children, what they share, and the warm
// start they came from (its flow goes back to the arena after them).
func (s *search) branch(parentSub *Problem, parentLP *lpSolution, sub *Problem, idx []int, newIndex []int32, fixedCost, bound float64, strong bool) (int, []child, siblings, *warmStart) {
	cands := fractionalItems(parentSub, parentLP, newIndex)
	if len(cands) == 0 {
		panic("solver: branching on an integral LP")
	}
	if !strong {
		cands = cands[:1]
	}
	cands = cands[:min(len(cands), strongCandidates)]
	jb, best := -1, math.Inf(1)
	var kids []child
	var shared siblings
	var warm *warmStart
	for _, c := range cands {
		nc := c
		if newIndex != nil {
			nc = int(newIndex[c])
		}
		w := &warmStart{flow: s.carry(parentSub, parentLP, sub, newIndex, nc), pi: parentLP.pi}
		k, sh := s.children(sub, idx, nc, branchOptions(parentSub, parentLP, c), w, fixedCost, bound)
		score := 0.0
		if len(cands) > 1 {
			score = s.strongScore(k, bound)
		}
		if jb < 0 || score < best {
			if jb >= 0 {
				s.dropChildren(kids, shared, warm)
			}
			jb, best, kids, shared, warm = nc, score, k, sh, w
		} else {
			s.dropChildren(k, sh, w)
		}
		if s.stopped || s.done() || math.IsInf(best, -1) {
			break // nothing left to compare, or the node is settled
		}
	}
	return jb, kids, shared, warm
}

// fractionalItems lists the items the LP splits or runs in part that
// fixing left free (parentSub's numbering), largest first, then by index.
func fractionalItems(parentSub *Problem, parentLP *lpSolution, newIndex []int32) []int {
	m := parentSub.M()
	var out []int
	for j := 0; j < parentSub.N(); j++ {
		if parentLP.assigned[j] != 0 && lpModel(parentLP, j, m, parentSub.Size[j]) < 0 && (newIndex == nil || newIndex[j] >= 0) {
			out = append(out, j)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(parentSub.Size[b], parentSub.Size[a]) })
	return out
}

// branchOptions lists item jb's options, "left out" (-1) included, the
// LP's favourite first, then by reduced cost.
func branchOptions(sub *Problem, lp *lpSolution, jb int) []int {
	opts := modelOptions([]option{{j: jb, i: -1, flow: sub.Size[jb] - lp.assigned[jb]}}, sub, lp, jb)
	slices.SortFunc(opts, lpPreference)
	out := make([]int, len(opts))
	for k, o := range opts {
		out[k] = o.i
	}
	return out
}

// strongScore estimates the search that children kids leave below a node
// of bound bound (lower is better; -Inf: none is left). Once an incumbent
// exists, a child whose bound rises by g of the node's gap G leaves about
// (1 - g/G)^2 of the node's tree (none when cut); before, the least rise
// decides.
func (s *search) strongScore(kids []child, bound float64) float64 {
	limit := s.cutAt()
	gap := limit - bound
	score, least, open := 0.0, math.Inf(1), false
	for _, k := range kids {
		if k.bound >= limit {
			continue
		}
		open = true
		g := max(0, k.bound-bound)
		least = min(least, g)
		if r := max(0, 1-g/gap); gap > 0 {
			score += r * r
		}
	}
	switch {
	case !open:
		return math.Inf(-1)
	case math.IsInf(gap, 1) || gap <= 0:
		return -least
	}
	return score
}

// dropChildren gives back what a branching made: its children (for an
// item strong branching did not choose; explore passes none, having given
// back each explored child), their shared problem and the carried flow.
func (s *search) dropChildren(kids []child, shared siblings, warm *warmStart) {
	for _, k := range kids {
		s.ar.release(k.lp)
		s.ar.putInts(k.sub.Capacity)
	}
	s.ar.putInts(warm.flow)
	s.ar.putFloats(shared.Cost)
	s.ar.putInts(shared.Size, shared.Capacity, shared.idx)
}

// objective sums the chosen costs in item order (a fixed order, so equal
// assignments give bit-identical values).
func (p *Problem) objective(choice []int) float64 {
	v := 0.0
	for j, i := range choice {
		if i >= 0 {
			v += p.Cost[j*p.M()+i]
		}
	}
	return v
}

func (p *Problem) usage(choice []int) int {
	u := 0
	for j, i := range choice {
		if i >= 0 {
			u += p.Size[j]
		}
	}
	return u
}

// feasible re-checks an assignment against every constraint.
func (p *Problem) feasible(choice []int) bool {
	if len(choice) != p.N() {
		return false
	}
	load := make([]int, p.M())
	for j, i := range choice {
		if i < -1 || i >= p.M() {
			return false
		}
		if i >= 0 {
			if !p.Allowed(j, i) {
				return false
			}
			load[i] += p.Size[j]
		}
	}
	for i, l := range load {
		if l > p.Capacity[i] {
			return false
		}
	}
	return p.usage(choice) >= p.MinUsage
}

// Feasible reports whether choice satisfies (1a), (1b), (7) and the
// exclusions; tests and callers use it to re-check answers independently.
func (p *Problem) Feasible(choice []int) bool { return p.feasible(choice) }

// Objective is the program's objective for choice.
func (p *Problem) Objective(choice []int) float64 { return p.objective(choice) }
