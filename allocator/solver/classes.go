package solver

import (
	"math"
	"slices"
)

// The class search proves rounds that branching on items cannot: it
// branches on how many items of each size run on each model.
//
// Given those counts, the items of one size form a transportation problem
// (each item on at most one model, each model taking its count), whose
// LP has whole-item optima. So a round's optimum is the least, over count
// vectors that fit the capacities and reach the usage bound, of the sum
// of those problems, and the round's LP is the same min-cost flow with
// the counts free: items -> (model, size) -> model -> sink, in GPUs. A
// node whose flows through every (model, size) arc are whole multiples of
// the size is solved: its LP value is reached by whole items. Branching
// on those flows (at most a count each way) cuts the LP's split gangs
// without the symmetry of branching on items: on the late rounds of the
// large setting, hundreds of near-equal gangs can each take the split
// role, and a search on items stopped at its work limit where this one
// needs a few hundred nodes. With an incumbent, reduced-cost fixing at the
// root (reduce) leaves about half the items free on those rounds, and
// the search starts again when it halves the gap the fixing was measured
// against. It chooses the arc to branch on by pseudo-costs once an arc's
// have been measured twice each way, and by strong branching until then
// (branch). Before it branches, it dives from its root for an incumbent
// (dive).

// classSearch is one class search over a round, run after the item search
// (search) with its incumbent and tolerance.
type classSearch struct {
	s *search
	// p is the round, or what reduced-cost fixing left of it (reduce):
	// its item j is the round's idx[j], and the fixed items cost
	// fixedCost (their choices are in s.assign).
	p         *Problem
	idx       []int
	fixedCost float64
	g         *flowNet
	sizes     []int
	// classArc[i*D+c] is the arc from (model i, size c) to model i, -1
	// when no item of that size may run there.
	classArc []int
	// itemArc[j]:itemArc[j+1] are item j's arcs: one per model it may
	// use (itemModel says which), then its arc to "left out".
	itemArc   []int
	itemModel []int
	// bounded lists the class arcs, the only ones branching bounds, in
	// the order the network numbers them from bounded[0]; boundedSize
	// holds their item sizes and pseudo what branching on them gained.
	bounded     []int
	boundedSize []int
	pseudo      []pseudoCost
	// modelArc+i is model i's arc to the sink, modelArc+M the out node's.
	modelArc int
	minOpen  float64
	stopped  bool
	// restart: an incumbent below restartBelow was found, and the search
	// stopped to start again from its root (proveByClasses).
	restart      bool
	restartBelow float64
	unproven     bool
	nodes        int
	// states[d] is what the node at depth d saves of the network.
	states []flowState
	frac   []int
}

// classBranch bounds the fractional class arcs strong branching tries.
const classBranch = 8

// classWork converts the arcs a class search scanned, copied and summed
// (flowNet.scans) into work units: two units for three scans makes a unit
// cost about what one costs the item search (12-18 ns here), the dual
// bound's pass at every node and the extractions' small flows included.
func classWork(scans int) int { return scans * 2 / 3 }

