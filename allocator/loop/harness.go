package loop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
)

// Harness is an Observer and Applier over jobs held in memory in Nomad's
// terms (gated, outside the GPU pool, steered, with allocations): it applies
// a plan as Nomad would, at once, and records what it applied. Tests of the
// loop and of the service drive rounds through it, as Nomad's scheduler
// tests drive its scheduler through its Harness; the simulator has its own
// cluster with a clock and true progress (package sim).
type Harness struct {
	mu     sync.Mutex
	Models []allocator.Model
	// Hosts, when set, are the GPU nodes: Observe reports them with the
	// jobs' slots, and a start or migration puts the job on the change's
	// slots, as Nomad does on the node the allocator pins it to.
	Hosts []placement.Host
	// Refuse, when set, is Nomad's reason for not placing the job on the
	// host ("": it places it): a start pinned to a refused host leaves the
	// job with no allocation and that reason, as a failed evaluation does.
	Refuse func(job, host string) string
	Jobs   map[string]*Job
	// Applied lists every change applied, "action name model".
	Applied []string
	Calls   int
	// FailObserve fails every observation; Panic makes it panic.
	FailObserve error
	Panic       bool
}

var (
	_ Observer = (*Harness)(nil)
	_ Applier  = (*Harness)(nil)
)

// Observe returns the jobs sorted by ID.
func (h *Harness) Observe(context.Context) (*Snapshot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Panic {
		panic("observer bug")
	}
	if h.FailObserve != nil {
		return nil, h.FailObserve
	}
	s := &Snapshot{Models: h.Models, Calls: 1}
	ids := make([]string, 0, len(h.Jobs))
	held := map[string][]placement.Slot{}
	for id, j := range h.Jobs {
		ids = append(ids, id)
		if len(j.Allocs) > 0 {
			held[id] = j.Slots
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		s.Jobs = append(s.Jobs, *h.Jobs[id])
	}
	if len(h.Hosts) > 0 {
		s.Hosts = placement.WithJobs(h.Hosts, held)
		if s.Models == nil {
			s.Models = modelsOf(h.Hosts)
		}
	}
	return s, nil
}

// Apply carries the plan out: a start or migration runs the job on its
// model at once, a park gates it and stops its allocation.
func (h *Harness) Apply(_ context.Context, p *Plan) ApplyResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	var r ApplyResult
	for _, c := range p.Changes() {
		j := h.Jobs[c.Job.ID]
		h.Applied = append(h.Applied, fmt.Sprintf("%s %s %s", c.Action, j.Name, c.Model))
		r.Calls++
		h.Calls++
		switch c.Action {
		case ActionStart, ActionMigrate:
			// Nomad places a new allocation on healthy GPUs only.
			j.Gated, j.OffPool, j.Model, j.RunningModel, j.Allocs = false, false, c.Model, c.Model, []string{"alloc-" + j.Name}
			j.UnhealthyGPU = false
			j.Slots, j.Pinned, j.Refused = c.Slots, c.Hosts(), ""
			h.refuse(j)
		case ActionPark:
			j.Gated, j.RunningModel, j.Allocs, j.UnhealthyGPU, j.Slots = true, "", nil, false, nil
		}
		if r.Applied == nil {
			r.Applied = map[Action]int{}
		}
		r.Applied[c.Action]++
	}
	return r
}

// refuse undoes a start Nomad would not place on one of the job's pins.
func (h *Harness) refuse(j *Job) {
	if h.Refuse == nil {
		return
	}
	for _, host := range j.Pinned {
		if why := h.Refuse(j.ID, host); why != "" {
			j.RunningModel, j.Allocs, j.Slots, j.Refused = "", nil, nil, why
			return
		}
	}
}

