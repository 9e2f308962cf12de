package solver

// arena recycles the large per-node buffers of one search. Nodes are
// explored depth first and release what they hold when they return, so a
// node reuses what its finished siblings and their subtrees released, and
// the memory held is bounded by the depth rather than the number of nodes.
// A nil *arena allocates fresh buffers and recycles nothing.
type arena struct {
	floats [][]float64
	ints   [][]int
	heaps  [][]entryHeap
	items  [][]heapEntry
	// arcs is one buffer: only one LP's duals are computed at a time.
	arcs []arc
	// lp holds the O(M^2) buffers of the LP being solved (one at a time).
	lp *lpBufs
}

// lpBufs returns zeroed LP buffers for m models: the arena's one set, or
// a fresh set for a nil arena.
func (a *arena) lpBufs(m int) *lpBufs {
	if a == nil {
		return newLPBufs(m)
	}
	if a.lp == nil || len(a.lp.srcs) != m {
		a.lp = newLPBufs(m)
	} else {
		a.lp.reset()
	}
	return a.lp
}

// pop takes the last buffer with capacity at least n, or returns nil.
func pop[T any](free *[][]T, n int) []T {
	l := *free
	for k := len(l) - 1; k >= 0 && k >= len(l)-4; k-- {
		if cap(l[k]) >= n {
			b := l[k]
			l[k] = l[len(l)-1]
			*free = l[:len(l)-1]
			return b[:n]
		}
	}
	return nil
}

// float64s returns a slice of n floats with unspecified contents.
func (a *arena) float64s(n int) []float64 {
	if a != nil {
		if b := pop(&a.floats, n); b != nil {
			return b
		}
	}
	return make([]float64, n)
}

// zeroInts returns a slice of n zeros.
func (a *arena) zeroInts(n int) []int {
	if a != nil {
		if b := pop(&a.ints, n); b != nil {
			clear(b)
			return b
		}
	}
	return make([]int, n)
}

// entries returns an empty slice of heap entries with room for n.
func (a *arena) entries(n int) []heapEntry {
	if a != nil {
		if b := pop(&a.items, n); b != nil {
			return b[:0]
		}
	}
	return make([]heapEntry, 0, n)
}

// heapSet returns n empty heaps that keep their previous capacity.
func (a *arena) heapSet(n int) []entryHeap {
	if a != nil {
		if b := pop(&a.heaps, n); b != nil {
			for k := range b {
				b[k] = b[k][:0]
			}
			return b
		}
	}
	return make([]entryHeap, n)
}

func (a *arena) putFloats(b ...[]float64) {
	if a != nil {
		for _, x := range b {
			if cap(x) > 0 {
				a.floats = append(a.floats, x)
			}
		}
	}
}

func (a *arena) putInts(b ...[]int) {
	if a != nil {
		for _, x := range b {
			if cap(x) > 0 {
				a.ints = append(a.ints, x)
			}
		}
	}
}

func (a *arena) putEntries(b []heapEntry) {
	if a != nil && cap(b) > 0 {
		a.items = append(a.items, b)
	}
}

func (a *arena) putHeapSet(b []entryHeap) {
	if a != nil && cap(b) > 0 {
		a.heaps = append(a.heaps, b)
	}
}

// arcBuf returns an empty arc slice with room for n.
func (a *arena) arcBuf(n int) []arc {
	if a == nil {
		return make([]arc, 0, n)
	}
	if cap(a.arcs) < n {
		a.arcs = make([]arc, 0, n)
	}
	return a.arcs[:0]
}