// newClassSearch builds p's class network and solves its LP, starting
// from lp (the item LP's optimum over p) when it is not nil; it returns
// nil when the LP has no feasible flow.
func newClassSearch(s *search, p *Problem, lp *lpSolution) *classSearch {
	m, n := p.M(), p.N()
	sizes := slices.Clone(p.Size)
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	d := len(sizes)
	cs := &classSearch{s: s, p: p, sizes: sizes, classArc: make([]int, m*d), itemArc: make([]int, n+1), minOpen: math.Inf(1), restartBelow: math.Inf(-1)}
	// Nodes: items, (model, size), models, out, sink.
	classNode := func(i, c int) int { return n + i*d + c }
	model := func(i int) int { return n + m*d + i }
	out := n + m*d + m
	sink := out + 1
	g := newFlowNet(sink+1, n*(m+1)+m*d+m+1)
	total := 0
	used := make([]bool, m*d)
	for j, size := range p.Size {
		c, _ := slices.BinarySearch(sizes, size)
		cs.itemArc[j] = len(g.tail)
		for i := range m {
			if cost := p.Cost[j*m+i]; !math.IsInf(cost, 1) && size <= p.Capacity[i] {
				g.addArc(j, classNode(i, c), cost/float64(size), 0, size)
				cs.itemModel = append(cs.itemModel, i)
				used[i*d+c] = true
			}
		}
		g.addArc(j, out, 0, 0, size)
		cs.itemModel = append(cs.itemModel, -1)
		g.supply[j] = size
		total += size
	}
	cs.itemArc[n] = len(g.tail)
	for i := range m {
		for c, size := range sizes {
			cs.classArc[i*d+c] = -1
			if used[i*d+c] {
				cs.classArc[i*d+c] = g.addArc(classNode(i, c), model(i), 0, 0, size*(p.Capacity[i]/size))
				cs.bounded = append(cs.bounded, cs.classArc[i*d+c])
				cs.boundedSize = append(cs.boundedSize, size)
			}
		}
	}
	cs.modelArc = len(g.tail)
	for i := range m {
		g.addArc(model(i), sink, 0, 0, p.Capacity[i])
	}
	if total < p.MinUsage {
		return nil
	}
	g.addArc(out, sink, 0, 0, total-p.MinUsage)
	g.supply[sink] = -total
	cs.g = g
	cs.pseudo = make([]pseudoCost, len(cs.bounded))
	warm := cs.startFrom(lp)
	g.finish()
	if !warm || !g.label() {
		// Solve from no flow: it is optimal at once, and its residual
		// network has no cycles, so label settles.
		clear(g.flow)
		g.finish()
		if !g.label() {
			return nil
		}
	}
	if !g.restore() {
		return nil
	}
	return cs
}

// startFrom sets the network's flow to the item LP's optimum lp, which is
// the class LP's at the root: restore then has nothing left to do, where
// from no flow it would send every item's GPUs along a path of its own. It
// reports false when lp does not fit the network.
func (cs *classSearch) startFrom(lp *lpSolution) bool {
	if lp == nil || !lp.feasible || lp.stalled {
		return false
	}
	p, g, m := cs.p, cs.g, cs.p.M()
	d := len(cs.sizes)
	n := p.N()
	for j, size := range p.Size {
		left := size
		row := lp.row(j, m)
		a := cs.itemArc[j]
		for i, f := range row {
			if f == 0 {
				continue
			}
			for a < cs.itemArc[j+1] && cs.itemModel[a] != i {
				a++
			}
			if a == cs.itemArc[j+1] {
				return false // flow on an option the network left out
			}
			g.flow[a] = f
			left -= f
		}
		if left < 0 {
			return false
		}
		g.flow[cs.itemArc[j+1]-1] = left
		c, _ := slices.BinarySearch(cs.sizes, size)
		for i, f := range row {
			if f > 0 {
				g.flow[cs.classArc[i*d+c]] += f
			}
		}
	}
	// Model and out arcs follow the arcs into them; the class arcs are
	// clamped to their bounds (restore moves what they shed).
	out := 0
	for j := range n {
		out += g.flow[cs.itemArc[j+1]-1]
	}
	for i := range m {
		load := 0
		for c := range d {
			if k := cs.classArc[i*d+c]; k >= 0 {
				g.flow[k] = min(g.flow[k], g.hi[k])
				load += g.flow[k]
			}
		}
		g.flow[cs.modelArc+i] = min(load, g.hi[cs.modelArc+i])
	}
	g.flow[cs.modelArc+m] = min(out, g.hi[cs.modelArc+m])
	return true
}

