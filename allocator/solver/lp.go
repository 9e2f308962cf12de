package solver

import (
	"math"

	"github.com/nomad-fft/nomad-fft/allocator/internal/keyheap"
)

// The LP relaxation of a round, with x_ji in [0, 1], is a transportation
// problem once it is written in GPUs: y_ji = Size[j] * x_ji units flow from
// item j (supply Size[j]) to model i (capacity Capacity[i]) at unit cost
// Cost/Size, with total flow at least MinUsage. We solve it by successive
// shortest paths. Because there are only M models, a path never needs item
// nodes of its own: it runs S -> model -> model -> ... -> T where each hop
// a -> b moves the cheapest-to-move item from a to b. Shortest paths are
// then Bellman-Ford over M+2 nodes, and the cheapest item per hop comes
// from a sorted list (S -> b; supply only shrinks) or a lazy heap (a -> b).

// relTol times the magnitude of a path cost's terms is the slack below
// which two path costs count as equal. Path costs are sums and differences
// of unit costs, so their rounding error scales with the largest term that
// went into them, not with the result: a tolerance relative to the result
// let float noise turn a zero-cost cycle of moves into an "improvement" (a
// regression test keeps the instance, from the simulator, where it did).
// Each label therefore carries the largest magnitude met on its way.
const relTol = 1e-12

// warmStart is where a child's LP starts: its parent's optimum carried to
// the child's items and cut to its capacities, and the parent's potentials.
type warmStart struct {
	flow []int // GPUs of item j on model i at j*M+i
	pi   []float64
	// owned: the LP may keep flow as its own (solveFull then sets it to
	// nil), so that a child's warm flow is not copied once more.
	owned bool
}

// lpSolution is the optimum of the relaxation with its duals.
type lpSolution struct {
	feasible bool
	// flow[j*M+i] is GPUs of item j on model i; with rows, item j's are
	// in row rows[j] of flow, and an item with no row (-1) has none.
	// Read them with row.
	flow []int
	// rows is nil but for a priced LP expanded to all of its problem's
	// items (expand): a dense flow would be N*M ints, 12.8 MB at
	// 100,000 x 16, nearly all zero.
	rows     []int
	assigned []int
	load     []int
	total    int
	value    float64
	// q[i] is the unit value of model i and nu that of the usage bound
	// (q_i = nu - lambda_i, lambda_i >= 0 the capacity price). Any such
	// pair gives the Lagrangian bound; these are optimal.
	q     []float64
	nu    float64
	bound float64
	// pi are the node potentials q and nu derive from (models, S, T): a
	// child's repair starts its labels from them.
	pi   []float64
	augs int
	// optimal: primal and dual agree. Only a stalled or noisy solve is not;
	// its bound is still valid, its flow still feasible.
	optimal bool
	stalled bool
	// valueMag and boundMag sum the magnitudes of the terms of value and
	// bound; noise is the rounding their agreement is allowed.
	valueMag, boundMag, noise float64
}

// arc is one residual edge of the model graph, for the dual potentials.
type arc struct {
	u, v int
	w    float64
}

type lpSolver struct {
	p    *Problem
	ar   *arena
	m, n int
	unit []float64
	sol  *lpSolution
	// The buffers of O(M^2), shared by the LPs of a search (lpBufs).
	*lpBufs
}

// lpBufs are an LP's working buffers whose size depends only on M. A
// search solves one LP at a time and solves one per node, so its arena
// keeps one set for all of them (arena.lpBufs): fresh ones per node were
// a fifth of a large round's allocations (BenchmarkDecide).
type lpBufs struct {
	// srcs[i] holds the items that still have GPUs to place, cheapest per
	// GPU on model i first: a heap, since an LP takes only its top few.
	srcs []keyheap.Heap
	// heaps[a*M+b] (a != b) holds the items on model a, cheapest to move
	// to b first; heaps[a*M+a] holds them most expensive on a first, for
	// the arc a -> S that takes GPUs of an item out again. wAB has their
	// top keys.
	heaps    []keyheap.Heap
	wS, wAB  []float64
	dist     []float64
	predNode []int
	predJob  []int32
	// dirty marks models whose a -> b hop weights must be refreshed.
	dirty []bool
	// mag[v] is the largest magnitude among the terms of dist[v].
	mag []float64
	// active, next and queued are Bellman-Ford's work lists.
	active, next []int
	queued       []bool
	// resW and resJ are the weights and items of repair's residual arcs,
	// queuedRes marks the nodes on its work list, and stamp the nodes a
	// walk along predecessors met.
	resW      []float64
	resJ      []int32
	queuedRes []bool
	stamp     []int
	// path and seen are run's walk back along predecessors.
	path, seen []int
}

