// Package placement is the round's second stage, the paper's Placer (§4.3): the round
// decides per GPU model as if each model were one machine, and this stage puts every job the
// decision runs on hosts of its model, as Nomad will have to. It is pure: hosts and jobs in,
// slots, moves and the jobs that cannot be placed out. The round loop runs it after the
// decision, live and in the simulator alike.
//
// Per model it keeps each running job where it is, packs the others best-fit (largest
// pieces first, a job on as few hosts as it can), and, when a job fits the model's free
// GPUs but no host, consolidates: it moves the cheapest running jobs off one host, each
// move priced as a migration with its checkpoint, when the moves cost less than the GPUs
// they free for the job. What still cannot be placed is returned, and the loop decides the
// round again without that option, so no GPU idles behind a decision Nomad cannot carry out.
package placement

import (
	"slices"
	"sort"
)

// Host is one node's healthy GPUs of one model.
type Host struct {
	// ID is the node's unique ID (Nomad's ${node.unique.id}), Name its name for people.
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Model string `json:"model"`
	GPUs  int    `json:"gpus"`
	// Jobs are the GPUs each job holds on the host now, by job ID (as observed).
	Jobs map[string]int `json:"jobs,omitempty"`
}

// Slot is one piece of a job (one allocation) on one host.
type Slot struct {
	Host string `json:"host"`
	GPUs int    `json:"gpus"`
}

// Job is one job the round's decision runs, as the placement stage sees it.
type Job struct {
	ID    string
	Model string
	// Pieces are the GPUs of each of the job's allocations (Nomad: one per task
	// group instance); each lies on one host. Nil means one piece of all its GPUs.
	Pieces []int
	// Current is where the job's pieces are now on Model, one slot per piece
	// (empty: it does not run on Model now). It stays there while it fits.
	Current []Slot
	// MovePrice is what moving the job to other hosts costs, in GPU-rounds: its
	// GPUs idle while its checkpoint moves and it restarts.
	MovePrice float64
	// Avoid are hosts the job must not be put on this round (Nomad refused
	// to place it there).
	Avoid []string
}

// GPUs is the job's gang size: the sum of its pieces.
func (j *Job) GPUs() int {
	n := 0
	for _, p := range j.Pieces {
		n += p
	}
	return n
}

// Move is a running job put on other hosts of its model, to make room for another.
type Move struct {
	Job  string `json:"job"`
	From []Slot `json:"from"`
	To   []Slot `json:"to"`
	// Price is the move's cost in GPU-rounds; For is the job it makes room for.
	Price float64 `json:"price_gpu_rounds"`
	For   string  `json:"for"`
}

// Result is the stage's answer for one round.
type Result struct {
	// Slots maps each placed job to one slot per piece, in the order of its pieces.
	Slots map[string][]Slot
	// Unplaced are the jobs no host could take, even after consolidation, sorted.
	Unplaced []string
	// Moves are the consolidation moves, in the order they were chosen.
	Moves []Move
}

// Hosts counts the distinct hosts of a placement.
func Hosts(slots []Slot) int { return len(HostIDs(slots)) }

// HostIDs are the distinct hosts of a placement, sorted.
func HostIDs(slots []Slot) []string {
	var out []string
	for _, s := range slots {
		if !slices.Contains(out, s.Host) {
			out = append(out, s.Host)
		}
	}
	slices.Sort(out)
	return out
}

// LargestHost is the most GPUs any host of each model has.
func LargestHost(hosts []Host) map[string]int {
	out := map[string]int{}
	for _, h := range hosts {
		out[h.Model] = max(out[h.Model], h.GPUs)
	}
	return out
}

// Fits reports whether a job of these pieces can ever be placed on the model's
// hosts (each piece no larger than its largest host), ignoring what runs there.
func Fits(pieces []int, largest int) bool {
	for _, p := range pieces {
		if p > largest {
			return false
		}
	}
	return len(pieces) > 0
}

// Style is a placement algorithm: the paper's Placer (the default), or the
// placement a baseline's own system uses, so that each policy is compared
// on the placement it was designed with (README.md, "Styles").
type Style string

const (
	// StyleFFT is the paper's Placer (§4.3): running jobs stay, the rest
	// are packed best-fit, priced consolidation moves make room.
	StyleFFT Style = "fft"
	// StyleGavel is Gavel's worker assignment: keep a job's previous
	// workers when they are free, else take free GPUs in server order from
	// a pointer that only moves forward, largest jobs first; a job spreads
	// over servers rather than wait.
	StyleGavel Style = "gavel"
	// StyleSia is Sia's placement: a job smaller than a node on one node
	// (best fit), a larger one on whole free nodes; previous placements
	// kept; room made by evicting single-node jobs, smallest first.
	StyleSia Style = "sia"
)

