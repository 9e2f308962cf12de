package policy

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/nomad-fft/nomad-fft/allocator/internal/keyheap"
)

// slotFlow solves AlloX's matching as a min-cost flow whose nodes, besides
// the jobs, are (model, layer) slots, not single GPUs: every GPU of a
// model is the same machine, so the k-th last positions of its GPUs are
// one node of capacity GPUs. Jobs are added one at a time, as the
// Hungarian method adds rows, each along a shortest path (with node
// potentials) that may move placed jobs from slot to slot, the cheapest
// mover of each pair of slots kept in a lazy heap. Any order of jobs gives
// an optimum; longest first keeps the paths shorter, as a new job tends
// to go below the others instead of pushing them down a layer (on 1,000
// GPUs and a quiet machine, 4,000 jobs take 30-35 ms and 20,000 take
// 2.7-3.1 s; under load 20,000 took 10-12 s, and 17 s shortest first).
//
// A model's layer l+1 opens only once layer l is full: a job in layer l+1
// beside room in layer l could move down and cost less (its remaining time
// is positive), so no optimum uses a deeper layer sooner. At 4,000 jobs on
// 8 models of 125 GPUs that is tens of slots, where the dense matching had
// 32,000 columns.
type slotFlow struct {
	ptime  [][]float64 // [job][model]: remaining seconds there, +Inf where it does not fit
	gpus   []int       // [model]
	slots  []flowSlot
	deep   []int // [model]: its deepest open slot, -1 before its first
	slotOf []int // [job]: its slot, -1 while it waits
	// hop[a][b] holds the jobs in slot a keyed by what moving one to slot
	// b changes the cost by; an entry whose job has left a is dropped
	// when it reaches the top.
	hop    [][]keyheap.Heap
	pot    []float64 // [slot]
	potEnd float64   // the sink's, behind every slot with room

	// Dijkstra's labels, one per slot, reused across augmentations.
	dist     []float64
	done     []bool
	predSlot []int // -1: entered by the new job
	predJob  []int32
}

type flowSlot struct{ model, layer, count int }

// matchSlots returns each job's model and layer (1 = last position on its
// GPU) in a matching of least sum of layer × remaining time; model is -1
// for a job that fits no model. ptime[j][i] is job j's remaining time on
// model i, +Inf where it does not fit; gpus[i] the model's GPUs. It fails
// only on times that are not numbers, which validation keeps out.
func matchSlots(ptime [][]float64, gpus []int) (model, layer []int, err error) {
	f := &slotFlow{ptime: ptime, gpus: gpus, deep: make([]int, len(gpus)), slotOf: make([]int, len(ptime))}
	best := make([]float64, len(ptime)) // each job's least time on a model with GPUs
	var jobs []int32
	for j := range ptime {
		f.slotOf[j], best[j] = -1, math.Inf(1)
		for i, g := range gpus {
			if g > 0 {
				best[j] = min(best[j], ptime[j][i])
			}
		}
		if !math.IsInf(best[j], 1) {
			jobs = append(jobs, int32(j))
		}
	}
	slices.SortFunc(jobs, func(a, b int32) int { return cmp.Or(cmp.Compare(best[b], best[a]), cmp.Compare(a, b)) })
	for i := range gpus {
		f.deep[i] = -1
		if gpus[i] > 0 {
			f.open(i)
		}
	}
	for _, j := range jobs {
		if !f.add(j) {
			return nil, nil, fmt.Errorf("matching AlloX's slots: job %d has no path to a slot with room (remaining times %v)", j, ptime[j])
		}
	}
	model, layer = make([]int, len(ptime)), make([]int, len(ptime))
	for j, s := range f.slotOf {
		model[j] = -1
		if s >= 0 {
			model[j], layer[j] = f.slots[s].model, f.slots[s].layer
		}
	}
	return model, layer, nil
}

// cost is job j's cost in slot s.
func (f *slotFlow) cost(j int32, s int) float64 {
	return float64(f.slots[s].layer) * f.ptime[j][f.slots[s].model]
}

