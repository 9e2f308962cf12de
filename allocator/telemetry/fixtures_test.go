package telemetry

import (
	"context"
	"fmt"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/live"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// cluster is an in-memory Observer and Applier: it applies a plan at once, as Nomad would.
type cluster struct {
	models []allocator.Model
	jobs   []loop.Job
}

func (c *cluster) Observe(context.Context) (*loop.Snapshot, error) {
	return &loop.Snapshot{Models: c.models, Jobs: append([]loop.Job(nil), c.jobs...), Calls: 2, WatchCalls: 1}, nil
}

func (c *cluster) Apply(_ context.Context, p *loop.Plan) loop.ApplyResult {
	r := loop.ApplyResult{Applied: map[loop.Action]int{}}
	for _, ch := range p.Changes() {
		for i := range c.jobs {
			if c.jobs[i].ID != ch.Job.ID {
				continue
			}
			j := &c.jobs[i]
			switch ch.Action {
			case loop.ActionStart, loop.ActionMigrate:
				j.Gated, j.Model, j.RunningModel, j.Allocs = false, ch.Model, ch.Model, []string{"alloc"}
			case loop.ActionPark:
				j.Gated, j.RunningModel, j.Allocs = true, "", nil
			}
		}
		r.Calls++
		r.Applied[ch.Action]++
	}
	return r
}

// job is a held job of gpus GPUs with throughput on each named model.
func job(name string, gpus int, throughput map[string]float64) loop.Job {
	return loop.Job{ID: "default/" + name, Namespace: "default", Name: name, Gated: true, ModifyIndex: 1,
		Spec: &jobmeta.Spec{Work: 100, WorkUnit: "steps", Weight: 1, GPUs: gpus, Throughput: throughput}}
}

// staticStatus is a StatusSource with a fixed status.
type staticStatus live.Status

func (s staticStatus) Status() live.Status { return live.Status(s) }

// bigStatus is a status of n jobs over three models, half of them active.
func bigStatus(n int) live.Status {
	st := live.Status{Jobs: map[string]loop.JobRecord{}, Last: &loop.RoundRecord{
		Round: 7, Start: "2026-12-01T10:00:00Z", Assignment: map[string]string{},
		Models: []allocator.Model{{Name: "A100", GPUs: 64}, {Name: "H100", GPUs: 32}, {Name: "V100", GPUs: 128}},
		Usage:  map[string]int{"A100": 64, "H100": 30, "V100": 100},
	}}
	states := []string{loop.StatusWaiting, loop.StatusRunning, loop.StatusFinished, loop.StatusFailed}
	for i := range n {
		id := fmt.Sprintf("team-%d/job-%d", i%17, i)
		var r loop.JobRecord
		r.Status = states[i%len(states)]
		r.Rho = float64(i%100) / 10
		st.Jobs[id] = r
		if r.Status == loop.StatusRunning {
			st.Last.Assignment[id] = st.Last.Models[i%3].Name
		}
	}
	return st
}
