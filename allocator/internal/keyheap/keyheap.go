// Package keyheap is a binary min-heap of items by a float64 key, ties
// broken by the smaller item: the lazy heaps of the solver's LP and of
// AlloX's slot flow. It is written out because container/heap's interface
// boxes every item it is given.
package keyheap

// Entry is an item and its key.
type Entry struct {
	Key  float64
	Item int32
}

// Before reports whether e comes out of a heap before o.
func (e Entry) Before(o Entry) bool {
	return e.Key < o.Key || e.Key == o.Key && e.Item < o.Item
}

// Heap is a min-heap of entries; its least is h[0]. The zero Heap is empty.
type Heap []Entry

// Push adds e.
func (h *Heap) Push(e Entry) {
	*h = append(*h, e)
	q := *h
	for k := len(q) - 1; k > 0; {
		p := (k - 1) / 2
		if !q[k].Before(q[p]) {
			break
		}
		q[k], q[p] = q[p], q[k]
		k = p
	}
}

// Pop removes the least entry; the heap must not be empty.
func (h *Heap) Pop() {
	q := *h
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	q.down(0)
	*h = q
}

// Init orders any slice of entries as a heap, in linear time.
func (h Heap) Init() {
	for k := len(h)/2 - 1; k >= 0; k-- {
		h.down(k)
	}
}

func (h Heap) down(k int) {
	n := len(h)
	for {
		l, r, m := 2*k+1, 2*k+2, k
		if l < n && h[l].Before(h[m]) {
			m = l
		}
		if r < n && h[r].Before(h[m]) {
			m = r
		}
		if m == k {
			return
		}
		h[k], h[m] = h[m], h[k]
		k = m
	}
}