// modelsOf is the models of the hosts with their GPUs, sorted by name.
func modelsOf(hosts []placement.Host) []allocator.Model {
	var out []allocator.Model
	for name, n := range placement.ModelGPUs(hosts) {
		out = append(out, allocator.Model{Name: name, GPUs: n})
	}
	slices.SortFunc(out, func(a, b allocator.Model) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Set adds or replaces a job.
func (h *Harness) Set(j Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Jobs == nil {
		h.Jobs = map[string]*Job{}
	}
	h.Jobs[j.ID] = &j
}

// LoadHarness is the cluster and jobs of the warm-round benchmarks (the e2e
// BenchmarkWarmRound*Jobs against real agents, and those of the loop and of
// the Consul store without them): two hosts of 32 V100s and two of 32
// A100s, and n gated 2-GPU jobs of 20 to 200 work units that run 4 units a
// round on A100s and 1 on V100s, as jobspecs/fft-train.nomad.hcl's
// defaults do.
func LoadHarness(n int) *Harness {
	const a100, v100 = "NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB"
	h := &Harness{Hosts: []placement.Host{
		{ID: "v100-1", Model: v100, GPUs: 32}, {ID: "v100-2", Model: v100, GPUs: 32},
		{ID: "a100-1", Model: a100, GPUs: 32}, {ID: "a100-2", Model: a100, GPUs: 32},
	}}
	for i := range n {
		h.Set(NewJob(fmt.Sprintf("load-%05d", i)).GPUs(2).Work(float64(20+i%37*5)).TP(a100, 4).TP(v100, 1).Obj())
	}
	return h
}

// JobBuilder builds a Job in the default namespace for tests:
// NewJob("a").GPUs(2).TP(model, 2).Obj() is a gated 2-GPU job.
type JobBuilder struct{ j Job }

// NewJob starts a gated 1-GPU job of 10 work units, with no throughputs.
func NewJob(name string) *JobBuilder {
	return &JobBuilder{Job{ID: "default/" + name, Namespace: "default", Name: name, Gated: true, ModifyIndex: 10,
		Spec: &jobmeta.Spec{Work: 10, WorkUnit: "steps", Weight: 1, GPUs: 1, Throughput: map[string]float64{}}}}
}

// Created sets the job's Nomad create index (a re-registration has a new one).
func (b *JobBuilder) Created(index uint64) *JobBuilder { b.j.CreateIndex = index; return b }

// GPUs sets the gang size.
func (b *JobBuilder) GPUs(n int) *JobBuilder { b.j.Spec.GPUs = n; return b }

// Work sets the total work.
func (b *JobBuilder) Work(w float64) *JobBuilder { b.j.Spec.Work = w; return b }

// TP declares a throughput on model.
func (b *JobBuilder) TP(model string, v float64) *JobBuilder {
	b.j.Spec.Throughput[model] = v
	return b
}

// Learn drops fft.throughput, so the job's rates are learned online, and
// sets its fft.family.
func (b *JobBuilder) Learn(family string) *JobBuilder {
	b.j.Spec.Throughput, b.j.Spec.LearnThroughput, b.j.Spec.Family = nil, true, family
	return b
}

// Tenant sets fft.user and fft.weight.
func (b *JobBuilder) Tenant(user string, weight float64) *JobBuilder {
	b.j.Spec.User, b.j.Spec.Weight = user, weight
	return b
}

// Running makes the job run on model, ungated, with one allocation.
func (b *JobBuilder) Running(model string) *JobBuilder {
	b.j.Gated, b.j.Model, b.j.RunningModel, b.j.Allocs = false, model, model, []string{"alloc-" + b.j.Name}
	return b
}

// Ungated lifts the gate and steers the job to model, without allocations.
func (b *JobBuilder) Ungated(model string) *JobBuilder { b.j.Gated, b.j.Model = false, model; return b }

// OffPool holds the job by its node pool instead of the gate, as a plain
// `nomad job run` in the default pool leaves it.
func (b *JobBuilder) OffPool() *JobBuilder { b.j.Gated, b.j.OffPool = false, true; return b }

// Finished marks the job's allocation complete.
func (b *JobBuilder) Finished() *JobBuilder { b.j.Finished = true; return b }

// Obj returns the job.
func (b *JobBuilder) Obj() Job { return b.j }

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// HarnessClock is a clock a test moves by hand.
type HarnessClock struct {
	mu sync.Mutex
	T  time.Time
}

// Now returns the clock's time.
func (c *HarnessClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.T
}

// Advance moves the clock forward by d.
func (c *HarnessClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.T = c.T.Add(d)
	c.mu.Unlock()
}
