package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
)

// OverrideAction is what an operator decided for one job.
type OverrideAction string

// The operator's decisions. Each holds, round after round, until it is lifted
// (fftctl resume).
const (
	// OverridePark keeps the job off the GPUs: a running job is parked
	// and no round starts it. While parked it leaves the fairness set, its
	// rho kept as it was, so it neither owes nor earns for the time the
	// operator held it.
	OverridePark OverrideAction = "park"
	// OverridePin lets the job run only on Model: the policy still decides
	// whether it runs this round.
	OverridePin OverrideAction = "pin"
)

// Override is an operator's decision about one job, as the store keeps it.
type Override struct {
	Action OverrideAction `json:"action"`
	// Model is the model a pin names.
	Model string `json:"model,omitempty"`
	// By names who decided (as fftctl was told, or its token's
	// description); Note is why. Both are for the audit log only.
	By   string    `json:"by,omitempty"`
	Note string    `json:"note,omitempty"`
	At   time.Time `json:"at"`
}

// Bounds of an override's text fields: an audit line, not a document.
const (
	MaxOverrideNote  = 1 << 10
	MaxOverrideBy    = 256
	MaxOverrideModel = 256
)

// Validate checks the override's fields.
func (o Override) Validate() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{{"note", o.Note, MaxOverrideNote}, {"by", o.By, MaxOverrideBy}, {"model", o.Model, MaxOverrideModel}} {
		if len(f.v) > f.max {
			return fmt.Errorf("override %s is %d bytes, over the %d allowed", f.name, len(f.v), f.max)
		}
	}
	switch o.Action {
	case OverridePark:
		if o.Model != "" {
			return fmt.Errorf("override action %q takes no model (got %q)", o.Action, o.Model)
		}
	case OverridePin:
		if o.Model == "" {
			return fmt.Errorf("override action %q needs the GPU model to pin to", o.Action)
		}
	default:
		return fmt.Errorf("override action %q: expected %q or %q", o.Action, OverridePark, OverridePin)
	}
	return nil
}

// String is the override as the audit log and fftctl show it.
func (o Override) String() string {
	s := string(o.Action)
	if o.Model != "" {
		s += " on " + o.Model
	}
	if o.By != "" {
		s += " by " + o.By
	}
	return s
}

// OverrideReader is an optional Store interface (found by type assertion):
// the operators' overrides in force, by job ID.
type OverrideReader interface {
	Overrides(ctx context.Context) (map[string]Override, error)
}

// OverrideWriter is an optional Store interface: fftctl park, pin and
// resume write through it. Lift removes a job's override; lifting none is
// not an error.
type OverrideWriter interface {
	SetOverride(ctx context.Context, id string, o Override) error
	LiftOverride(ctx context.Context, id string) error
}

// Waiting reasons of the overrides, beside the engine's.
const (
	// CodeParkedByOperator: an operator parked the job (fftctl park).
	CodeParkedByOperator allocator.ReasonCode = "ParkedByOperator"
)

// CodeUnhealthyGPU: the job's allocation holds a GPU Nomad reports
// unhealthy; the round parks it so that it restarts on a healthy one.
const CodeUnhealthyGPU allocator.ReasonCode = "UnhealthyGPU"

// StatusParked is the ledger status of a job an operator parked.
const StatusParked = "parked"

// pin restricts a job's throughputs to the pinned model, or says why the
// pin cannot hold (the job declares no throughput there).
func pin(tp map[string]float64, o Override) (map[string]float64, string) {
	theta, ok := tp[o.Model]
	if !ok || !(theta > 0) {
		return nil, fmt.Sprintf("pinned to %s (%s), where the job declares no throughput", o.Model, o)
	}
	return map[string]float64{o.Model: theta}, ""
}