// Styles are the known placement styles.
var Styles = []Style{StyleFFT, StyleGavel, StyleSia}

// Place puts every job on hosts of its model with the paper's Placer. Jobs
// whose model has no host are unplaced.
func Place(hosts []Host, jobs []Job) *Result { return PlaceStyle(StyleFFT, hosts, jobs) }

// PlaceStyle puts every job on hosts of its model the way style does ("" is
// StyleFFT). Jobs whose model has no host are unplaced.
func PlaceStyle(style Style, hosts []Host, jobs []Job) *Result {
	res := &Result{Slots: make(map[string][]Slot, len(jobs))}
	byModel := map[string][]int{}
	for k := range jobs {
		byModel[jobs[k].Model] = append(byModel[jobs[k].Model], k)
	}
	hostsOf := map[string][]Host{}
	for _, h := range hosts {
		hostsOf[h.Model] = append(hostsOf[h.Model], h)
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		ms := newModelState(hostsOf[m])
		var js []*Job
		for _, k := range byModel[m] {
			js = append(js, &jobs[k])
		}
		switch style {
		case StyleGavel:
			ms.placeGavel(js, res)
		case StyleSia:
			ms.placeSia(js, res)
		default:
			ms.place(js, res)
		}
	}
	sort.Strings(res.Unplaced)
	return res
}

// modelState is one model's hosts while the stage fills them.
type modelState struct {
	hosts []Host
	index map[string]int
	free  []int
	// on are the jobs placed on each host whole (one host), movable by consolidation.
	on []map[string]*placed
}

type placed struct {
	job   *Job
	slots []Slot
	// moved is true once consolidation moved the job (it moves at most once).
	moved bool
}

func newModelState(hosts []Host) *modelState {
	sort.Slice(hosts, func(a, b int) bool { return hosts[a].ID < hosts[b].ID })
	ms := &modelState{hosts: hosts, index: make(map[string]int, len(hosts)), free: make([]int, len(hosts)), on: make([]map[string]*placed, len(hosts))}
	for k, h := range hosts {
		ms.index[h.ID] = k
		ms.free[k] = h.GPUs
		ms.on[k] = map[string]*placed{}
	}
	return ms
}

func (ms *modelState) place(jobs []*Job, res *Result) {
	// Running jobs stay where they are while their hosts still have room
	// (a host can shrink when a GPU turns unhealthy); the rest are packed.
	var rest []*Job
	for _, j := range jobs {
		if !ms.keep(j, res) {
			rest = append(rest, j)
		}
	}
	sort.SliceStable(rest, func(a, b int) bool {
		pa, pb := largest(rest[a].Pieces), largest(rest[b].Pieces)
		if pa != pb {
			return pa > pb
		}
		if ga, gb := rest[a].GPUs(), rest[b].GPUs(); ga != gb {
			return ga > gb
		}
		return rest[a].ID < rest[b].ID
	})
	for _, j := range rest {
		if slots := ms.pack(j.Pieces, ms.avoiding(j, -1)); slots != nil {
			ms.take(j, slots, res)
			continue
		}
		if !ms.consolidate(j, res) {
			res.Unplaced = append(res.Unplaced, j.ID)
		}
	}
}

// keep holds a running job on its current hosts if they have room for it.
func (ms *modelState) keep(j *Job, res *Result) bool {
	if len(j.Current) == 0 || len(j.Current) != len(j.Pieces) {
		return false
	}
	need := map[int]int{}
	for _, s := range j.Current {
		k, ok := ms.index[s.Host]
		if !ok {
			return false
		}
		need[k] += s.GPUs
	}
	for k, n := range need {
		if ms.free[k] < n {
			return false
		}
	}
	ms.take(j, append([]Slot(nil), j.Current...), res)
	return true
}

// take records a placement and takes its GPUs.
func (ms *modelState) take(j *Job, slots []Slot, res *Result) {
	for _, s := range slots {
		ms.free[ms.index[s.Host]] -= s.GPUs
	}
	res.Slots[j.ID] = slots
	if Hosts(slots) == 1 {
		ms.on[ms.index[slots[0].Host]][j.ID] = &placed{job: j, slots: slots}
	}
}

// release gives back a whole-host job's GPUs.
func (ms *modelState) release(p *placed) {
	k := ms.index[p.slots[0].Host]
	for _, s := range p.slots {
		ms.free[k] += s.GPUs
	}
	delete(ms.on[k], p.job.ID)
}