// proveByClasses runs a class search over p after the item search s
// stopped without proof, with work more units of work. It reports the
// bound it proved and whether it finished: nothing it left open can then
// beat the incumbent (by more than s's tolerance, or its gap tolerance),
// and without an incumbent none exists.
func (s *search) proveByClasses(p *Problem, work int) (bound float64, finished bool) {
	s.stopped = false // the item search's stop is superseded
	s.workLimit = s.work + work
	full := s.classRoot(p)
	if full == nil {
		// No flow: no assignment either (the class LP's whole-item
		// caps are valid for every assignment).
		return math.Inf(1), true
	}
	root := full.bound()
	// kept is what the searches that started again proved: nothing
	// they left open or cut, nor what their fixing dropped, is below it.
	kept := math.Inf(-1)
	full.dive(root)
	for attempt := 0; ; attempt++ {
		if s.best != nil && root >= s.cutAt() {
			return s.cutBound(root), true
		}
		cs, fixed, settled := s.fixedClassSearch(full, root)
		if settled {
			return s.cutBound(root), true // no option, or no flow, beats cutAt
		}
		// What the fixing dropped is open, at cutAt (the search's
		// incumbents only lower it).
		open := math.Inf(1)
		if fixed != nil {
			open = s.cutBound(root)
		}
		if s.best != nil && attempt < classRestarts {
			cs.restartBelow = s.bestVal - (s.bestVal-root)/2
		}
		cs.explore(0, max(root, cs.bound()))
		s.unassign(fixed)
		s.work += classWork(cs.g.scans)
		cs.g.scans = 0
		open = min(open, cs.minOpen)
		if !cs.restart {
			s.stopped = cs.stopped
			return min(s.bestVal, max(kept, open)), !cs.stopped && !cs.unproven
		}
		kept = max(kept, min(s.bestVal, open))
	}
}

// cutBound is what a class search of root bound root proves of what it
// cut, or its fixing dropped, at cutAt: nothing there beats the incumbent
// by more than float noise, or, with a gap tolerance, nothing is below
// cutAt.
func (s *search) cutBound(root float64) float64 {
	if s.gapTol > 0 {
		return max(root, s.cutAt())
	}
	return s.bestVal
}

// classRoot builds the class network over p and solves its LP from the
// item LP's optimum, and sets the search's tolerance from its terms too.
// It returns nil when the LP has no flow.
func (s *search) classRoot(p *Problem) *classSearch {
	lp := solveLP(p, nil, s.ar)
	s.work += nodeCost(p)
	cs := newClassSearch(s, p, lp)
	s.ar.release(lp)
	if cs == nil {
		return nil
	}
	cs.idx = make([]int, p.N())
	for j := range cs.idx {
		cs.idx[j] = j
	}
	// Values within the rounding of the class LP's terms count as equal,
	// as within the item LP's. When the item search stopped before its
	// root LP, the class LP's value is the scale as well.
	v, vmag := cs.g.value()
	_, bmag := cs.g.bound()
	s.noise = max(s.noise, noiseTol*(vmag+bmag))
	if s.tol == 0 {
		s.rootValue = v
	}
	s.retol()
	return cs
}

// fixedClassSearch readies a search from full's root (bound root): with
// an incumbent, over what reduced-cost fixing leaves (reduce), the fixed
// items set in s.assign until the caller unassigns fixed. settled: no
// assignment beats the incumbent, and there is nothing to search.
func (s *search) fixedClassSearch(full *classSearch, root float64) (cs *classSearch, fixed map[int]int, settled bool) {
	// A search that starts again covers all that a stopped one did.
	full.restart, full.stopped, full.minOpen = false, false, math.Inf(1)
	if s.best == nil {
		return full, nil, false
	}
	q, idx, fixed, fixedCost := full.reduce(root)
	switch {
	case q == nil && fixed != nil:
		return nil, nil, true
	case q == nil:
		return full, nil, false
	}
	for j, i := range fixed {
		s.assign[j] = i
	}
	s.work += nodeCost(q) + nodeCost(full.p) // its LP, and reduce's pass over the options
	if cs = s.reducedClassSearch(q, idx, fixedCost); cs == nil {
		s.unassign(fixed)
		return nil, nil, true
	}
	return cs, fixed, false
}

// classRestarts bounds how often a class search starts again from its
// root: when it finds an incumbent that halves the gap its fixing was
// measured against, fixing again drops more options.
const classRestarts = 4

// unassign clears the search's fixings of the items in fixed.
func (s *search) unassign(fixed map[int]int) {
	for j := range fixed {
		s.assign[j] = -1
	}
}

