package allocator

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/nomad-fft/nomad-fft/allocator/internal/recycle"
	"github.com/nomad-fft/nomad-fft/allocator/solver"
	"github.com/nomad-fft/nomad-fft/fairness"
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

// Validate checks a model's own fields: a name, a GPU count and a memory size in range. The
// uniqueness of names is the instance's to check.
func (m *Model) Validate() error {
	switch {
	case m.Name == "":
		return &FieldError{"model", "", "name", `""`, "give every model a non-empty name"}
	case m.GPUs < 0 || m.GPUs > MaxModelGPUs:
		return &FieldError{"model", m.Name, "gpus", m.GPUs, fmt.Sprintf("must be a GPU count in [0, %d]", MaxModelGPUs)}
	case !inRange(m.MemoryGB, 0, MaxMemoryGB):
		return &FieldError{"model", m.Name, "memory_gb", m.MemoryGB, fmt.Sprintf("must be a number in [0, %g] (0 = unknown)", MaxMemoryGB)}
	}
	return nil
}

func finiteNonNeg(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// Validate checks an instance and returns the first problem found, as a
// *FieldError: every value in its range (limits.go), and the fairness
// state consistent with the jobs. It never panics on any input.
func (in *Instance) Validate() error {
	if err := in.validate(nil, nil); err != nil {
		return err
	}
	return in.validateFairness()
}

// validate checks what the engine needs to price every option with finite
// terms. When theta is not nil (len N*M) it also receives every job's
// throughput by model position, so pricing needs no second pass over the
// throughput maps. When each is not nil it is called with job k and its
// fairness record as soon as job k is valid: the record is read once per
// job (at 100,000 jobs each pass over the ledger's map costs ~20 ms).
func (in *Instance) validate(theta []float64, each func(k int, st fairness.JobState)) error {
	if err := in.Config.Validate(); err != nil {
		return err
	}
	if !inRange(float64(in.Round), 0, MaxRound) {
		return &FieldError{"instance", "", "round", in.Round, fmt.Sprintf("must be a round index in [0, %g]", MaxRound)}
	}
	if len(in.Models) == 0 {
		return &FieldError{"instance", "", "models", "[]", "list at least one GPU model"}
	}
	models := make(map[string]int, len(in.Models))
	for k := range in.Models {
		m := &in.Models[k]
		if err := m.Validate(); err != nil {
			if fe := (*FieldError)(nil); m.Name == "" && errors.As(err, &fe) {
				fe.ID = fmt.Sprintf("#%d", k) // its position, for want of a name
			}
			return err
		}
		if _, dup := models[m.Name]; dup {
			return &FieldError{"model", m.Name, "name", m.Name, "model names must be unique"}
		}
		models[m.Name] = k
	}
	ids := takeIDs(len(in.Jobs))
	defer idSets.Put(&ids)
	for k := range in.Jobs {
		j := &in.Jobs[k]
		if j.ID == "" {
			return &FieldError{"job", fmt.Sprintf("#%d", k), "id", `""`, "give every job a non-empty id"}
		}
		// One map operation per job: a duplicate leaves the set's size.
		seen := len(ids)
		if ids[j.ID] = struct{}{}; len(ids) == seen {
			return &FieldError{"job", j.ID, "id", j.ID, "job ids must be unique"}
		}
		var row []float64
		if theta != nil {
			row = theta[k*len(in.Models) : (k+1)*len(in.Models)]
		}
		if err := j.validate(in.Round, in.Models, models, row); err != nil {
			return err
		}
		// rho multiplies theta in the credit term.
		st := in.Fairness.Jobs[j.ID]
		if rho := st.Rho; !inRange(rho, 0, MaxRho) {
			return &FieldError{"job", j.ID, "fairness.jobs.rho", rho, fmt.Sprintf("must be a number in [0, %g] (rho starts at 0 and never goes below)", MaxRho)}
		}
		if each != nil {
			each(k, st)
		}
	}
	return nil
}

// idSets keeps the set of job ids of the last round validated (a 100,000
// job round's is about 3 MB) for the next, as costs keeps its matrix.
var idSets recycle.Keeper[map[string]struct{}]

// takeIDs returns an empty set of job ids with room for n.
func takeIDs(n int) map[string]struct{} {
	if v := idSets.Take(); v != nil {
		clear(*v)
		return *v
	}
	return make(map[string]struct{}, n)
}

// Validate checks that every setting is in its range (limits.go) and
// returns the first problem as a *FieldError (Kind "config").
func (c *Config) Validate() error {
	bad := func(field string, v any, want string) error { return &FieldError{"config", "config", field, v, want} }
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"config.weights.jct", c.Weights.JCT},
		{"config.weights.volume", c.Weights.Volume},
		{"config.weights.switch", c.Weights.Switch},
		{"config.weights.fairness", c.Weights.Fairness},
	} {
		if !inRange(f.v, 0, MaxWeight) {
			return bad(f.name, f.v, fmt.Sprintf("must be a number in [0, %g] (0 turns the term off; the paper uses 1)", MaxWeight))
		}
	}
	switch {
	case !ValidRoundSeconds(c.RoundSeconds):
		return bad("config.round_seconds", c.RoundSeconds, fmt.Sprintf("must be a round length in seconds in [%g, %g] (default 300)", MinRoundSeconds, MaxRoundSeconds))
	case !inRange(c.TransferGbps, MinTransferGbps, MaxTransferGbps):
		return bad("config.transfer_gbps", c.TransferGbps, fmt.Sprintf("must be a checkpoint transfer rate in Gbit/s in [%g, %g] (default 10)", MinTransferGbps, MaxTransferGbps))
	case !ValidRestartSeconds(c.RestartSeconds):
		return bad("config.restart_seconds", c.RestartSeconds, fmt.Sprintf("must be a number of seconds in [0, %g] (default 30)", MaxRestartSeconds))
	case c.Volume != VolumeTotal && c.Volume != VolumeRemaining && (c.Volume != VolumeRate || c.Objective != ObjectiveUnits):
		return bad("config.volume_term", c.Volume, `must be "total" (the paper), "remaining", or "rate" with objective "units"`)
	case c.Objective != "" && c.Objective != ObjectivePaper && c.Objective != ObjectiveUnits:
		return bad("config.objective", c.Objective, `must be "paper" (the default) or "units"`)
	case c.Debt != "" && c.Debt != DebtShortfall && c.Debt != DebtLag && c.Debt != DebtLate && c.Debt != DebtFTF:
		return bad("config.debt", c.Debt, `must be "lag" (the default), "late", "ftf" or "shortfall"`)
	case c.NodeLimit < 0:
		return bad("config.node_limit", c.NodeLimit, "must be >= 0 (0 = default)")
	case !solver.ValidGapTolerance(c.GapTolerance):
		return bad("config.gap_tolerance", c.GapTolerance, "must be a relative gap in [0, 1), for example 1e-4 (0 = prove every round optimal, the default)")
	}
	return nil
}