// pack finds hosts for the pieces without moving anything, never on a host
// skip names: all on the tightest host that takes them whole, else on as
// few hosts as it can, each time the one that takes the most of what is
// left. It returns nil when they do not fit.
func (ms *modelState) pack(pieces []int, skip func(k int) bool) []Slot {
	total := 0
	for _, p := range pieces {
		total += p
	}
	best := -1
	for k := range ms.free {
		if !skip(k) && ms.free[k] >= total && (best < 0 || ms.free[k] < ms.free[best]) {
			best = k
		}
	}
	if best >= 0 {
		slots := make([]Slot, len(pieces))
		for i, p := range pieces {
			slots[i] = Slot{Host: ms.hosts[best].ID, GPUs: p}
		}
		return slots
	}
	if len(pieces) == 1 {
		return nil
	}
	return ms.spread(pieces, skip)
}

// spread places several pieces over several hosts, largest pieces first,
// each round on the host that takes the most of them (then the least room
// left), so the job spans few hosts.
func (ms *modelState) spread(pieces []int, skip func(k int) bool) []Slot {
	order := make([]int, len(pieces))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return pieces[order[a]] > pieces[order[b]] })
	free := append([]int(nil), ms.free...)
	slots := make([]Slot, len(pieces))
	left := order
	for len(left) > 0 {
		bestHost, bestTaken, bestRoom := -1, 0, 0
		var bestRest []int
		for k := range free {
			if skip(k) {
				continue
			}
			room, taken := free[k], 0
			var rest []int
			for _, i := range left {
				if pieces[i] <= room {
					room -= pieces[i]
					taken++
				} else {
					rest = append(rest, i)
				}
			}
			if taken > bestTaken || (taken == bestTaken && taken > 0 && room < bestRoom) {
				bestHost, bestTaken, bestRoom, bestRest = k, taken, room, rest
			}
		}
		if bestHost < 0 {
			return nil
		}
		room := free[bestHost]
		for _, i := range left {
			if pieces[i] <= room && !slices.Contains(bestRest, i) {
				room -= pieces[i]
				slots[i] = Slot{Host: ms.hosts[bestHost].ID, GPUs: pieces[i]}
			}
		}
		free[bestHost] = room
		left = bestRest
	}
	return slots
}

// consolidate makes room for j by moving whole-host jobs to other hosts,
// cheapest first, and only when the moves cost less than the GPU-rounds j
// gains (its GPUs for a round): a move is a restart. It frees one host for
// the whole job when a host is large enough, the host whose moves cost
// least; a job larger than any host gets a host freed for each piece that
// finds no room, all within the one budget, or nothing moves.
func (ms *modelState) consolidate(j *Job, res *Result) bool {
	need := j.GPUs()
	if k, plan, price := ms.cheapestFree(need, float64(need), j); k >= 0 && price < float64(need) {
		ms.applyMoves(k, plan, res)
		slots := make([]Slot, len(j.Pieces))
		for i, p := range j.Pieces {
			slots[i] = Slot{Host: ms.hosts[k].ID, GPUs: p}
		}
		ms.take(j, slots, res)
		return true
	}
	if len(j.Pieces) == 1 {
		return false
	}
	saved := ms.save(res)
	budget := float64(need)
	slots := make([]Slot, len(j.Pieces))
	order := make([]int, len(j.Pieces))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return j.Pieces[order[a]] > j.Pieces[order[b]] })
	for _, i := range order {
		p := j.Pieces[i]
		k := -1
		if s := ms.pack([]int{p}, ms.avoiding(j, -1)); s != nil {
			k = ms.index[s[0].Host]
		} else {
			var plan []Move
			var price float64
			if k, plan, price = ms.cheapestFree(p, budget, j); k < 0 {
				ms.restore(saved, res)
				return false
			}
			budget -= price
			ms.applyMoves(k, plan, res)
		}
		slots[i] = Slot{Host: ms.hosts[k].ID, GPUs: p}
		ms.free[k] -= p
	}
	res.Slots[j.ID] = slots
	return true
}

// cheapestFree is the host where moves free need GPUs at the least price
// below limit, with the moves; -1 when there is none.
func (ms *modelState) cheapestFree(need int, limit float64, j *Job) (int, []Move, float64) {
	best, bestPrice := -1, limit
	var bestPlan []Move
	avoid := ms.avoiding(j, -1)
	for k := range ms.hosts {
		if ms.hosts[k].GPUs < need || avoid(k) {
			continue
		}
		plan, price, ok := ms.tryFree(k, need, j.ID)
		if ok && price < bestPrice {
			best, bestPrice, bestPlan = k, price, plan
		}
	}
	return best, bestPlan, bestPrice
}

