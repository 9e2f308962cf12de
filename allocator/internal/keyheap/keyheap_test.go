package keyheap

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHeapOrder checks pushes, pops and Init against a sorted slice, keys
// drawn from few values so that ties decide.
func TestHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		var h, want Heap
		var in []Entry
		for range rng.IntN(40) {
			in = append(in, Entry{Key: float64(rng.IntN(5)), Item: rng.Int32N(20)})
		}
		init := slices.Clone(in[:len(in)/2])
		Heap(init).Init()
		h = init
		for _, e := range in[len(in)/2:] {
			h.Push(e)
		}
		want = slices.Clone(in)
		slices.SortFunc(want, func(a, b Entry) int { return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Item, b.Item)) })
		for k, w := range want {
			if h[0] != w {
				t.Fatalf("trial %d: pop %d is %v, want %v", trial, k, h[0], w)
			}
			h.Pop()
		}
		if len(h) != 0 {
			t.Fatalf("trial %d: %d entries left", trial, len(h))
		}
	}
}
