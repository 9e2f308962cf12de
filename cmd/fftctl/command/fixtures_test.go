package command

import (
	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

const (
	a100 = "NVIDIA A100-SXM4-40GB"
	v100 = "Tesla V100-SXM2-16GB"
)

// roundB builds a RoundRecord fixture:
// newRound(3).Model(a100, 2).Run("default/a", a100, 2, 0.5).Obj().
type roundB struct{ r loop.RoundRecord }

func newRound(n int) *roundB {
	return &roundB{loop.RoundRecord{Round: n, Start: "2026-11-30T10:00:00.123456789Z",
		Assignment: map[string]string{}, Usage: map[string]int{}}}
}

func (b *roundB) Model(name string, gpus int) *roundB {
	b.r.Models = append(b.r.Models, allocator.Model{Name: name, GPUs: gpus})
	return b
}

// priced prices a job on both fixture models; model costs base, the
// other base+10.
func priced(model string, base float64) []allocator.Terms {
	other := v100
	if model == v100 {
		other = a100
	}
	return []allocator.Terms{
		{Model: other, Throughput: 1, Wait: 0.5, Volume: base + 9, Switch: 1, Credit: 0.5, Cost: base + 10},
		{Model: model, Throughput: 4, Wait: 1, Volume: base, Switch: 0, Credit: 1, Cost: base},
	}
}

// Run adds a job the round runs on model, started this round.
func (b *roundB) Run(id, model string, gpus int, rhoBefore float64) *roundB {
	opts := priced(model, 5)
	b.r.Assignment[id] = model
	b.r.Usage[model] += gpus
	b.r.Jobs = append(b.r.Jobs, loop.JobAudit{ID: id, Model: model, GPUs: gpus, Action: loop.ActionStart,
		RhoBefore: rhoBefore, RhoAfter: 0, Chosen: opts[1], Options: opts})
	return b
}

// Action sets the action of the last job added.
func (b *roundB) Action(a loop.Action) *roundB {
	b.r.Jobs[len(b.r.Jobs)-1].Action = a
	return b
}

// Wait adds a job the round does not run.
func (b *roundB) Wait(id string, gpus int, rhoBefore, rhoAfter float64) *roundB {
	b.r.Jobs = append(b.r.Jobs, loop.JobAudit{ID: id, GPUs: gpus, Action: loop.ActionKeep,
		ReasonCode: allocator.CodeNotSelected, Reason: allocator.ReasonNotSelected.Message, RhoBefore: rhoBefore, RhoAfter: rhoAfter, Options: priced(a100, 20)})
	return b
}

// NoFit adds a job no model can run.
func (b *roundB) NoFit(id, reason string) *roundB {
	b.r.Jobs = append(b.r.Jobs, loop.JobAudit{ID: id, Action: loop.ActionKeep, Reason: reason})
	return b
}

// Invalid adds a job rejected for bad meta.
func (b *roundB) Invalid(id, err string) *roundB {
	b.r.Invalid = append(b.r.Invalid, loop.Invalid{ID: id, Err: err})
	return b
}

func (b *roundB) Obj() *loop.RoundRecord { r := b.r; return &r }