// reduce fixes by reduced costs at the class search's root, whose bound
// is root: an item taking an option costs at least root plus the reduced
// costs its choice forgoes (what it pays above its arc's bound, and what
// it leaves of arcs below theirs), so an option that costs at least the
// gap to the incumbent is dropped, and an item left with one option is
// fixed to it. It returns the problem left: its item j is p's idx[j],
// fixed maps the fixed items to their choice (-1: left out), and they
// cost fixedCost. q is nil when nothing was fixed, and then fixed is not
// nil when some item has no option that could beat the incumbent. An
// item whose options all still count keeps "left out", which the problem
// always allows.
func (cs *classSearch) reduce(root float64) (q *Problem, idx []int, fixed map[int]int, fixedCost float64) {
	p, g, m := cs.p, cs.g, cs.p.M()
	gap := cs.s.cutAt() - root
	rc := func(a int) float64 { return g.cost[a] + g.pot[g.tail[a]] - g.pot[g.head[a]] }
	fixed = map[int]int{}
	keep := make([]bool, len(g.tail))
	load := make([]int, m)
	used := 0
	for j, size := range p.Size {
		forgo := 0.0 // what leaving every arc of j at 0 forgoes
		for a := cs.itemArc[j]; a < cs.itemArc[j+1]; a++ {
			forgo += max(0, -rc(a)) * float64(size)
		}
		kept, last := 0, -1
		for a := cs.itemArc[j]; a < cs.itemArc[j+1]; a++ {
			r := rc(a)
			if forgo-max(0, -r)*float64(size)+max(0, r)*float64(size) < gap {
				keep[a] = true
				kept++
				last = a
			}
		}
		switch {
		case kept == 0:
			return nil, nil, map[int]int{}, 0 // nothing beats the incumbent
		case kept == 1:
			i := cs.itemModel[last]
			fixed[j] = i
			if i >= 0 {
				load[i] += size
				used += size
				fixedCost += p.Cost[j*m+i]
			}
		default:
			idx = append(idx, j)
		}
	}
	if len(fixed) == 0 {
		return nil, nil, nil, 0
	}
	q = &Problem{Capacity: make([]int, m), Size: make([]int, len(idx)), Cost: make([]float64, len(idx)*m), MinUsage: max(0, p.MinUsage-used)}
	for i := range m {
		q.Capacity[i] = p.Capacity[i] - load[i]
	}
	for k, j := range idx {
		q.Size[k] = p.Size[j]
		for i := range m {
			q.Cost[k*m+i] = math.Inf(1)
		}
		for a := cs.itemArc[j]; a < cs.itemArc[j+1]; a++ {
			if i := cs.itemModel[a]; i >= 0 && keep[a] {
				q.Cost[k*m+i] = p.Cost[j*m+i]
			}
		}
	}
	return q, idx, fixed, fixedCost
}

// reducedClassSearch starts a class search over q, what reduce left of
// the round (idx, fixedCost: reduce's).
func (s *search) reducedClassSearch(q *Problem, idx []int, fixedCost float64) *classSearch {
	if slices.ContainsFunc(q.Capacity, func(y int) bool { return y < 0 }) {
		return nil
	}
	lp := solveLP(q, nil, s.ar)
	cs := newClassSearch(s, q, lp)
	s.ar.release(lp)
	if cs != nil {
		cs.idx, cs.fixedCost = idx, fixedCost
	}
	return cs
}

// classMaxOptions bounds the rounds the class search takes, in options
// (items times models): its network has about one arc per option, and
// each of its nodes runs shortest paths over them.
const classMaxOptions = 1 << 16

// classSearchSize reports whether p is small enough for the class search.
func classSearchSize(p *Problem) bool { return p.N()*p.M() <= classMaxOptions }

// bound is the node's LP bound: its dual bound, which holds whatever the
// potentials; the search's tolerance covers its rounding (proveByClasses).
func (cs *classSearch) bound() float64 {
	b, _ := cs.g.bound()
	return cs.fixedCost + b
}