// newLPBufs returns zeroed buffers for m models, as make leaves them.
func newLPBufs(m int) *lpBufs {
	nodes := m + 2
	return &lpBufs{
		srcs: make([]keyheap.Heap, m),
		wS:   make([]float64, m), wAB: make([]float64, m*m),
		dist: make([]float64, m+3), mag: make([]float64, m+3),
		predNode: make([]int, m+2), predJob: make([]int32, m+2),
		dirty:  make([]bool, m),
		active: make([]int, 0, m), next: make([]int, 0, m),
		queued: make([]bool, m),
		resW:   make([]float64, nodes*nodes), resJ: make([]int32, nodes*nodes),
		queuedRes: make([]bool, nodes), stamp: make([]int, nodes),
		path: make([]int, 0, m+1), seen: make([]int, m),
	}
}

// reset zeroes the buffers (heaps aside: heapSet gives them) as
// newLPBufs leaves them.
func (b *lpBufs) reset() {
	clear(b.srcs)
	clear(b.wS)
	clear(b.wAB)
	clear(b.dist)
	clear(b.mag)
	clear(b.predNode)
	clear(b.predJob)
	clear(b.dirty)
	b.active, b.next = b.active[:0], b.next[:0]
	clear(b.queued)
	clear(b.resW)
	clear(b.resJ)
	clear(b.queuedRes)
	clear(b.stamp)
	b.path = b.path[:0]
	clear(b.seen)
}

// solveLP solves the relaxation of p exactly (up to float rounding).
//
// warm, when not nil, is a starting flow from which the augmentations
// continue; a child node starts from its parent's optimum. repair first
// makes it min-cost for its usage; the answer is accepted only when primal
// and dual agree, and otherwise solveLP returns nil and the caller solves
// from scratch.
//
// Buffers come from ar (nil allocates); the solution's flow and assigned
// go back with ar.release(sol), the rest before solveLP returns.
func solveLP(p *Problem, warm *warmStart, ar *arena) *lpSolution {
	if warm == nil && priced(p) {
		if sol := solvePriced(p, ar); sol != nil {
			return sol
		}
	}
	return solveFull(p, warm, ar)
}

// solveFull is solveLP over all of p's items.
//
// It runs at every node of a search, over the node's free items, which on
// a large round with a small gap stay about a thousand for thousands of
// nodes: so it builds everything in one pass over the items, and touches
// each of the N*M options a fixed, small number of times (no clearing,
// heaps built in linear time). A warm start whose owned is set hands its
// flow buffer over, and the LP's flow is then that buffer.
func solveFull(p *Problem, warm *warmStart, ar *arena) *lpSolution {
	m, n := p.M(), p.N()
	var flow []int
	switch {
	case warm != nil && warm.owned:
		flow, warm.flow = warm.flow, nil
	default:
		flow = ar.anyInts(n * m)
		if warm != nil {
			copy(flow, warm.flow)
		}
	}
	s := &lpSolver{
		p: p, m: m, n: n, ar: ar,
		unit: ar.float64s(n * m),
		sol: &lpSolution{
			flow:     flow,
			assigned: ar.anyInts(n),
			load:     make([]int, m),
			q:        make([]float64, m),
		},
		lpBufs: ar.lpBufs(m),
	}
	s.heaps = ar.heapSet(m * m)
	for i := range s.dirty {
		s.dirty[i] = true
	}
	// Items a warm start placed whole never have GPUs left to place, so
	// they stay out of the source heaps. Each model's heap holds at most n.
	srcBuf := ar.entries(n * m)[:n*m]
	for i := range s.srcs {
		s.srcs[i] = srcBuf[i*n : i*n : (i+1)*n]
	}
	defer func() {
		ar.putFloats(s.unit)
		ar.putEntries(srcBuf)
		ar.putHeapSet(s.heaps)
	}()
	sol := s.sol
	for j, k := 0, 0; j < n; j, k = j+1, k+m {
		// One division per item, not per option. For gang sizes that are
		// powers of two (nearly all) the product is exactly the quotient.
		d := p.Size[j]
		inv := 1 / float64(d)
		unit, row := s.unit[k:k+m], flow[k:k+m]
		a := 0
		for i := range unit {
			unit[i] = math.Inf(1)
			if c := p.Cost[k+i]; !math.IsInf(c, 1) && d <= p.Capacity[i] {
				unit[i] = c * inv
			}
			f := 0
			if warm != nil && row[i] > 0 && !math.IsInf(unit[i], 1) {
				f = row[i]
			}
			row[i] = f
			a += f
			sol.load[i] += f
		}
		sol.assigned[j] = a
		sol.total += a
		if a > 0 {
			// Index the item for moves out of every model it sits on: the
			// heaps are ordered once all are in (heapify), which gives
			// the same tops as pushing one by one (entries are ordered by
			// key, then item).
			for b, f := range row {
				if f > 0 {
					s.indexMoves(j, b, true)
				}
			}
		}
		if a >= d {
			continue
		}
		for i, u := range unit {
			if !math.IsInf(u, 1) {
				s.srcs[i] = append(s.srcs[i], keyheap.Entry{Key: u, Item: int32(j)})
			}
		}
	}
	for i := range s.srcs {
		s.srcs[i].Init()
	}
	if sol.total > 0 {
		for _, h := range s.heaps {
			h.Init()
		}
	}
	if warm != nil {
		s.repair(warm.pi)
	}
	s.run()
	s.duals()
	// Primal and dual can only agree to within the rounding of their
	// terms, however small the values themselves are.
	s.sol.noise = noiseTol * (s.sol.valueMag + s.sol.boundMag)
	agree := optTol*math.Abs(s.sol.value) + s.sol.noise
	s.sol.optimal = !s.sol.stalled && math.Abs(s.sol.value-s.sol.bound) <= agree
	// An infeasible end needs no second solve: whether usage can grow
	// does not depend on costs, and every path was searched.
	if warm != nil && s.sol.feasible && !s.sol.optimal {
		ar.release(s.sol)
		return nil
	}
	return s.sol
}

