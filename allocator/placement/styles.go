package placement

import (
	"slices"
	"sort"
)

// The baselines' own placements (README.md, "Styles"), as their published
// sources describe them. Both place every piece (allocation) whole on one
// host, as Nomad does; what they cannot place goes back to the loop, which
// decides again, as for the paper's Placer.

// placeGavel is Gavel's worker assignment (scheduler.py,
// _schedule_jobs_on_workers and _assign_workers_to_job, commit c4fa400):
// per GPU type, jobs by gang size, largest first; within each size, the jobs
// whose previous workers are still free keep them, then each other job takes
// free GPUs in server order from a pointer that only moves forward ("strided,
// to minimize the number of servers used"). It never moves a job to make
// room and never refuses while the type has free GPUs: a job spreads over
// servers instead (Gavel's workers are single GPUs; the simulator gives its
// jobs 1-GPU pieces, so this is Gavel's assignment exactly).
func (ms *modelState) placeGavel(jobs []*Job, res *Result) {
	order := slices.Clone(jobs)
	sort.SliceStable(order, func(a, b int) bool {
		if ga, gb := order[a].GPUs(), order[b].GPUs(); ga != gb {
			return ga > gb
		}
		return order[a].ID < order[b].ID
	})
	ptr := 0
	for lo := 0; lo < len(order); {
		hi := lo
		for hi < len(order) && order[hi].GPUs() == order[lo].GPUs() {
			hi++
		}
		var rest []*Job
		for _, j := range order[lo:hi] {
			if !ms.keep(j, res) {
				rest = append(rest, j)
			}
		}
		for _, j := range rest {
			slots := ms.strided(j, &ptr)
			if slots == nil {
				res.Unplaced = append(res.Unplaced, j.ID)
				continue
			}
			ms.take(j, slots, res)
			if len(j.Current) > 0 {
				// Its previous workers went to a larger job: it restarts elsewhere.
				res.Moves = append(res.Moves, Move{Job: j.ID, From: j.Current, To: slots, Price: j.MovePrice})
			}
		}
		lo = hi
	}
}

// strided puts each piece, largest first, on the first host at or after the
// pointer with room for it, and leaves the pointer there. A piece larger
// than one GPU that no host from the pointer on takes (Gavel, assigning
// single GPUs, never meets this) goes on the first host with room.
func (ms *modelState) strided(j *Job, ptr *int) []Slot {
	avoid := ms.avoiding(j, -1)
	free := slices.Clone(ms.free)
	order := make([]int, len(j.Pieces))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return j.Pieces[order[a]] > j.Pieces[order[b]] })
	first := func(from, need int) int {
		for k := from; k < len(free); k++ {
			if !avoid(k) && free[k] >= need {
				return k
			}
		}
		return -1
	}
	slots := make([]Slot, len(j.Pieces))
	p := *ptr
	for _, i := range order {
		need := j.Pieces[i]
		k := first(p, need)
		if k >= 0 {
			p = k
		} else if k = first(0, need); k < 0 {
			return nil
		}
		free[k] -= need
		slots[i] = Slot{Host: ms.hosts[k].ID, GPUs: need}
	}
	*ptr = p
	return slots
}

// placeSia is Sia's placement on a real cluster (the artifact's
// alloc_to_placement_smart, which its Kubernetes scheduler uses; Sia's
// simulator places from scratch each round and ignores placement): a job
// keeps its previous placement while its allocation is unchanged; a job of
// at least a node's GPUs ("distributed") takes whole free nodes, from the
// last node down, and when there are too few, the node with the most free
// GPUs is reclaimed by evicting its single-node jobs; a smaller job goes on
// one node, the fullest with room (best fit), and when none has room, the
// node that needs the fewest GPUs freed evicts its smallest single-node jobs
// first. Evicted jobs are placed again like the others (a move when they
// were running). Each job is evicted at most once a round, so it ends.
func (ms *modelState) placeSia(jobs []*Job, res *Result) {
	node := 0
	for _, h := range ms.hosts {
		node = max(node, h.GPUs)
	}
	var dist, single []*Job
	for _, j := range jobs {
		if ms.keep(j, res) {
			continue
		}
		if j.GPUs() >= node {
			dist = append(dist, j)
		} else {
			single = append(single, j)
		}
	}
	bySize(dist)
	s := &siaState{ms: ms, res: res, node: node, evicted: map[string]*Move{}}
	for _, j := range dist {
		if !s.wholeNodes(j) {
			res.Unplaced = append(res.Unplaced, j.ID)
		}
	}
	queue := append(single, s.queue...)
	s.queue = nil
	bySize(queue)
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		if !s.oneNode(j) {
			res.Unplaced = append(res.Unplaced, j.ID)
		}
		if len(s.queue) > 0 {
			queue = append(queue, s.queue...)
			s.queue = nil
			bySize(queue)
		}
	}
}

// siaState is one model's Sia placement in progress: the jobs evicted this
// round (with the move each starts, when it was running) and those waiting
// to be placed again.
type siaState struct {
	ms      *modelState
	res     *Result
	node    int
	evicted map[string]*Move
	queue   []*Job
}