// explore goes on from a node whose LP the network holds, of bound b.
func (cs *classSearch) explore(depth int, b float64) {
	s := cs.s
	cs.nodes++
	s.nodes++
	s.work += classWork(cs.g.scans)
	cs.g.scans = 0
	if s.work > s.workLimit || s.nodes > s.limit || (cs.nodes%64 == 0 && s.ctx.Err() != nil) {
		cs.stopped = true
		cs.minOpen = min(cs.minOpen, b)
		return
	}
	if b >= s.cutAt() || s.done() {
		cs.minOpen = min(cs.minOpen, b)
		return
	}
	frac := cs.fractional()
	if len(frac) == 0 {
		if choice := cs.extract(); choice != nil {
			s.offerSub(cs.p, cs.idx, cs.fixedCost, func(j int) int { return choice[j] })
			if s.bestVal < cs.restartBelow {
				cs.restart, cs.stopped = true, true
				return
			}
		}
		if s.bestVal > b+s.tol {
			// The flow was not the node's optimum (float noise in its
			// potentials): its bound stays open.
			cs.unproven = true
			cs.minOpen = min(cs.minOpen, b)
		}
		return
	}
	st := cs.save(depth)
	k, kids := cs.branch(b, frac, st)
	entered := 0
	for _, kid := range kids {
		if cs.stopped || s.done() {
			break
		}
		entered++
		if kid.bound >= s.cutAt() {
			cs.minOpen = min(cs.minOpen, kid.bound)
			continue
		}
		// branch solved this same LP (restore is deterministic).
		cs.g.setBounds(k, kid.lo, kid.hi)
		if cs.g.restore() {
			cs.explore(depth+1, max(b, kid.bound))
		}
		cs.g.load(st, cs.bounded)
	}
	// A stopped search leaves open what it did not enter: each child's
	// region, with the bound its LP proves (the child it entered left its
	// own open nodes).
	if cs.stopped {
		for _, kid := range kids[entered:] {
			cs.minOpen = min(cs.minOpen, max(b, kid.bound))
		}
	}
}

// save saves the network in the state of depth depth, and returns it.
func (cs *classSearch) save(depth int) *flowState {
	if len(cs.states) <= depth {
		cs.states = append(cs.states, flowState{})
	}
	st := &cs.states[depth]
	cs.g.save(st, cs.bounded)
	return st
}

// classChild is one side of a branch: the class arc's new bounds and the
// bound its LP proves (+Inf when it has no flow), or, when estimated, its
// pseudo-cost's guess; side is 0 for the lower side, and items is how far
// the side moves the arc's flow, in items.
type classChild struct {
	lo, hi    int
	bound     float64
	estimated bool
	side      int
	items     float64
}

// pseudoCost is what branching on a class arc has gained: per side, the
// sum of the children's bound gains per item moved, and their number.
type pseudoCost struct {
	gain [2]float64
	n    [2]int
}

// classReliable is how many gains per side make a class arc's pseudo-cost
// trusted: branching then estimates its children from it rather than
// solving their LPs (reliability branching).
const classReliable = 2

func (pc *pseudoCost) reliable() bool {
	return pc.n[0] >= classReliable && pc.n[1] >= classReliable
}

func (pc *pseudoCost) estimate(side int, items float64) float64 {
	return pc.gain[side] / float64(pc.n[side]) * items
}

// learn records that moving class arc k's flow items items to side
// gained gain on the bound (nothing when the side has no flow).
func (cs *classSearch) learn(k, side int, items, gain float64) {
	if math.IsInf(gain, 0) || math.IsNaN(gain) {
		return
	}
	pc := &cs.pseudo[cs.slot(k)]
	pc.gain[side] += max(0, gain) / items
	pc.n[side]++
}

// branch chooses the class arc to branch on, at a node of bound b: the
// one of best branchScore. Arcs with a trusted pseudo-cost are estimated;
// up to classBranch others, largest sizes first, are tried by strong
// branching, which teaches their pseudo-costs. It returns the arc and its
// two children with the bounds their LPs prove, the one of least bound
// first; the network is back at st.
func (cs *classSearch) branch(b float64, frac []int, st *flowState) (int, [2]classChild) {
	best, bestScore, strong := -1, math.Inf(-1), 0
	var bestKids [2]classChild
	for _, k := range frac {
		kids := cs.children(k)
		switch pc := &cs.pseudo[cs.slot(k)]; {
		case pc.reliable():
			for c := range kids {
				kids[c].bound, kids[c].estimated = b+pc.estimate(kids[c].side, kids[c].items), true
			}
		case strong < classBranch:
			strong++
			cs.solveChildren(k, b, &kids, st)
		default:
			continue
		}
		leastFirst(&kids)
		if score := branchScore(b, kids); score > bestScore || best < 0 {
			best, bestScore, bestKids = k, score, kids
		}
		if !kids[0].estimated && kids[0].bound >= cs.s.cutAt() {
			return k, kids // both children are cut: no need to look further
		}
	}
	if bestKids[0].estimated {
		// A guess proves nothing, and the order it gives the children
		// misleads the dive for an incumbent: on a round whose first
		// incumbent was far from optimal (TestPoorIncumbentRounds), diving
		// to the child of least guess found no whole node in 1,516.
		cs.solveChildren(best, b, &bestKids, st)
		leastFirst(&bestKids)
	}
	return best, bestKids
}