// row is item j's flow on each of the m models, nil when it has none.
func (sol *lpSolution) row(j, m int) []int {
	if sol.rows != nil {
		if j = sol.rows[j]; j < 0 {
			return nil
		}
	}
	return sol.flow[j*m : (j+1)*m]
}

// release returns the solution's large buffers to ar.
func (ar *arena) release(sol *lpSolution) {
	if sol != nil {
		ar.putInts(sol.flow, sol.assigned, sol.rows)
	}
}

// optTol is the relative primal-dual disagreement above which an LP
// answer is taken as not optimal (solves agree to rounding, ~1e-14), and
// noiseTol the per-term rounding allowance when costs differ widely in
// magnitude (value small, terms large).
const (
	optTol   = 1e-10
	noiseTol = 1e-13
)

// edges refreshes the cheapest S->b and a->b hop weights.
func (s *lpSolver) edges() {
	m, sol := s.m, s.sol
	for i := 0; i < m; i++ {
		h := &s.srcs[i]
		for len(*h) > 0 && sol.assigned[(*h)[0].Item] >= s.p.Size[(*h)[0].Item] {
			h.Pop()
		}
		s.wS[i] = math.Inf(1)
		if len(*h) > 0 {
			s.wS[i] = (*h)[0].Key
		}
	}
	for a := 0; a < m; a++ {
		if !s.dirty[a] {
			continue // no item entered or left a since the last refresh
		}
		s.dirty[a] = false
		for b := 0; b < m; b++ {
			h := &s.heaps[a*m+b]
			for len(*h) > 0 && sol.flow[int((*h)[0].Item)*m+a] == 0 {
				h.Pop()
			}
			s.wAB[a*m+b] = math.Inf(1)
			if len(*h) > 0 {
				s.wAB[a*m+b] = (*h)[0].Key
			}
		}
	}
}

// improves reports whether label nd, whose terms reach magnitude mag, is
// really below old (whose terms reach oldMag), beyond rounding.
func improves(nd, mag, old, oldMag float64) bool {
	if math.IsInf(old, 1) {
		return !math.IsInf(nd, 1)
	}
	return nd < old-relTol*max(mag, oldMag)
}

