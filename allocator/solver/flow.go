package solver

import "math"

// flowNet is a min-cost flow network with integer bounds and float unit
// costs, the LP of the class search (classes.go). It is solved by
// successive shortest paths with node potentials: every residual arc keeps
// a reduced cost of at least 0 (cost + pot[tail] - pot[head], up to
// float noise), and restore sends each node's excess to a node in
// deficit along shortest paths. Tightening one arc's bounds leaves that
// invariant intact, so a child of a search node starts from its parent's
// optimum and needs only the few paths its change displaced.
type flowNet struct {
	// Arc k runs from tail[k] to head[k] with lo[k] <= flow[k] <= hi[k].
	// Its residual arcs are 2k (forward, hi - flow left) and 2k+1
	// (backward, flow - lo left).
	tail, head   []int32
	cost         []float64
	lo, hi, flow []int
	// supply is each node's b (out minus in, once feasible); excess is
	// what it still has to send (negative: to receive).
	supply, excess []int
	pot            []float64
	// first[v]:first[v+1] indexes adj, the residual arcs leaving v.
	first, adj []int32
	// Dijkstra's scratch.
	dist    []float64
	pred    []int32
	settled []int32
	state   []uint8 // 0 unseen, 1 queued, 2 settled
	queue   distHeap
	// scans counts residual arcs examined, the search's unit of work.
	scans int
}

// newFlowNet makes a network of n nodes with room for arcs arcs.
func newFlowNet(n, arcs int) *flowNet {
	return &flowNet{
		tail: make([]int32, 0, arcs), head: make([]int32, 0, arcs), cost: make([]float64, 0, arcs),
		lo: make([]int, 0, arcs), hi: make([]int, 0, arcs), flow: make([]int, 0, arcs),
		supply: make([]int, n), excess: make([]int, n), pot: make([]float64, n),
		dist: make([]float64, n), pred: make([]int32, n), state: make([]uint8, n),
	}
}

// addArc adds an arc from u to v and returns its index. Its flow starts at
// lo.
func (g *flowNet) addArc(u, v int, cost float64, lo, hi int) int {
	g.tail = append(g.tail, int32(u))
	g.head = append(g.head, int32(v))
	g.cost = append(g.cost, cost)
	g.lo = append(g.lo, lo)
	g.hi = append(g.hi, hi)
	g.flow = append(g.flow, lo)
	return len(g.tail) - 1
}

// finish builds the adjacency, once every arc is added, and the excesses
// of the flow set.
func (g *flowNet) finish() {
	copy(g.excess, g.supply)
	for k, f := range g.flow {
		g.excess[g.tail[k]] -= f
		g.excess[g.head[k]] += f
	}
	if g.adj != nil {
		return
	}
	n := len(g.supply)
	g.first = make([]int32, n+1)
	for k := range g.tail {
		g.first[g.tail[k]+1]++
		g.first[g.head[k]+1]++
	}
	for v := range n {
		g.first[v+1] += g.first[v]
	}
	g.adj = make([]int32, 2*len(g.tail))
	next := make([]int32, n)
	copy(next, g.first[:n])
	for k := range g.tail {
		u, v := g.tail[k], g.head[k]
		g.adj[next[u]] = int32(2 * k)
		next[u]++
		g.adj[next[v]] = int32(2*k + 1)
		next[v]++
	}
}

// residual is residual arc r's capacity, its head and its cost.
func (g *flowNet) residual(r int32) (int, int32, float64) {
	k := r >> 1
	if r&1 == 0 {
		return g.hi[k] - g.flow[k], g.head[k], g.cost[k]
	}
	return g.flow[k] - g.lo[k], g.tail[k], -g.cost[k]
}

