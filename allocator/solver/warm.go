package solver

import (
	"math"

	"github.com/nomad-fft/nomad-fft/allocator/internal/keyheap"
)

// A warm start (a child node starting from its parent's optimum, less the
// item it branched on and whatever no longer fits) is feasible but may not
// be min-cost for its usage: the capacity the branched item freed, or the
// GPUs fitWarm took out, open arcs that close negative cycles through S or
// T, which shortest paths from S neither see nor cancel. repair cancels
// every negative cycle of the whole residual model graph first, so that
// the augmentations that follow start from a min-cost flow, as they must.
//
// Nodes are the models 0..M-1, S = M and T = M+1; arcs, with the item an
// arc moves (-1 for none):
//
//	S -> b   place GPUs of a waiting item on b    (wS[b], srcs[b])
//	a -> S   take GPUs of an item off a           (wAB[a*M+a], heaps[a*M+a])
//	a -> b   move GPUs of an item from a to b     (wAB[a*M+b], heaps[a*M+b])
//	b -> T   one more GPU of b in use             (0, while b has room)
//	T -> b   one GPU of b less in use             (0, while b has load)
//	S -> T   one GPU less in use in all           (0, while usage > MinUsage)
//
// T -> S, one GPU more in use, is left out: raising usage is the
// augmentations' job, and they take the cheapest way.

// repair cancels negative cycles until none is left, or until maxCancels;
// the final primal-dual check catches whatever it could not settle.
//
// The cycles come from Bellman-Ford on a work list of nodes whose arcs
// must be relaxed, from a virtual root joined to every node at the cost
// its label holds: any labels are sound, since no cycle uses the root.
// They start as the parent's potentials pi, which already satisfy every
// arc the child did not change, and carry over from one cancellation to
// the next, when only the nodes whose arcs it changed join the work list.
func (s *lpSolver) repair(pi []float64) {
	nodes := s.m + 2
	// resW, resJ, stamp and queuedRes start zeroed (lpBufs).
	dist, mag := s.dist[:nodes], s.mag[:nodes]
	copy(dist, pi)
	for v, d := range dist {
		mag[v] = math.Abs(d)
	}
	s.active = s.active[:0]
	for v := range nodes {
		s.enqueue(v)
		s.predNode[v], s.predJob[v] = -1, -1
	}
	s.edges()
	for u := range nodes {
		s.residualRow(u)
	}
	for cancels := 0; cancels < maxCancels; cancels++ {
		v := s.negativeCycle()
		if v < 0 {
			return
		}
		s.cancelResidual(v)
		// What the cancellation changed: S's and T's arcs (usage, loads,
		// waiting items), the arcs out of every model an item entered or
		// left, and the arcs to T of the models on the cycle. Those rows
		// are filled again, and their nodes relax again.
		changed := append(s.next[:0], s.m, s.m+1)
		for a, d := range s.dirty {
			if d {
				changed = append(changed, a)
			}
		}
		for u := v; ; {
			changed = append(changed, u)
			if u = s.predNode[u]; u == v {
				break
			}
		}
		s.edges()
		for _, u := range changed {
			s.residualRow(u)
			s.enqueue(u)
		}
		s.next = changed[:0]
		for u := range nodes {
			s.predNode[u], s.predJob[u] = -1, -1 // the weights changed
		}
	}
}

// enqueue adds v to the work list unless it is there.
func (s *lpSolver) enqueue(v int) {
	if !s.queuedRes[v] {
		s.queuedRes[v] = true
		s.active = append(s.active, v)
	}
}

// residualRow fills the weight and item of every arc out of node u (+Inf,
// -1 when it has no room); the arcs are listed at the top of this file.
func (s *lpSolver) residualRow(u int) {
	m, sol, p := s.m, s.sol, s.p
	nodes, S, T := m+2, m, m+1
	inf := math.Inf(1)
	top := func(h keyheap.Heap) int32 {
		if len(h) == 0 {
			return -1
		}
		return h[0].Item
	}
	room := func(ok bool) float64 {
		if ok {
			return 0
		}
		return inf
	}
	w, js := s.resW[u*nodes:(u+1)*nodes], s.resJ[u*nodes:(u+1)*nodes]
	switch u {
	case S:
		for b := 0; b < m; b++ {
			w[b], js[b] = s.wS[b], top(s.srcs[b])
		}
		w[S], js[S] = inf, -1
		w[T], js[T] = room(sol.total > p.MinUsage), -1
	case T:
		for b := 0; b < m; b++ {
			w[b], js[b] = room(sol.load[b] > 0), -1
		}
		w[S], w[T] = inf, inf
		js[S], js[T] = -1, -1
	default:
		for b := 0; b < m; b++ {
			w[b], js[b] = s.wAB[u*m+b], top(s.heaps[u*m+b])
		}
		// The diagonal heap is the arc u -> S; u -> u is none.
		w[S], js[S] = w[u], js[u]
		w[u], js[u] = inf, -1
		w[T], js[T] = room(sol.load[u] < p.Capacity[u]), -1
	}
}