// children are the two sides of a branch on class arc k: at most the
// whole items below its flow, or at least one more.
func (cs *classSearch) children(k int) [2]classChild {
	size := cs.boundedSize[cs.slot(k)]
	f := cs.g.flow[k]
	q := f / size * size
	return [2]classChild{
		{lo: cs.g.lo[k], hi: q, side: 0, items: float64(f-q) / float64(size)},
		{lo: q + size, hi: cs.g.hi[k], side: 1, items: float64(q+size-f) / float64(size)},
	}
}

// slot is class arc k's index in bounded, and in boundedSize and pseudo.
func (cs *classSearch) slot(k int) int { return k - cs.bounded[0] }

// leastFirst orders a branch's children by bound, the least first.
func leastFirst(kids *[2]classChild) {
	if kids[1].bound < kids[0].bound {
		kids[0], kids[1] = kids[1], kids[0]
	}
}

// solveChildren sets the bounds of the children of a branch on class arc
// k from their LPs (+Inf when one has no flow), learning from both; the
// network is back at st.
func (cs *classSearch) solveChildren(k int, b float64, kids *[2]classChild, st *flowState) {
	for c := range kids {
		cs.g.setBounds(k, kids[c].lo, kids[c].hi)
		kids[c].bound, kids[c].estimated = math.Inf(1), false
		if cs.g.restore() {
			kids[c].bound = cs.bound()
		}
		cs.g.load(st, cs.bounded)
		cs.learn(k, kids[c].side, kids[c].items, kids[c].bound-b)
	}
}

// branchScore rates a branch from a node of bound b by the product of
// its children's gains, each at least 1e-12, as MIP solvers do: it
// prefers arcs that raise both sides over one that raises one side only
// (an infeasible child counts as an infinite gain). With pseudo-costs it
// proves 10 of the 14 hard rounds of testdata within the work limit, where
// strong branching on the weaker child's bound alone proved 1.
func branchScore(b float64, kids [2]classChild) float64 {
	return max(kids[0].bound-b, 1e-12) * max(kids[1].bound-b, 1e-12)
}

// fractional lists the class arcs whose flow is not a whole number of
// items, largest size first.
func (cs *classSearch) fractional() []int {
	cs.frac = cs.frac[:0]
	d := len(cs.sizes)
	for c := d - 1; c >= 0; c-- {
		size := cs.sizes[c]
		for i := range cs.p.M() {
			if k := cs.classArc[i*d+c]; k >= 0 && cs.g.flow[k]%size != 0 {
				cs.frac = append(cs.frac, k)
			}
		}
	}
	return cs.frac
}

// extract turns a flow of whole counts into an assignment of whole items
// of the same cost: items whose flow is whole keep their model; the items
// of a size that the flow splits are assigned again by a transportation
// problem with the same counts per model.
func (cs *classSearch) extract() []int {
	p, g := cs.p, cs.g
	choice := make([]int, p.N())
	var split []int
	for j := range choice {
		choice[j] = -2
		for a := cs.itemArc[j]; a < cs.itemArc[j+1]; a++ {
			if g.flow[a] == p.Size[j] {
				choice[j] = cs.itemModel[a]
			}
		}
		if choice[j] == -2 {
			split = append(split, j)
		}
	}
	if len(split) > 0 && !cs.assignSplit(choice, split) {
		return nil
	}
	return choice
}