// applyMoves carries out the moves off host k that tryFree planned.
func (ms *modelState) applyMoves(k int, plan []Move, res *Result) {
	for _, mv := range plan {
		p := ms.on[k][mv.Job]
		ms.release(p)
		for _, s := range mv.To {
			ms.free[ms.index[s.Host]] -= s.GPUs
		}
		res.Slots[mv.Job] = mv.To
		if Hosts(mv.To) == 1 {
			ms.on[ms.index[mv.To[0].Host]][mv.Job] = &placed{job: p.job, slots: mv.To, moved: true}
		}
		res.Moves = append(res.Moves, mv)
	}
}

// checkpoint is a model's state and the result's, to undo a consolidation
// that could not place the whole job.
type checkpoint struct {
	free  []int
	on    []map[string]*placed
	slots map[string][]Slot
	moves int
}

func (ms *modelState) save(res *Result) checkpoint {
	c := checkpoint{free: append([]int(nil), ms.free...), on: make([]map[string]*placed, len(ms.on)), slots: make(map[string][]Slot, len(res.Slots)), moves: len(res.Moves)}
	for k, m := range ms.on {
		c.on[k] = make(map[string]*placed, len(m))
		for id, p := range m {
			cp := *p
			c.on[k][id] = &cp
		}
	}
	for id, s := range res.Slots {
		c.slots[id] = s
	}
	return c
}

func (ms *modelState) restore(c checkpoint, res *Result) {
	ms.free, ms.on = c.free, c.on
	clear(res.Slots)
	for id, s := range c.slots {
		res.Slots[id] = s
	}
	res.Moves = res.Moves[:c.moves]
}

// tryFree plans the moves that free need GPUs on host k: the cheapest
// movable jobs there (not moved before this round), each packed on the other
// hosts. It changes nothing; ok is false when no such moves exist.
func (ms *modelState) tryFree(k, need int, forJob string) (plan []Move, price float64, ok bool) {
	if ms.free[k] >= need {
		return nil, 0, true
	}
	var cands []*placed
	for _, p := range ms.on[k] {
		if !p.moved {
			cands = append(cands, p)
		}
	}
	sort.Slice(cands, func(a, b int) bool {
		if cands[a].job.MovePrice != cands[b].job.MovePrice {
			return cands[a].job.MovePrice < cands[b].job.MovePrice
		}
		return cands[a].job.ID < cands[b].job.ID
	})
	saved := append([]int(nil), ms.free...)
	defer copy(ms.free, saved)
	for _, p := range cands {
		if ms.free[k] >= need {
			break
		}
		to := ms.pack(p.job.Pieces, ms.avoiding(p.job, k))
		if to == nil {
			continue
		}
		for _, s := range to {
			ms.free[ms.index[s.Host]] -= s.GPUs
		}
		ms.free[k] += p.job.GPUs()
		plan = append(plan, Move{Job: p.job.ID, From: p.slots, To: to, Price: p.job.MovePrice, For: forJob})
		price += p.job.MovePrice
	}
	return plan, price, ms.free[k] >= need
}

// avoiding is the hosts job j may not be put on: those it avoids, and host
// k (-1: none), the host being freed.
func (ms *modelState) avoiding(j *Job, k int) func(int) bool {
	if len(j.Avoid) == 0 {
		return func(h int) bool { return h == k }
	}
	return func(h int) bool { return h == k || slices.Contains(j.Avoid, ms.hosts[h].ID) }
}

func largest(pieces []int) int {
	m := 0
	for _, p := range pieces {
		m = max(m, p)
	}
	return m
}

// WithJobs returns copies of the hosts with Jobs filled from where each job
// holds GPUs (job ID to slots), for observers that track slots themselves.
func WithJobs(hosts []Host, slots map[string][]Slot) []Host {
	out := make([]Host, len(hosts))
	index := make(map[string]int, len(hosts))
	for k, h := range hosts {
		h.Jobs = nil
		out[k] = h
		index[h.ID] = k
	}
	for id, ss := range slots {
		for _, s := range ss {
			k, ok := index[s.Host]
			if !ok {
				continue
			}
			if out[k].Jobs == nil {
				out[k].Jobs = map[string]int{}
			}
			out[k].Jobs[id] += s.GPUs
		}
	}
	return out
}

// ModelGPUs is the GPUs of each model over its hosts.
func ModelGPUs(hosts []Host) map[string]int {
	out := map[string]int{}
	for _, h := range hosts {
		out[h.Model] += h.GPUs
	}
	return out
}