func bySize(js []*Job) {
	sort.SliceStable(js, func(a, b int) bool {
		if ga, gb := js[a].GPUs(), js[b].GPUs(); ga != gb {
			return ga > gb
		}
		return js[a].ID < js[b].ID
	})
}

// evict takes a placed single-node job off its host and queues it.
func (s *siaState) evict(p *placed, forJob string) {
	s.ms.release(p)
	delete(s.res.Slots, p.job.ID)
	var mv *Move
	if slices.Equal(p.slots, p.job.Current) {
		mv = &Move{Job: p.job.ID, From: p.slots, Price: p.job.MovePrice, For: forJob}
	}
	s.evicted[p.job.ID] = mv
	s.queue = append(s.queue, p.job)
}

// evictable are host k's single-node jobs not evicted before this round,
// smallest first.
func (s *siaState) evictable(k int) []*placed {
	var out []*placed
	for _, p := range s.ms.on[k] {
		if _, gone := s.evicted[p.job.ID]; !gone && p.job.GPUs() < s.node {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if ga, gb := out[a].job.GPUs(), out[b].job.GPUs(); ga != gb {
			return ga < gb
		}
		return out[a].job.ID < out[b].job.ID
	})
	return out
}

// wholeNodes places a distributed job's pieces on whole free hosts, from the
// last host down, reclaiming hosts when there are too few.
func (s *siaState) wholeNodes(j *Job) bool {
	ms := s.ms
	avoid := ms.avoiding(j, -1)
	saved, queued := ms.save(s.res), len(s.queue)
	evictedBefore := make(map[string]*Move, len(s.evicted))
	for id, mv := range s.evicted {
		evictedBefore[id] = mv
	}
	left := make([]int, len(j.Pieces))
	for i := range left {
		left[i] = i
	}
	sort.SliceStable(left, func(a, b int) bool { return j.Pieces[left[a]] > j.Pieces[left[b]] })
	slots := make([]Slot, len(j.Pieces))
	for len(left) > 0 {
		k := -1
		for h := len(ms.hosts) - 1; h >= 0; h-- {
			if !avoid(h) && ms.free[h] == ms.hosts[h].GPUs && ms.free[h] >= j.Pieces[left[0]] {
				k = h
				break
			}
		}
		if k < 0 {
			// Reclaim the host with the most free GPUs whose jobs are all
			// single-node ones that may still be evicted.
			best := -1
			for h := range ms.hosts {
				if avoid(h) || ms.hosts[h].GPUs < j.Pieces[left[0]] || len(s.evictable(h)) != len(ms.on[h]) || len(ms.on[h]) == 0 || ms.free[h]+onGPUs(ms.on[h]) != ms.hosts[h].GPUs {
					continue
				}
				if best < 0 || ms.free[h] > ms.free[best] {
					best = h
				}
			}
			if best < 0 {
				ms.restore(saved, s.res)
				s.queue, s.evicted = s.queue[:queued], evictedBefore
				return false
			}
			for _, p := range s.evictable(best) {
				s.evict(p, j.ID)
			}
			continue
		}
		var rest []int
		for _, i := range left {
			if ms.free[k] >= j.Pieces[i] {
				ms.free[k] -= j.Pieces[i]
				slots[i] = Slot{Host: ms.hosts[k].ID, GPUs: j.Pieces[i]}
			} else {
				rest = append(rest, i)
			}
		}
		left = rest
	}
	s.res.Slots[j.ID] = slots
	if Hosts(slots) == 1 {
		ms.on[ms.index[slots[0].Host]][j.ID] = &placed{job: j, slots: slots}
	}
	return true
}

func onGPUs(on map[string]*placed) int {
	n := 0
	for _, p := range on {
		n += p.job.GPUs()
	}
	return n
}

// oneNode places a single-node job on the fullest host with room, evicting
// the smallest single-node jobs of the host that needs the fewest GPUs freed
// when none has room.
func (s *siaState) oneNode(j *Job) bool {
	ms := s.ms
	avoid := ms.avoiding(j, -1)
	need := j.GPUs()
	best := -1
	for k := range ms.free {
		if !avoid(k) && ms.free[k] >= need && (best < 0 || ms.free[k] < ms.free[best]) {
			best = k
		}
	}
	if best < 0 {
		for k := range ms.free {
			if avoid(k) || ms.hosts[k].GPUs < need {
				continue
			}
			room := ms.free[k]
			for _, p := range s.evictable(k) {
				room += p.job.GPUs()
			}
			if room >= need && (best < 0 || need-ms.free[k] < need-ms.free[best]) {
				best = k
			}
		}
		if best < 0 {
			return false
		}
		for _, p := range s.evictable(best) {
			if ms.free[best] >= need {
				break
			}
			s.evict(p, j.ID)
		}
	}
	slots := make([]Slot, len(j.Pieces))
	for i, p := range j.Pieces {
		slots[i] = Slot{Host: ms.hosts[best].ID, GPUs: p}
	}
	ms.take(j, slots, s.res)
	if mv := s.evicted[j.ID]; mv != nil && !slices.Equal(mv.From, slots) {
		mv.To = slots
		s.res.Moves = append(s.res.Moves, *mv)
	}
	return true
}