// assignSplit assigns the items in split, size by size, to the models
// their flow goes to, as many per model as the flow holds.
func (cs *classSearch) assignSplit(choice, split []int) bool {
	p, g, m := cs.p, cs.g, cs.p.M()
	slices.SortFunc(split, func(a, b int) int { return p.Size[a] - p.Size[b] })
	for len(split) > 0 {
		size := p.Size[split[0]]
		end := 1
		for end < len(split) && p.Size[split[end]] == size {
			end++
		}
		items := split[:end]
		split = split[end:]
		// Items, then models, then "left out".
		t := newFlowNet(len(items)+m+1, len(items)*(m+1))
		left := len(items)
		for a, j := range items {
			t.supply[a] = 1
			for e := cs.itemArc[j]; e < cs.itemArc[j+1]; e++ {
				i := cs.itemModel[e]
				node := len(items) + m
				if i >= 0 {
					node = len(items) + i
					t.addArc(a, node, p.Cost[j*m+i], 0, 1)
				} else {
					t.addArc(a, node, 0, 0, 1)
				}
				if g.flow[e] > 0 {
					if i >= 0 {
						t.supply[len(items)+i] -= g.flow[e]
					}
				}
			}
		}
		for i := range m {
			if t.supply[len(items)+i]%size != 0 {
				return false
			}
			t.supply[len(items)+i] /= size
			left += t.supply[len(items)+i]
		}
		t.supply[len(items)+m] = -left
		t.finish()
		ok := t.label() && t.restore()
		g.scans += t.scans + len(t.tail) // the search counts its work
		if !ok {
			return false
		}
		for a, j := range items {
			for e := t.first[a]; e < t.first[a+1]; e++ {
				if r := t.adj[e]; r&1 == 0 && t.flow[r>>1] == 1 {
					if h := int(t.head[r>>1]) - len(items); h < m {
						choice[j] = h
					} else {
						choice[j] = -1
					}
				}
			}
		}
	}
	return true
}

// dive looks for an incumbent from the class search's root, of bound
// root, before the search: depth first, it rounds the fractional arc of
// largest size to the side whose LP is lower first, going back when
// neither side has a flow, within classDiveNodes nodes per class arc.
// Where the item search's incumbent is far from the bound, the search's
// own dive, which branches by strong branching on up to classBranch arcs
// at every node, can spend its whole work limit before it reaches a whole
// node (TestPoorIncumbentRounds); this one takes two LPs per node, and
// its incumbent lets reduced-cost fixing drop more. The network is back
// at the root when it returns.
func (cs *classSearch) dive(root float64) {
	if cs.s.best != nil && root >= cs.s.cutAt() {
		return
	}
	budget := classDiveNodes * len(cs.bounded)
	cs.diveFrom(0, root, &budget)
	cs.s.work += classWork(cs.g.scans)
	cs.g.scans = 0
}

// classDiveNodes bounds dive's nodes, per class arc.
const classDiveNodes = 4

// diveFrom goes on with dive from a node of bound b at depth depth; it
// reports whether the dive is over (an incumbent found, or its budget or
// the search's work spent). The network is back at the node when it
// returns.
func (cs *classSearch) diveFrom(depth int, b float64, budget *int) bool {
	s := cs.s
	if *budget--; *budget < 0 || s.work+classWork(cs.g.scans) > s.workLimit {
		return true
	}
	frac := cs.fractional()
	if len(frac) == 0 {
		if choice := cs.extract(); choice != nil {
			s.offerSub(cs.p, cs.idx, cs.fixedCost, func(j int) int { return choice[j] })
			return true
		}
		return false
	}
	k := frac[0]
	st := cs.save(depth)
	kids := cs.children(k)
	cs.solveChildren(k, b, &kids, st)
	leastFirst(&kids)
	for _, kid := range kids {
		if math.IsInf(kid.bound, 1) || s.best != nil && kid.bound >= s.cutAt() {
			break
		}
		cs.g.setBounds(k, kid.lo, kid.hi)
		over := cs.g.restore() && cs.diveFrom(depth+1, max(b, kid.bound), budget)
		cs.g.load(st, cs.bounded)
		if over {
			return true
		}
	}
	return false
}
