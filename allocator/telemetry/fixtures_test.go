package telemetry

import (
	"context"
	"fmt"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/live"
)

// cluster is an in-memory Observer and Applier: it applies a plan at once, as Nomad would.
type cluster struct {
	models []allocator.Model
	jobs   []live.Job
}

func (c *cluster) Observe(context.Context) (*live.Snapshot, error) {
	return &live.Snapshot{Models: c.models, Jobs: append([]live.Job(nil), c.jobs...), Calls: 2, WatchCalls: 1}, nil
}

func (c *cluster) Apply(_ context.Context, p *live.Plan) live.ApplyResult {
	r := live.ApplyResult{Applied: map[live.Action]int{}}
	for _, ch := range p.Changes() {
		for i := range c.jobs {
			if c.jobs[i].ID != ch.Job.ID {
				continue
			}
			j := &c.jobs[i]
			switch ch.Action {
			case live.ActionStart, live.ActionMigrate:
				j.Gated, j.Model, j.RunningModel, j.Allocs = false, ch.Model, ch.Model, []string{"alloc"}
			case live.ActionPark:
				j.Gated, j.RunningModel, j.Allocs = true, "", nil
			}
		}
		r.Calls++
		r.Applied[ch.Action]++
	}
	return r
}

// store is an in-memory live.Store.
type store struct{ ledger live.Ledger }

func (s *store) Load(context.Context) (*live.Ledger, error) {
	l := s.ledger
	l.Jobs = map[string]live.JobRecord{}
	for k, v := range s.ledger.Jobs {
		l.Jobs[k] = v
	}
	return &l, nil
}

func (s *store) Record(_ context.Context, prev, next *live.Ledger, _ *live.RoundRecord) error {
	if prev.Version != s.ledger.Version {
		return live.ErrConflict
	}
	next.Version = s.ledger.Version + 1
	s.ledger = *next
	return nil
}

// job is a held job of gpus GPUs with throughput on each named model.
func job(name string, gpus int, throughput map[string]float64) live.Job {
	return live.Job{ID: "default/" + name, Namespace: "default", Name: name, Gated: true, ModifyIndex: 1,
		Spec: &jobmeta.Spec{Work: 100, WorkUnit: "steps", Weight: 1, GPUs: gpus, Throughput: throughput}}
}

// staticStatus is a StatusSource with a fixed status.
type staticStatus live.Status

func (s staticStatus) Status() live.Status { return live.Status(s) }

// bigStatus is a status of n jobs over three models, half of them active.
func bigStatus(n int) live.Status {
	st := live.Status{Jobs: map[string]live.JobRecord{}, Last: &live.RoundRecord{
		Round: 7, Start: "2026-12-01T10:00:00Z", Assignment: map[string]string{},
		Models: []allocator.Model{{Name: "A100", GPUs: 64}, {Name: "H100", GPUs: 32}, {Name: "V100", GPUs: 128}},
		Usage:  map[string]int{"A100": 64, "H100": 30, "V100": 100},
	}}
	states := []string{live.StatusWaiting, live.StatusRunning, live.StatusFinished, live.StatusFailed}
	for i := range n {
		id := fmt.Sprintf("team-%d/job-%d", i%17, i)
		var r live.JobRecord
		r.Status = states[i%len(states)]
		r.Rho = float64(i%100) / 10
		st.Jobs[id] = r
		if r.Status == live.StatusRunning {
			st.Last.Assignment[id] = st.Last.Models[i%3].Name
		}
	}
	return st
}