// negativeCycle relaxes the arcs out of the work list's nodes, pass by
// pass, and returns a node on a cycle of predecessor links as soon as one
// forms (it has negative cost; the relative tolerance of improves keeps
// float noise from closing one), or -1 once the labels settle. A search
// cut short leaves its work list for the next.
func (s *lpSolver) negativeCycle() int {
	nodes := s.m + 2
	w, items := s.resW, s.resJ
	dist, mag := s.dist[:nodes], s.mag[:nodes]
	for pass := 0; pass <= nodes && len(s.active) > 0; pass++ {
		active := s.active
		s.active = s.next[:0]
		clear(s.queuedRes)
		for _, u := range active {
			du, mu := dist[u], mag[u]
			row := w[u*nodes : (u+1)*nodes]
			for v, wv := range row {
				if math.IsInf(wv, 1) {
					continue
				}
				nd, ndMag := du+wv, max(mu, math.Abs(wv))
				if improves(nd, ndMag, dist[v], mag[v]) {
					dist[v], mag[v] = nd, ndMag
					s.predNode[v], s.predJob[v] = u, items[u*nodes+v]
					s.enqueue(v)
				}
			}
		}
		s.next = active[:0]
		if v := s.predCycle(); v >= 0 {
			return v
		}
	}
	return -1
}

// predCycle returns a node on a cycle of predecessor links, or -1.
func (s *lpSolver) predCycle() int {
	nodes := s.m + 2
	seen := s.stamp // 0: unseen; else the walk that reached the node
	clear(seen)
	for start := range nodes {
		walk := start + 1
		for v := start; v >= 0 && seen[v] == 0; v = s.predNode[v] {
			seen[v] = walk
			if p := s.predNode[v]; p >= 0 && seen[p] == walk {
				return p
			}
		}
	}
	return -1
}

// cancelResidual pushes as much as the arcs allow around the predecessor
// cycle through v.
func (s *lpSolver) cancelResidual(v int) {
	delta := math.MaxInt
	for u := v; ; {
		delta = min(delta, s.room(s.predNode[u], u, s.predJob[u]))
		if u = s.predNode[u]; u == v {
			break
		}
	}
	for u := v; ; {
		s.push(s.predNode[u], u, s.predJob[u], delta)
		if u = s.predNode[u]; u == v {
			break
		}
	}
	s.sol.augs++
}

// room is the residual capacity of arc u -> v moving item j.
func (s *lpSolver) room(u, v int, j int32) int {
	m, sol, p := s.m, s.sol, s.p
	S, T := m, m+1
	switch {
	case u == S && v == T:
		return sol.total - p.MinUsage
	case u == S:
		return p.Size[j] - sol.assigned[j]
	case v == T:
		return p.Capacity[u] - sol.load[u]
	case u == T:
		return sol.load[v]
	}
	return sol.flow[int(j)*m+u] // a -> S and a -> b both take j off a
}

// push sends delta along arc u -> v moving item j.
func (s *lpSolver) push(u, v int, j int32, delta int) {
	m, sol := s.m, s.sol
	S, T := m, m+1
	switch {
	case u == S && v == T:
		sol.total -= delta
	case u == S:
		s.add(int(j), v, delta)
		sol.assigned[j] += delta
	case v == T:
		sol.load[u] += delta
	case u == T:
		sol.load[v] -= delta
	default:
		sol.flow[int(j)*m+u] -= delta
		s.dirty[u] = true
		if v != S {
			s.add(int(j), v, delta)
			return
		}
		if sol.assigned[j] == s.p.Size[j] {
			s.waiting(int(j)) // it left the source heaps, or never entered
		}
		sol.assigned[j] -= delta
	}
}

// waiting puts item j back into the source heaps.
func (s *lpSolver) waiting(j int) {
	m := s.m
	for i, u := range s.unit[j*m : (j+1)*m] {
		if !math.IsInf(u, 1) {
			s.srcs[i].Push(keyheap.Entry{Key: u, Item: int32(j)})
		}
	}
}
