package loop

import (
	"fmt"
	"slices"
	"sort"

	"github.com/nomad-fft/nomad-fft/allocator/placement"
)

// Action is what a round does to one job.
type Action string

// Actions of a plan.
const (
	// ActionStart moves the job into the GPU node pool, lifts the gate and
	// steers the job to Model.
	ActionStart Action = "start"
	// ActionMigrate steers a job that runs on another model to Model: a
	// destructive update, so Nomad restarts it there.
	ActionMigrate Action = "migrate"
	// ActionPark puts the gate back and stops the job's allocations; the
	// gate blocks their reschedule.
	ActionPark Action = "park"
	// ActionKeep changes nothing: the cluster already matches the decision.
	ActionKeep Action = "keep"
)

// Change is one job's entry in a plan.
type Change struct {
	Job    *Job
	Action Action
	// Model is the model to run on (start, migrate, keep of a running job).
	Model string
	// Slots are the hosts to run on, one per allocation, when the round
	// placed the job (the applier pins the job to their nodes).
	Slots []placement.Slot
}

// Hosts are the distinct nodes of the change's slots, sorted.
func (c *Change) Hosts() []string { return placement.HostIDs(c.Slots) }

// sameSlots reports whether two placements hold the same GPUs on the same
// hosts (in any order).
func sameSlots(a, b []placement.Slot) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[placement.Slot]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// sameHosts reports whether a pin names exactly the placement's hosts.
func sameHosts(pinned []string, slots []placement.Slot) bool {
	return slices.Equal(placement.HostIDs(slots), slices.Sorted(slices.Values(pinned)))
}

// Plan is the difference between the cluster and a round's decision, as
// named sets. Each set is sorted by job ID.
type Plan struct {
	Start, Migrate, Park, Keep []Change
}

// GoString prints the counts, for logs.
func (p *Plan) GoString() string {
	return fmt.Sprintf("(start %d) (migrate %d) (park %d) (keep %d)", len(p.Start), len(p.Migrate), len(p.Park), len(p.Keep))
}

// Changes returns every change that needs a write, in apply order: parks
// first, so GPUs are free before starts and migrations ask for them.
func (p *Plan) Changes() []Change {
	out := make([]Change, 0, len(p.Park)+len(p.Start)+len(p.Migrate))
	out = append(out, p.Park...)
	out = append(out, p.Migrate...)
	return append(out, p.Start...)
}

// ActionOf returns the action planned for job id (ActionKeep if absent).
func (p *Plan) ActionOf(id string) Action {
	for _, set := range [][]Change{p.Start, p.Migrate, p.Park} {
		for _, c := range set {
			if c.Job.ID == id {
				return c.Action
			}
		}
	}
	return ActionKeep
}

// Diff compares the jobs as observed with the assignment (job ID to model)
// and returns what to change. Finished jobs are never touched, and a held
// job (gated or outside the GPU pool) that the round leaves out and that has
// no allocation is kept as it is: holding it costs no write. It is pure.
func Diff(jobs []Job, assignment map[string]string) *Plan { return DiffPlaced(jobs, assignment, nil) }

// DiffPlaced is Diff with the placement stage's hosts for each running job
// (nil: the round placed nothing): a job kept on its model but put on other
// hosts migrates there, and a job not yet placed by Nomad whose pin names
// other hosts is started again with the new pin. It is pure.
func DiffPlaced(jobs []Job, assignment map[string]string, slots map[string][]placement.Slot) *Plan {
	p := &Plan{}
	for k := range jobs {
		j := &jobs[k]
		if j.Finished {
			continue
		}
		model, run := assignment[j.ID]
		to, placed := slots[j.ID]
		// A held job's allocations are not the round's (say, on a node outside the GPU
		// pool): starting it is what moves it, not a migration.
		moved := placed && !j.Held() && len(j.Allocs) > 0 && len(j.Slots) > 0 && !sameSlots(j.Slots, to)
		repin := placed && len(j.Allocs) == 0 && !sameHosts(j.Pinned, to)
		switch {
		case run && !j.Held() && j.Model == model && (len(j.Allocs) == 0 || j.RunningModel == "" || j.RunningModel == model) && !moved && !repin:
			p.Keep = append(p.Keep, Change{Job: j, Action: ActionKeep, Model: model, Slots: to})
		case run && len(j.Allocs) > 0 && j.RunningModel != "" && (j.RunningModel != model || moved):
			p.Migrate = append(p.Migrate, Change{Job: j, Action: ActionMigrate, Model: model, Slots: to})
		case run:
			p.Start = append(p.Start, Change{Job: j, Action: ActionStart, Model: model, Slots: to})
		case j.Held() && len(j.Allocs) == 0:
			p.Keep = append(p.Keep, Change{Job: j, Action: ActionKeep})
		default:
			p.Park = append(p.Park, Change{Job: j, Action: ActionPark})
		}
	}
	for _, set := range [][]Change{p.Start, p.Migrate, p.Park, p.Keep} {
		sort.Slice(set, func(a, b int) bool { return set[a].Job.ID < set[b].Job.ID })
	}
	return p
}
