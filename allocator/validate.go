package allocator

import (
	"fmt"
	"math"
)

// FieldError is bad input: it names the job (or model), the field, the
// value and what was expected, so a user can fix the jobspec or file.
type FieldError struct {
	// Kind is "job" or "model"; ID is the job id or model name (for an
	// entry without one, its position such as "#3").
	Kind  string
	ID    string
	Field string
	Value any
	Want  string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s %q: field %q = %v: %s", e.Kind, e.ID, e.Field, e.Value, e.Want)
}

func finiteNonNeg(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// Validate checks an instance and returns the first problem found, as a
// *FieldError. It never panics on any input.
func (in *Instance) Validate() error { return in.validate(nil) }

// validate is Validate; when theta is not nil (len N*M) it also receives
// every job's throughput by model position, so pricing needs no second
// pass over the throughput maps.
func (in *Instance) validate(theta []float64) error {
	c := in.Config
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"config.weights.jct", c.Weights.JCT},
		{"config.weights.volume", c.Weights.Volume},
		{"config.weights.switch", c.Weights.Switch},
		{"config.weights.fairness", c.Weights.Fairness},
		{"config.transfer_gbps", c.TransferGbps},
		{"config.restart_seconds", c.RestartSeconds},
	} {
		if !finiteNonNeg(f.v) {
			return &FieldError{"config", "config", f.name, f.v, "must be a finite number >= 0"}
		}
	}
	if !(c.RoundSeconds > 0) || math.IsInf(c.RoundSeconds, 0) {
		return &FieldError{"config", "config", "config.round_seconds", c.RoundSeconds, "must be a finite number > 0"}
	}
	if c.TransferGbps == 0 {
		return &FieldError{"config", "config", "config.transfer_gbps", c.TransferGbps, "must be > 0"}
	}
	if c.Volume != VolumeTotal && c.Volume != VolumeRemaining && (c.Volume != VolumeRate || c.Objective != ObjectiveUnits) {
		return &FieldError{"config", "config", "config.volume_term", c.Volume, `must be "total" (the paper), "remaining", or "rate" with objective "units"`}
	}
	if c.Objective != "" && c.Objective != ObjectivePaper && c.Objective != ObjectiveUnits {
		return &FieldError{"config", "config", "config.objective", c.Objective, `must be "paper" (the default) or "units"`}
	}
	if c.Debt != "" && c.Debt != DebtShortfall && c.Debt != DebtLag && c.Debt != DebtLate && c.Debt != DebtFTF {
		return &FieldError{"config", "config", "config.debt", c.Debt, `must be "lag" (the default), "late", "ftf" or "shortfall"`}
	}
	if c.NodeLimit < 0 {
		return &FieldError{"config", "config", "config.node_limit", c.NodeLimit, "must be >= 0 (0 = default)"}
	}
	if len(in.Models) == 0 {
		return &FieldError{"instance", "", "models", "[]", "list at least one GPU model"}
	}
	models := make(map[string]int, len(in.Models))
	for k := range in.Models {
		m := &in.Models[k]
		id := m.Name
		if id == "" {
			id = fmt.Sprintf("#%d", k)
			return &FieldError{"model", id, "name", `""`, "give every model a non-empty name"}
		}
		if _, dup := models[m.Name]; dup {
			return &FieldError{"model", id, "name", m.Name, "model names must be unique"}
		}
		models[m.Name] = k
		if m.GPUs < 0 {
			return &FieldError{"model", id, "gpus", m.GPUs, "must be >= 0"}
		}
		if !finiteNonNeg(m.MemoryGB) {
			return &FieldError{"model", id, "memory_gb", m.MemoryGB, "must be a finite number >= 0"}
		}
	}
	ids := make(map[string]bool, len(in.Jobs))
	for k := range in.Jobs {
		j := &in.Jobs[k]
		if j.ID == "" {
			return &FieldError{"job", fmt.Sprintf("#%d", k), "id", `""`, "give every job a non-empty id"}
		}
		if ids[j.ID] {
			return &FieldError{"job", j.ID, "id", j.ID, "job ids must be unique"}
		}
		ids[j.ID] = true
		var row []float64
		if theta != nil {
			row = theta[k*len(in.Models) : (k+1)*len(in.Models)]
		}
		if err := j.validate(in.Round, in.Models, models, row); err != nil {
			return err
		}
	}
	return nil
}

func (j *Job) validate(round int, models []Model, index map[string]int, row []float64) error {
	bad := func(field string, v any, want string) error { return &FieldError{"job", j.ID, field, v, want} }
	switch {
	case j.GPUs <= 0:
		return bad("gpus", j.GPUs, "must be >= 1 (the job's gang size)")
	case !(j.Work > 0) || math.IsInf(j.Work, 0):
		return bad("work", j.Work, "must be a finite number > 0")
	case !finiteNonNeg(j.Done):
		return bad("done", j.Done, "must be a finite number >= 0")
	case !finiteNonNeg(j.MemoryGB):
		return bad("memory_gb", j.MemoryGB, "must be a finite number >= 0")
	case !finiteNonNeg(j.StateGB):
		return bad("state_gb", j.StateGB, "must be a finite number >= 0")
	case j.Arrival < 0 || j.Arrival > round:
		return bad("arrival", j.Arrival, fmt.Sprintf("must be a round in [0, %d] (the current round)", round))
	case j.LastModel != "" && !known(index, j.LastModel):
		return bad("last_model", j.LastModel, "must name a model of the instance or be empty")
	case j.Running && j.LastModel == "":
		return bad("running", j.Running, "needs last_model, the model the job runs on")
	}
	fits := false
	for name, theta := range j.Throughput {
		i, ok := index[name]
		if !ok {
			return bad(fmt.Sprintf("throughput[%q]", name), theta, "unknown model: name one of the instance's models")
		}
		if !finiteNonNeg(theta) {
			return bad(fmt.Sprintf("throughput[%q]", name), theta, "must be a finite number >= 0 (0 = cannot run there)")
		}
		fits = fits || j.fits(&models[i], theta)
		if row != nil {
			row[i] = theta
		}
	}
	if !fits {
		return bad("throughput", j.Throughput, fmt.Sprintf("fits no model: needs %d GPUs with %g GB each and a throughput > 0 on a model that has them", j.GPUs, j.MemoryGB))
	}
	return nil
}

func known(index map[string]int, name string) bool {
	_, ok := index[name]
	return ok
}

// fits is the exclusion rule for job j on model m with throughput theta: a
// positive throughput, enough GPUs and enough memory per GPU (memory 0 on
// either side means not declared).
func (j *Job) fits(m *Model, theta float64) bool {
	if theta <= 0 || m.GPUs < j.GPUs {
		return false
	}
	return j.MemoryGB == 0 || m.MemoryGB == 0 || j.MemoryGB <= m.MemoryGB
}