// shortest runs Bellman-Ford from S over the model graph and returns the
// model that reaches T most cheaply (-1 if none) and the path cost.
func (s *lpSolver) shortest() (int, float64) {
	m, sol := s.m, s.sol
	inf := math.Inf(1)
	for i := 0; i < m; i++ {
		s.dist[i] = s.wS[i]
		s.mag[i] = math.Abs(s.wS[i])
		s.predNode[i], s.predJob[i] = m, -1
		if !math.IsInf(s.wS[i], 1) {
			s.predJob[i] = s.srcs[i][0].Item
		}
	}
	// Bellman-Ford, relaxing in each pass only from the models whose label
	// changed in the pass before (most passes touch one or two).
	active, next := s.active[:0], s.next[:0]
	for i := 0; i < m; i++ {
		if !math.IsInf(s.dist[i], 1) {
			active = append(active, i)
		}
	}
	for pass := 0; pass < m && len(active) > 0; pass++ {
		clear(s.queued)
		next = next[:0]
		for _, a := range active {
			da, ma := s.dist[a], s.mag[a]
			row := s.wAB[a*m : (a+1)*m]
			for b, w := range row {
				if a == b || math.IsInf(w, 1) {
					continue
				}
				nd := da + w
				mag := max(ma, math.Abs(w))
				old := s.dist[b]
				// improves, inlined: this is the solver's hottest loop.
				if nd < old-relTol*max(mag, s.mag[b]) || (math.IsInf(old, 1) && !math.IsInf(nd, 1)) {
					s.dist[b], s.mag[b] = nd, mag
					s.predNode[b], s.predJob[b] = a, s.heaps[a*m+b][0].Item
					if !s.queued[b] {
						s.queued[b] = true
						next = append(next, b)
					}
				}
			}
		}
		active, next = next, active
	}
	s.active, s.next = active, next
	best, bd := -1, inf
	for i := 0; i < m; i++ {
		if sol.load[i] < s.p.Capacity[i] && s.dist[i] < bd {
			best, bd = i, s.dist[i]
		}
	}
	return best, bd
}

// run augments along shortest paths until usage reaches MinUsage and no
// path has negative cost, or no path is left.
//
// A cycle in the shortest-path tree means a negative cycle of moves: the
// flow is not min-cost for its value (a warm start can be so; float noise
// could make a cold one so). The cycle is cancelled, which lowers the cost
// and keeps usage, and the search goes on; maxCancels bounds this.
func (s *lpSolver) run() {
	m, sol, p := s.m, s.sol, s.p
	path, seen := s.path, s.seen
	for cancels := 0; ; {
		s.edges()
		last, cost := s.shortest()
		if last < 0 {
			break
		}
		nonNeg := cost >= -relTol*s.mag[max(last, 0)]
		if sol.total >= p.MinUsage && nonNeg {
			break
		}
		// Walk back from the last model to S; collect the models.
		path = path[:0]
		clear(seen)
		cycle := -1
		for v := last; v != m; v = s.predNode[v] {
			if seen[v] > 0 {
				cycle = v
				break
			}
			seen[v] = 1
			path = append(path, v)
		}
		if cycle >= 0 {
			if cancels++; cancels > maxCancels {
				sol.stalled = true
				break
			}
			s.cancel(cycle)
			continue
		}
		first := path[len(path)-1]
		j0 := int(s.predJob[first])
		delta := p.Size[j0] - sol.assigned[j0]
		delta = min(delta, p.Capacity[last]-sol.load[last])
		for _, v := range path[:len(path)-1] {
			j, a := int(s.predJob[v]), s.predNode[v]
			delta = min(delta, sol.flow[j*m+a])
		}
		if nonNeg {
			delta = min(delta, p.MinUsage-sol.total)
		}
		s.add(j0, first, delta)
		sol.assigned[j0] += delta
		for _, v := range path[:len(path)-1] {
			j, a := int(s.predJob[v]), s.predNode[v]
			sol.flow[j*m+a] -= delta
			s.dirty[a] = true
			s.add(j, v, delta)
		}
		sol.load[last] += delta
		sol.total += delta
		sol.value += cost * float64(delta)
		sol.augs++
	}
	sol.feasible = sol.total >= p.MinUsage
	// Recompute the value from the flows: the sum of path costs drifts.
	sol.value, sol.valueMag = 0, 0
	for k, f := range sol.flow {
		if f > 0 {
			sol.value += float64(f) * s.unit[k]
			sol.valueMag += float64(f) * math.Abs(s.unit[k])
		}
	}
}

// maxCancels bounds cycle cancellations in one LP; past it the LP gives up
// and reports itself not optimal rather than loop on float noise.
const maxCancels = 1000

// cancel pushes flow around the negative cycle of moves through model v
// (each node's tree edge moves one item from its parent model to it).
func (s *lpSolver) cancel(v int) {
	m, sol := s.m, s.sol
	delta := math.MaxInt
	for u := v; ; {
		a := s.predNode[u]
		delta = min(delta, sol.flow[int(s.predJob[u])*m+a])
		if u = a; u == v {
			break
		}
	}
	for u := v; ; {
		j, a := int(s.predJob[u]), s.predNode[u]
		sol.flow[j*m+a] -= delta
		s.dirty[a] = true
		s.add(j, u, delta)
		if u = a; u == v {
			break
		}
	}
}

