package policy

import (
	"context"
	"math/rand/v2"
	"sort"
)

// FIFO registry names: Gavel's heterogeneity-agnostic "fifo" and its
// heterogeneity-aware "fifo_perf".
const (
	FIFOName     = "fifo"
	FIFOPerfName = "fifo-perf"
)

// NewFIFO is Gavel's FIFOPolicy in its base mode, run through Gavel's round
// mechanism (gavel), as in Gavel's simulator. Semantics read from policies/fifo.py and
// scheduler.py of stanford-futuredata/gavel (reimplemented, not copied):
//
//   - The policy is asked for an allocation only at the mechanism's resets
//     (at most every GavelResetSeconds, when jobs arrived or left). Each
//     queued job it places gets share 1 on one model; the mechanism then
//     runs FIFO jobs only where their priority is positive (a job never
//     runs on another model, and a job placed nowhere waits).
//   - The queue is the active jobs in arrival order. The head takes a model
//     with at least its GPUs free; when none has, the queue stops there (no
//     backfilling).
//   - (Gavel's Perf variant rebuilds the allocation from scratch at every
//     reset and gives the head the fastest such model; fifoAlloc.perf.)
//   - Base: placements persist until the job finishes. At a reset, each
//     finished job's model first goes to the head of the queue if it has
//     room for it there (otherwise that head is skipped until the next
//     reset). Then the remaining queue is placed: Gavel draws a random
//     index among the models with room but then assigns the model left in
//     its loop variable, the last (by name) of the models that had any free
//     GPU at the start of the pass (with Gavel's names, v100 while it has a
//     free GPU, even one too few: the model is then over-committed and its
//     jobs share it by priority); the random draw only decides which entry
//     is struck from the list of models with free GPUs when the assigned
//     model reaches exactly 0 free. We keep this behaviour, which is what
//     produced Gavel's published FIFO numbers. One deviation: we only
//     consider models the job can run on (positive rate, enough GPUs).
//     Gavel checks neither, so it can pin a job for good on a model where
//     its throughput is 0 (e.g. ResNet-50 bs128 with 2+ GPUs on a K80); in
//     a continuous run that job never finishes and the run never ends.
func NewFIFO(opt Options) Policy {
	f := &fifoAlloc{rng: rand.New(rand.NewPCG(uint64(opt.Seed), 0x6669666f)), placed: map[string]fifoPlacement{}}
	g := newGavelPolicy(FIFOName, f.allocate, false, opt.Seed)
	g.fifo = true
	return g
}

// NewFIFOPerf is the heterogeneity-aware FIFO: the head of the queue
// goes to the fastest model with room for it and keeps it until it
// finishes; when the head fits nowhere, the queue waits (no backfilling).
// Unlike Gavel's FIFOPolicyWithPerf, which rebuilds its allocation from
// scratch at each reset of its round mechanism (so jobs may move, see
// fifoAlloc), it never moves a job; it is not part of the reproduction and
// the simulator's hand-checked tests rely on this simple behaviour.
func NewFIFOPerf(Options) Policy { return &FIFOPerf{} }

// FIFOPerf is the non-preemptive heterogeneity-aware FIFO.
type FIFOPerf struct{}

var _ Policy = (*FIFOPerf)(nil)

func (*FIFOPerf) Name() string { return FIFOPerfName }

func (*FIFOPerf) Schedule(_ context.Context, s *Snapshot) (Assignment, error) {
	a, f := keepRunning(s)
	for k := range s.Jobs {
		j := &s.Jobs[k]
		if _, ok := a[j.ID]; ok {
			continue
		}
		pick := -1
		for i := range s.Models {
			if j.Fits(&s.Models[i]) && f[s.Models[i].Name] >= j.GPUs &&
				(pick < 0 || j.RatePerSecond[s.Models[i].Name] > j.RatePerSecond[s.Models[pick].Name]) {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		f.place(a, j, &s.Models[pick])
	}
	return a, nil
}

type fifoPlacement struct {
	model   string
	gpus    int
	arrival float64
}

// fifoAlloc is FIFO's allocation state (Gavel's FIFOPolicy._allocation).
type fifoAlloc struct {
	perf   bool
	rng    *rand.Rand
	placed map[string]fifoPlacement
}

func (f *fifoAlloc) allocate(s *Snapshot, _ *gavel) [][]float64 {
	if f.perf {
		clear(f.placed)
	}
	avail := make(map[string]int, len(s.Models))
	models := make(map[string]*Model, len(s.Models))
	for i := range s.Models {
		avail[s.Models[i].Name] = s.Models[i].GPUs
		models[s.Models[i].Name] = &s.Models[i]
	}
	active := make(map[string]*Job, len(s.Jobs))
	var queue []*Job
	for k := range s.Jobs {
		j := &s.Jobs[k]
		active[j.ID] = j
		if _, ok := f.placed[j.ID]; !ok {
			queue = append(queue, j)
		}
	}
	// Placed jobs in arrival order (Gavel sorts by job ID, its arrival order).
	ids := make([]string, 0, len(f.placed))
	for id := range f.placed {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool {
		pa, pb := f.placed[ids[a]], f.placed[ids[b]]
		if pa.arrival != pb.arrival {
			return pa.arrival < pb.arrival
		}
		return ids[a] < ids[b]
	})
	place := func(j *Job, model string) {
		f.placed[j.ID] = fifoPlacement{model: model, gpus: j.GPUs, arrival: j.ArrivalSeconds}
		avail[model] -= j.GPUs
	}
	for _, id := range ids {
		p := f.placed[id]
		if active[id] != nil {
			avail[p.model] -= p.gpus
			continue
		}
		// Finished: its model goes to the head of the queue if it fits there.
		if len(queue) > 0 {
			head := queue[0]
			queue = queue[1:]
			if head.GPUs <= avail[p.model] && head.Fits(models[p.model]) {
				place(head, p.model)
			}
		}
		delete(f.placed, id)
	}
	var types []string
	for name, n := range avail {
		if n > 0 {
			types = append(types, name)
		}
	}
	sort.Strings(types)
	for len(queue) > 0 && len(types) > 0 {
		head := queue[0]
		queue = queue[1:]
		var cands []int // positions in types
		last := ""
		for pos, name := range types {
			if !head.Fits(models[name]) {
				continue
			}
			last = name
			if avail[name] >= head.GPUs {
				cands = append(cands, pos)
			}
		}
		if len(cands) == 0 {
			break
		}
		var chosen string
		var pos int
		if f.perf {
			best := -1.0
			for _, c := range cands {
				if r := head.RatePerSecond[types[c]]; r > best {
					best, chosen, pos = r, types[c], c
				}
			}
		} else {
			pos = cands[f.rng.IntN(len(cands))]
			chosen = last
		}
		place(head, chosen)
		if avail[chosen] == 0 {
			types = append(types[:pos], types[pos+1:]...)
		}
	}
	x := make([][]float64, len(s.Jobs))
	for k := range s.Jobs {
		x[k] = make([]float64, len(s.Models))
		if p, ok := f.placed[s.Jobs[k].ID]; ok {
			for i := range s.Models {
				if s.Models[i].Name == p.model {
					x[k][i] = 1
				}
			}
		}
	}
	return x
}