// label sets potentials that keep every residual arc's reduced cost at
// least 0: shortest distances from a virtual node joined to all (queued
// Bellman-Ford). It reports false when they do not settle, which only a
// negative cycle (a flow that is not optimal) causes.
func (g *flowNet) label() bool {
	n := len(g.pot)
	for v := range g.pot {
		g.pot[v] = 0
	}
	inQueue := make([]bool, n)
	queue := make([]int32, 0, n)
	for v := range n {
		queue = append(queue, int32(v))
		inQueue[v] = true
	}
	// Bellman-Ford needs at most n passes; a few dozen settle these
	// networks, and running out means falling back, not a wrong answer.
	budget := labelPasses * len(g.adj)
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		inQueue[u] = false
		for _, r := range g.adj[g.first[u]:g.first[u+1]] {
			g.scans++
			budget--
			c, v, w := g.residual(r)
			if c <= 0 {
				continue
			}
			if d := g.pot[u] + w; d < g.pot[v]-labelSlack*(math.Abs(d)+1) {
				g.pot[v] = d
				if !inQueue[v] {
					inQueue[v] = true
					queue = append(queue, v)
				}
			}
		}
		if budget < 0 {
			return false
		}
		if h > 1<<20 { // keep the queue's memory bounded
			queue = append(queue[:0], queue[h+1:]...)
			h = -1
		}
	}
	return true
}

// labelPasses bounds label's work, in passes over every arc.
const labelPasses = 64

// labelSlack is the relative improvement label needs to move a potential:
// float noise must not look like a negative cycle.
const labelSlack = 1e-12

// restore sends every excess to a deficit along shortest paths. It
// reports false when some excess can reach no deficit: the bounds admit
// no flow.
func (g *flowNet) restore() bool {
	for {
		sources := 0
		for v, e := range g.excess {
			if e > 0 {
				sources++
				g.state[v] = 1
				g.dist[v] = 0
				g.pred[v] = -1
				g.queue.push(distItem{0, int32(v)})
			}
		}
		if sources == 0 {
			return true
		}
		t := g.shortest()
		g.reset()
		if t < 0 {
			return false
		}
	}
}

// shortest runs Dijkstra from the queued sources to the first node in
// deficit, augments along the path found and updates the potentials. It
// returns that node, or -1 when none is reachable.
func (g *flowNet) shortest() int32 {
	t := int32(-1)
	for len(g.queue) > 0 {
		it := g.queue.pop()
		u := it.v
		if g.state[u] == 2 || it.d > g.dist[u] {
			continue
		}
		g.state[u] = 2
		g.settled = append(g.settled, u)
		if g.excess[u] < 0 {
			t = u
			break
		}
		pu := g.pot[u]
		for _, r := range g.adj[g.first[u]:g.first[u+1]] {
			g.scans++
			c, v, w := g.residual(r)
			if c <= 0 || g.state[v] == 2 {
				continue
			}
			d := it.d + max(0, w+pu-g.pot[v])
			if g.state[v] == 0 || d < g.dist[v] {
				g.state[v] = 1
				g.dist[v] = d
				g.pred[v] = r
				g.queue.push(distItem{d, v})
			}
		}
	}
	if t < 0 {
		return -1
	}
	dt := g.dist[t]
	for _, v := range g.settled {
		g.pot[v] += g.dist[v] - dt
	}
	// The path's bottleneck, then the augmentation.
	delta := -g.excess[t]
	v := t
	for g.pred[v] >= 0 {
		r := g.pred[v]
		c, _, _ := g.residual(r)
		delta = min(delta, c)
		v = g.residualTail(r)
	}
	delta = min(delta, g.excess[v])
	g.excess[v] -= delta
	g.excess[t] += delta
	for u := t; g.pred[u] >= 0; {
		r := g.pred[u]
		if r&1 == 0 {
			g.flow[r>>1] += delta
		} else {
			g.flow[r>>1] -= delta
		}
		u = g.residualTail(r)
	}
	return t
}

// residualTail is the node residual arc r leaves.
func (g *flowNet) residualTail(r int32) int32 {
	if r&1 == 0 {
		return g.tail[r>>1]
	}
	return g.head[r>>1]
}