// add moves delta more GPUs of item j onto model b and indexes the item
// for moves out of b when it first lands there.
func (s *lpSolver) add(j, b, delta int) {
	m := s.m
	k := j*m + b
	s.dirty[b] = true
	if s.sol.flow[k] == 0 {
		s.indexMoves(j, b, false)
	}
	s.sol.flow[k] += delta
}

// indexMoves enters item j, which now sits on model b, in the heaps of
// moves out of b: to each model c it fits (key: the cost per GPU of c over
// b's) and out of the flow (key: minus b's). bulk appends the entries for a
// heapify of every heap after; otherwise each is pushed.
func (s *lpSolver) indexMoves(j, b int, bulk bool) {
	m := s.m
	unit := s.unit[j*m : j*m+m]
	for c, u := range unit {
		if c == b || math.IsInf(u, 1) {
			continue
		}
		if e := (keyheap.Entry{Key: u - unit[b], Item: int32(j)}); bulk {
			s.heaps[b*m+c] = append(s.heaps[b*m+c], e)
		} else {
			s.heaps[b*m+c].Push(e)
		}
	}
	if e := (keyheap.Entry{Key: -unit[b], Item: int32(j)}); bulk {
		s.heaps[b*m+b] = append(s.heaps[b*m+b], e)
	} else {
		s.heaps[b*m+b].Push(e)
	}
}

// duals derives optimal (q, nu) from node potentials of the final residual
// graph (shortest distances from a virtual root), and the Lagrangian bound.
// Nodes: models 0..m-1, S = m, T = m+1, root = m+2.
func (s *lpSolver) duals() {
	m, sol, p := s.m, s.sol, s.p
	S, T := m, m+1
	s.edges()
	arcs := s.ar.arcBuf(m*(m+3) + 2)
	for i := 0; i < m; i++ {
		// i -> S undoes GPUs of an item on i (its S -> item arc reversed).
		arcs = append(arcs, arc{S, i, s.wS[i]}, arc{i, S, s.wAB[i*m+i]})
		if sol.load[i] < p.Capacity[i] {
			arcs = append(arcs, arc{i, T, 0})
		}
		if sol.load[i] > 0 {
			arcs = append(arcs, arc{T, i, 0})
		}
		for b := 0; b < m; b++ {
			if b != i {
				arcs = append(arcs, arc{i, b, s.wAB[i*m+b]})
			}
		}
	}
	arcs = append(arcs, arc{T, S, 0})
	if sol.total > p.MinUsage {
		arcs = append(arcs, arc{S, T, 0})
	}
	pi := s.dist[:m+2]
	for k := range pi {
		pi[k] = 0 // root -> every node at cost 0
	}
	mag := s.mag[:m+2]
	clear(mag)
	for pass := 0; pass < m+2; pass++ {
		changed := false
		for _, a := range arcs {
			if math.IsInf(a.w, 1) {
				continue
			}
			nd, ndMag := pi[a.u]+a.w, max(mag[a.u], math.Abs(a.w))
			if improves(nd, ndMag, pi[a.v], mag[a.v]) {
				pi[a.v], mag[a.v] = nd, ndMag
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	sol.pi = append(sol.pi[:0], pi...)
	// With a negative cycle (a warm start that is not min-cost) the
	// potentials do not converge; clamping keeps the bound valid.
	sol.nu = max(0, pi[T]-pi[S])
	for i := 0; i < m; i++ {
		sol.q[i] = min(pi[i]-pi[S], sol.nu)
	}
	sol.bound, sol.boundMag = lagrangeBound(p, s.unit, sol.q, sol.nu)
}

// lagrangeBound is L(q, nu) = sum_j min(0, min_i c_ji - d_j q_i) +
// sum_i q_i Y_i - nu (sum_i Y_i - K), a lower bound on the program for any
// nu >= 0 and q_i <= nu. mag is the sum of its terms' magnitudes.
func lagrangeBound(p *Problem, unit []float64, q []float64, nu float64) (b, mag float64) {
	m := p.M()
	ySum := 0
	for j := 0; j < p.N(); j++ {
		best, bestMag := 0.0, 0.0
		d := float64(p.Size[j])
		for i := 0; i < m; i++ {
			if u := unit[j*m+i]; !math.IsInf(u, 1) && d*(u-q[i]) < best {
				best, bestMag = d*(u-q[i]), d*(math.Abs(u)+math.Abs(q[i]))
			}
		}
		b += best
		mag += bestMag
	}
	for i, y := range p.Capacity {
		b += q[i] * float64(y)
		mag += math.Abs(q[i]) * float64(y)
		ySum += y
	}
	last := nu * float64(ySum-p.MinUsage)
	return b - last, mag + math.Abs(last)
}
