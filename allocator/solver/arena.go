package solver

import (
	"math/bits"

	"github.com/nomad-fft/nomad-fft/allocator/internal/keyheap"
	"github.com/nomad-fft/nomad-fft/allocator/internal/recycle"
)

// arena recycles the large per-node buffers of one search. Nodes are
// explored depth first and release what they hold when they return, so a
// node reuses what its finished siblings and their subtrees released, and
// the memory held is bounded by the depth rather than the number of nodes.
// A nil *arena allocates fresh buffers and recycles nothing.
type arena struct {
	floats freeList[float64]
	ints   freeList[int]
	small  freeList[int32]
	heaps  freeList[keyheap.Heap]
	items  freeList[keyheap.Entry]
	// arcs is one buffer: only one LP's duals are computed at a time.
	arcs []arc
	// lp holds the O(M^2) buffers of the LP being solved (one at a time).
	lp *lpBufs
}

// arenas keeps the arena of the last finished search: a round decided
// after another (the simulator, the benchmarks) then finds the buffers it
// needs already in memory, where fresh ones cost their page faults and
// their garbage. Nothing a search returns comes from its arena.
var arenas recycle.Keeper[arena]

// takeArena returns the kept arena, or a new one.
func takeArena() *arena {
	if a := arenas.Take(); a != nil {
		return a
	}
	return &arena{}
}

// putArena keeps a for the next search, unless it holds more than
// maxPooled elements (a round far larger than the usual).
func putArena(a *arena) {
	if a.floats.held+a.ints.held+a.small.held+a.heaps.held+a.items.held <= maxPooled {
		arenas.Put(a)
	}
}

// maxPooled bounds the elements (8 to 24 bytes each) of a pooled arena.
const maxPooled = 1 << 26

// numClasses bounds the size classes: classOf(1<<40) is 156.
const numClasses = 160

// classOf returns the least size class holding n elements, and its size:
// n itself up to 8, then 5, 6, 7 or 8 times a power of two, so a buffer
// is at most a quarter larger than asked for.
func classOf(n int) (class, size int) {
	if n <= 8 {
		return max(n, 0), max(n, 0)
	}
	e := bits.Len(uint(n-1)) - 3 // 4<<e < n <= 8<<e
	q := (n-1)>>e + 1            // 5..8
	return 4*e + q, q << e
}

// classSize is the size of class c.
func classSize(c int) int {
	if c <= 8 {
		return c
	}
	e := (c - 5) / 4
	return (c - 4*e) << e
}

// freeList holds released buffers by size class: a buffer in class c has
// a capacity of at least classSize(c), and the arena allocates buffers of
// exactly a class's size, so a request finds one whenever a buffer of its
// class (or the next few) was released. Each class is a stack: the buffer
// released last, still in cache, is taken first.
type freeList[T any] struct {
	class [numClasses][][]T
	// held counts the elements of the buffers the list holds.
	held int
}

// take returns a buffer of length n from the list, or a new one sized to
// its class. Its contents are unspecified.
func (l *freeList[T]) take(n int) []T {
	c, size := classOf(n)
	if l != nil {
		for k := c; k < min(c+4, numClasses); k++ {
			if s := l.class[k]; len(s) > 0 {
				b := s[len(s)-1]
				l.class[k] = s[:len(s)-1]
				l.held -= cap(b)
				return b[:n]
			}
		}
	}
	return make([]T, n, size)
}

// put releases b to the list.
func (l *freeList[T]) put(b []T) {
	if l == nil || cap(b) == 0 {
		return
	}
	c, size := classOf(cap(b))
	if size > cap(b) {
		c-- // a buffer from elsewhere: it holds the class below
	}
	l.class[c] = append(l.class[c], b)
	l.held += cap(b)
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

// float64s returns a slice of n floats with unspecified contents.
func (a *arena) float64s(n int) []float64 {
	if a == nil {
		return make([]float64, n)
	}
	return a.floats.take(n)
}

// zeroInts returns a slice of n zeros.
func (a *arena) zeroInts(n int) []int {
	if a == nil {
		return make([]int, n)
	}
	b := a.ints.take(n)
	clear(b)
	return b
}

// anyInts returns a slice of n ints with unspecified contents.
func (a *arena) anyInts(n int) []int {
	if a == nil {
		return make([]int, n)
	}
	return a.ints.take(n)
}

// int32s returns a slice of n int32s with unspecified contents.
func (a *arena) int32s(n int) []int32 {
	if a == nil {
		return make([]int32, n)
	}
	return a.small.take(n)
}

// entries returns an empty slice of heap entries with room for n.
func (a *arena) entries(n int) []keyheap.Entry {
	if a == nil {
		return make([]keyheap.Entry, 0, n)
	}
	return a.items.take(n)[:0]
}

// heapSet returns n empty heaps that keep their previous capacity.
func (a *arena) heapSet(n int) []keyheap.Heap {
	if a == nil {
		return make([]keyheap.Heap, n)
	}
	b := a.heaps.take(n)
	for k := range b {
		b[k] = b[k][:0]
	}
	return b
}

func (a *arena) putFloats(b ...[]float64) {
	if a != nil {
		for _, x := range b {
			a.floats.put(x)
		}
	}
}

func (a *arena) putInts(b ...[]int) {
	if a != nil {
		for _, x := range b {
			a.ints.put(x)
		}
	}
}

func (a *arena) putInt32s(b []int32) {
	if a != nil {
		a.small.put(b)
	}
}

func (a *arena) putEntries(b []keyheap.Entry) {
	if a != nil {
		a.items.put(b)
	}
}

func (a *arena) putHeapSet(b []keyheap.Heap) {
	if a != nil {
		a.heaps.put(b)
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