// reset clears Dijkstra's marks for the next run.
func (g *flowNet) reset() {
	for _, it := range g.queue {
		g.state[it.v] = 0
	}
	g.queue = g.queue[:0]
	for _, v := range g.settled {
		g.state[v] = 0
	}
	g.settled = g.settled[:0]
}

// setBounds changes arc k's bounds to lo..hi, within its old ones, and
// moves its flow inside them: the excess this leaves at its ends is what
// restore then sends elsewhere. The potentials stay valid: the moved flow
// sits at a bound, whose residual arc beyond it is empty.
func (g *flowNet) setBounds(k, lo, hi int) {
	f := min(max(g.flow[k], lo), hi)
	d := f - g.flow[k]
	g.flow[k] = f
	g.lo[k], g.hi[k] = lo, hi
	g.excess[g.tail[k]] -= d
	g.excess[g.head[k]] += d
}

// value is the flow's cost and the sum of its terms' magnitudes.
func (g *flowNet) value() (v, mag float64) {
	for k, f := range g.flow {
		t := g.cost[k] * float64(f)
		v += t
		mag += math.Abs(t)
	}
	return v, mag
}

// bound is the Lagrangian (dual) bound the potentials prove, whatever
// they are: the least cost of any flow within the bounds is at least
// -sum_v pot[v] supply[v] + sum_k min(rc_k lo_k, rc_k hi_k). mag sums its
// terms' magnitudes, for the rounding it may carry.
func (g *flowNet) bound() (b, mag float64) {
	g.scans += len(g.tail) + len(g.supply)
	for v, s := range g.supply {
		t := g.pot[v] * float64(s)
		b -= t
		mag += math.Abs(t)
	}
	for k := range g.tail {
		rc := g.cost[k] + g.pot[g.tail[k]] - g.pot[g.head[k]]
		t := rc * float64(g.lo[k])
		if rc < 0 {
			t = rc * float64(g.hi[k])
		}
		b += t
		mag += math.Abs(t)
	}
	return b, mag
}

// flowState is what a search node saves of the network to go back to it.
// Only the arcs in bounded (the class arcs) ever change their bounds.
type flowState struct {
	flow, excess, lo, hi []int
	pot                  []float64
}

// save and load count a scan per arc and node they copy.
func (g *flowNet) save(st *flowState, bounded []int) {
	g.scans += len(g.flow) + len(g.pot)
	st.flow = append(st.flow[:0], g.flow...)
	st.excess = append(st.excess[:0], g.excess...)
	st.pot = append(st.pot[:0], g.pot...)
	st.lo, st.hi = st.lo[:0], st.hi[:0]
	for _, k := range bounded {
		st.lo = append(st.lo, g.lo[k])
		st.hi = append(st.hi, g.hi[k])
	}
}

func (g *flowNet) load(st *flowState, bounded []int) {
	g.scans += len(g.flow) + len(g.pot)
	copy(g.flow, st.flow)
	copy(g.excess, st.excess)
	copy(g.pot, st.pot)
	for a, k := range bounded {
		g.lo[k], g.hi[k] = st.lo[a], st.hi[a]
	}
}

type distItem struct {
	d float64
	v int32
}

// distHeap is Dijkstra's queue, a binary heap, least distance first
// (written out: container/heap's interface boxes every item).
type distHeap []distItem

func (h *distHeap) push(x distItem) {
	q := append(*h, x)
	k := len(q) - 1
	for k > 0 {
		p := (k - 1) / 2
		if q[p].d <= x.d {
			break
		}
		q[k] = q[p]
		k = p
	}
	q[k] = x
	*h = q
}

func (h *distHeap) pop() distItem {
	q := *h
	top := q[0]
	last := q[len(q)-1]
	q = q[:len(q)-1]
	k, n := 0, len(q)
	for n > 0 {
		c := 2*k + 1
		if c >= n {
			break
		}
		if c+1 < n && q[c+1].d < q[c].d {
			c++
		}
		if last.d <= q[c].d {
			break
		}
		q[k] = q[c]
		k = c
	}
	if n > 0 {
		q[k] = last
	}
	*h = q
	return top
}