// validateFairness checks the fairness state against the instance: every
// record is finite and in range, names a job of the instance, and agrees
// with that job's arrival and work (the ledger's tau was computed from
// them). The round reads only rho; the rest catches a state that belongs
// to another instance.
func (in *Instance) validateFairness() error {
	fs := &in.Fairness
	if fs.Round != 0 && fs.Round != in.Round {
		return &FieldError{"instance", "", "fairness.round", fs.Round, fmt.Sprintf("must be the instance's round %d (or omitted)", in.Round)}
	}
	jobs := make(map[string]*Job, len(in.Jobs))
	for k := range in.Jobs {
		jobs[in.Jobs[k].ID] = &in.Jobs[k]
	}
	ids := make([]string, 0, len(fs.Jobs))
	for id := range fs.Jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids) // report the same first problem every time
	for _, id := range ids {
		st := fs.Jobs[id]
		bad := func(field string, v any, want string) error {
			return &FieldError{"job", id, "fairness.jobs." + field, v, want}
		}
		j, ok := jobs[id]
		switch {
		case !ok:
			return bad("id", id, "names no job of the instance: remove the record or add the job to jobs")
		case !inRange(st.Rho, 0, MaxRho):
			return bad("rho", st.Rho, fmt.Sprintf("must be a number in [0, %g] (rho starts at 0 and never goes below)", MaxRho))
		case st.Arrival != j.Arrival:
			return bad("arrival", st.Arrival, fmt.Sprintf("must equal the job's arrival %d", j.Arrival))
		case st.Work != j.Work:
			return bad("work", st.Work, fmt.Sprintf("must equal the job's work %g", j.Work))
		case math.IsNaN(st.Tau) || math.IsInf(st.Tau, 0) || st.Tau < float64(st.Arrival):
			return bad("tau", st.Tau, fmt.Sprintf("must be a finite round >= the job's arrival %d (the equal-share finish a_j + W_j / r_j)", st.Arrival))
		case !inRange(st.Weight, 0, MaxFairnessWeight):
			return bad("weight", st.Weight, fmt.Sprintf("must be a number in [0, %g] (0 or absent = 1)", MaxFairnessWeight))
		}
	}
	return nil
}