// open adds model i's next layer. Its potential is the largest that keeps
// every arc into it of non-negative reduced cost (no job leaves it yet);
// the sink's is lowered to it if need be, for its arc to the sink.
func (f *slotFlow) open(i int) {
	b := len(f.slots)
	layer := 1
	if f.deep[i] >= 0 {
		layer = f.slots[f.deep[i]].layer + 1
	}
	f.slots = append(f.slots, flowSlot{model: i, layer: layer})
	f.deep[i] = b
	pot := math.Inf(1)
	for a := range f.hop {
		f.hop[a] = append(f.hop[a], nil)
	}
	f.hop = append(f.hop, make([]keyheap.Heap, b+1))
	for j, a := range f.slotOf {
		if a < 0 || math.IsInf(f.ptime[j][i], 1) {
			continue
		}
		key := f.cost(int32(j), b) - f.cost(int32(j), a)
		f.hop[a][b] = append(f.hop[a][b], keyheap.Entry{Key: key, Item: int32(j)})
		pot = min(pot, key+f.pot[a])
	}
	for a := range b {
		f.hop[a][b].Init()
	}
	if math.IsInf(pot, 1) {
		pot = f.potEnd // nothing can reach it yet
	}
	f.pot = append(f.pot, pot)
	f.potEnd = min(f.potEnd, pot) // its arc to the sink
	f.dist = append(f.dist, 0)
	f.done = append(f.done, false)
	f.predSlot = append(f.predSlot, 0)
	f.predJob = append(f.predJob, 0)
}

// place puts job j in slot s and offers it to the moves out of s.
func (f *slotFlow) place(j int32, s int) {
	f.slotOf[j] = s
	for b := range f.slots {
		if b != s && !math.IsInf(f.ptime[j][f.slots[b].model], 1) {
			f.hop[s][b].Push(keyheap.Entry{Key: f.cost(j, b) - f.cost(j, s), Item: j})
		}
	}
}

// mover is the cheapest job in slot a to move to slot b, dropping stale
// entries; ok is false if none.
func (f *slotFlow) mover(a, b int) (e keyheap.Entry, ok bool) {
	h := &f.hop[a][b]
	for len(*h) > 0 {
		if e = (*h)[0]; f.slotOf[e.Item] == a {
			return e, true
		}
		h.Pop()
	}
	return e, false
}

// add places job k along a shortest path to the sink, which every slot
// with room reaches at no cost (Dijkstra on reduced costs, dense: the slots
// are few), then updates the potentials and opens a layer if the path
// filled its model's deepest one. The labels start at k's costs less the
// slots' potentials; Dijkstra needs no sign of them, only of the arcs
// between slots. It reports false if no slot with room is reached.
func (f *slotFlow) add(k int32) bool {
	for s := range f.slots {
		f.dist[s], f.done[s], f.predSlot[s], f.predJob[s] = f.cost(k, s)-f.pot[s], false, -1, k
	}
	end, t := math.Inf(1), -1
	for {
		a := -1
		for s := range f.slots {
			if !f.done[s] && (a < 0 || f.dist[s] < f.dist[a]) {
				a = s
			}
		}
		if a < 0 || f.dist[a] >= end {
			break
		}
		f.done[a] = true
		if f.slots[a].count < f.gpus[f.slots[a].model] {
			if d := f.dist[a] + f.pot[a] - f.potEnd; d < end {
				end, t = d, a
			}
		}
		for b := range f.slots {
			if f.done[b] {
				continue
			}
			if e, ok := f.mover(a, b); ok {
				if d := f.dist[a] + e.Key + f.pot[a] - f.pot[b]; d < f.dist[b] {
					f.dist[b], f.predSlot[b], f.predJob[b] = d, a, e.Item
				}
			}
		}
	}
	if t < 0 {
		return false
	}
	for s := range f.slots {
		f.pot[s] += min(f.dist[s], end)
	}
	f.potEnd += end
	f.slots[t].count++
	for s := t; s >= 0; s = f.predSlot[s] {
		f.place(f.predJob[s], s)
	}
	if i := f.slots[t].model; f.slots[t].count == f.gpus[i] && f.deep[i] == t {
		f.open(i)
	}
	return true
}