func (j *Job) validate(round int, models []Model, index map[string]int, row []float64) error {
	bad := func(field string, v any, want string) error { return &FieldError{"job", j.ID, field, v, want} }
	switch {
	case j.GPUs <= 0 || j.GPUs > MaxJobGPUs:
		return bad("gpus", j.GPUs, fmt.Sprintf("must be in [1, %d] (the job's gang size)", MaxJobGPUs))
	case !inOpenRange(j.Work, 0, MaxWork):
		return bad("work", j.Work, fmt.Sprintf("must be a finite number > 0 and at most %g", MaxWork))
	case !finiteNonNeg(j.Done):
		return bad("done", j.Done, "must be a finite number >= 0")
	case !inRange(j.MemoryGB, 0, MaxMemoryGB):
		return bad("memory_gb", j.MemoryGB, fmt.Sprintf("must be a finite number in [0, %g] (0 = no need declared)", MaxMemoryGB))
	case !inRange(j.StateGB, 0, MaxStateGB):
		return bad("state_gb", j.StateGB, fmt.Sprintf("must be a finite number in [0, %g] (checkpoint size in GB)", MaxStateGB))
	case !ValidRestartSeconds(j.RestartSeconds):
		return bad("restart_seconds", j.RestartSeconds, fmt.Sprintf("must be a number of seconds in [0, %g] (0 = the config's)", MaxRestartSeconds))
	case j.Arrival < 0 || j.Arrival > round:
		return bad("arrival", j.Arrival, fmt.Sprintf("must be a round in [0, %d] (the current round)", round))
	case j.LastModel != "" && !known(index, j.LastModel):
		return bad("last_model", j.LastModel, "must name a model of the instance or be empty")
	case j.Running && j.LastModel == "":
		return bad("running", j.Running, "needs last_model, the model the job runs on")
	}
	// Each (job, model) pair is read once, in model order (this loop runs
	// for every pair of a round); a name that is no model is looked for
	// only when some entry was not found.
	fits, found := false, 0
	for i := range models {
		theta, ok := j.Throughput[models[i].Name]
		if !ok {
			continue
		}
		found++
		if !inRange(theta, 0, MaxThroughput) || RatioError(j.Work, theta) != "" {
			return j.badThroughput(models[i].Name, theta)
		}
		fits = fits || j.fits(&models[i], theta)
		if row != nil {
			row[i] = theta
		}
	}
	if found < len(j.Throughput) {
		for name, theta := range j.Throughput {
			if !known(index, name) {
				return bad(fmt.Sprintf("throughput[%q]", name), theta, "unknown model: name one of the instance's models")
			}
		}
	}
	if !fits {
		return bad("throughput", j.Throughput, fmt.Sprintf("fits no model: needs %d GPUs with %g GB each and a throughput > 0 on a model that has them", j.GPUs, j.MemoryGB))
	}
	return nil
}

// badThroughput says what is wrong with job j's throughput theta on the
// model named name, which is out of range or too far from the work.
func (j *Job) badThroughput(name string, theta float64) error {
	bad := func(want string) error {
		return &FieldError{"job", j.ID, fmt.Sprintf("throughput[%q]", name), theta, want}
	}
	if !inRange(theta, 0, MaxThroughput) {
		return bad(fmt.Sprintf("must be a finite number in [0, %g] (0 = cannot run there)", MaxThroughput))
	}
	return bad(RatioError(j.Work, theta))
}

// RatioError says what is wrong when a throughput theta > 0 and the work
// are too far apart for the cost terms to stay finite (MaxWorkRatio), or
// returns "". theta = 0 (the job cannot run there) is always fine. Parsers
// of user input (jobspec meta, traces) call it to reject such a job early.
func RatioError(work, theta float64) string {
	if theta == 0 || (work/theta <= MaxWorkRatio && theta/work <= MaxWorkRatio) {
		return ""
	}
	return fmt.Sprintf("work %g / throughput %g = %g rounds to finish: must be %g to %g rounds on every model the job can use (fix the work or the throughput, or give 0 to exclude the model)",
		work, theta, work/theta, 1/MaxWorkRatio, MaxWorkRatio)
}

func known(index map[string]int, name string) bool {
	_, ok := index[name]
	return ok
}

// fits is the exclusion rule for job j on model m with throughput theta: a
// positive throughput, enough GPUs and enough memory per GPU (memory 0 on
// either side means not declared).
func (j *Job) fits(m *Model, theta float64) bool { return Fits(m, j.GPUs, j.MemoryGB, theta) }

// Fits is the one rule for whether a job can run on model m: a positive
// throughput theta there, at least gpus GPUs of it, and enough memory per
// GPU (0 on either side means not declared, and then memory excludes
// nothing). The engine, the policies and the round loop all ask it.
func Fits(m *Model, gpus int, memoryGB, theta float64) bool {
	if !(theta > 0) || m.GPUs < gpus {
		return false
	}
	return memoryGB == 0 || m.MemoryGB == 0 || memoryGB <= m.MemoryGB
}
