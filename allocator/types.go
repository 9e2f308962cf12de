package allocator

import (
	"encoding/json"

	"github.com/nomad-fft/nomad-fft/allocator/solver"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// Model is one GPU model and the GPUs of it available this round (Y_i).
type Model struct {
	Name string `json:"name"`
	GPUs int    `json:"gpus"`
	// MemoryGB is the memory of one GPU of this model; 0 means unknown,
	// and then no job is excluded from the model for memory.
	MemoryGB float64 `json:"memory_gb,omitempty"`
}

// Job is one active training job as the round engine sees it.
type Job struct {
	ID string `json:"id"`
	// Arrival is a_j, the round in which the job arrived.
	Arrival int `json:"arrival"`
	// GPUs is d_j, the gang size: all of one model, all at once.
	GPUs int `json:"gpus"`
	// Work is W_j, total work units (epochs or steps); Done is progress.
	Work float64 `json:"work"`
	Done float64 `json:"done,omitempty"`
	// Throughput is theta_j^i: work units per round with GPUs GPUs of the
	// named model. A model that is absent or 0 here cannot run the job.
	Throughput map[string]float64 `json:"throughput"`
	// MemoryGB is the memory the job needs on each GPU (0 = no need
	// declared); a model with less is excluded.
	MemoryGB float64 `json:"memory_gb,omitempty"`
	// StateGB is the checkpoint size moved when the job changes model.
	StateGB float64 `json:"state_gb,omitempty"`
	// RestartSeconds is the job's own restart time, as its task driver
	// measured it (start to first progress); 0 means Config.RestartSeconds.
	RestartSeconds float64 `json:"restart_seconds,omitempty"`
	// LastModel is the model the job last ran on, "" if it never ran.
	LastModel string `json:"last_model,omitempty"`
	// Running is true when the job ran last round (on LastModel) and holds
	// its GPUs now, or is about to (its start is not placed yet), so leaving
	// it out of this round stops it.
	Running bool `json:"running,omitempty"`
}

// Remaining is the work still to do, never negative.
func (j *Job) Remaining() float64 { return Remaining(j.Work, j.Done) }

// Remaining is work less done, never negative: the one definition the
// engine and the policies share.
func Remaining(work, done float64) float64 {
	if done >= work {
		return 0
	}
	return work - done
}

// VolumeTerm selects what the volume part of the JCT surrogate counts.
type VolumeTerm string

const (
	// VolumeTotal is the paper's d_j * W_j / theta_j^i.
	VolumeTotal VolumeTerm = "total"
	// VolumeRemaining is our option d_j * (W_j - done_j) / theta_j^i.
	VolumeRemaining VolumeTerm = "remaining"
	// VolumeRate (our option, ObjectiveUnits only) is the job's
	// completion rate, -theta_j^i / (W_j - done_j): the fraction of its
	// remaining work one round on model i does, a benefit (hence
	// negative). Summed over jobs it is the shortest-remaining-time-first
	// index, so short jobs get the fast models; the credit, restarts and
	// parks are then priced in the same unit (Config.terms).
	VolumeRate VolumeTerm = "rate"
)

// Weights scale the cost terms: c = JCT*phi_wait + Volume*phi_volume +
// Switch*s - Fairness*rho*theta. All 1 is the paper's objective.
type Weights struct {
	JCT      float64 `json:"jct"`
	Volume   float64 `json:"volume"`
	Switch   float64 `json:"switch"`
	Fairness float64 `json:"fairness"`
}

// Config holds the engine's tunables. The zero value is not useful; start
// from DefaultConfig (JSON decoding onto it keeps unset fields' defaults).
type Config struct {
	Weights Weights    `json:"weights"`
	Volume  VolumeTerm `json:"volume_term"`
	// RoundSeconds is R, the round length.
	RoundSeconds float64 `json:"round_seconds"`
	// TransferGbps and RestartSeconds price a change of model: the
	// checkpoint moves at TransferGbps and the job spends RestartSeconds
	// starting again (our choice; the paper leaves s_j^i's value open).
	TransferGbps   float64 `json:"transfer_gbps"`
	RestartSeconds float64 `json:"restart_seconds"`
	// PricePreemption (our option; false is the paper) also charges
	// RestartSeconds for parking a running job and for resuming a parked
	// one on its last model: see Config.PreemptionPenalty.
	PricePreemption bool `json:"price_preemption,omitempty"`
	// NodeLimit bounds branch and bound; 0 means the solver's default.
	NodeLimit int `json:"node_limit,omitempty"`
	// GapTolerance (our option; 0, the default, proves every round
	// optimal) lets the solver stop once its answer is proven within this
	// relative gap of the optimum (solver.Options.GapTolerance), as MIP
	// solvers' default gap does; such a round is recorded feasible with
	// its gap. An operator's choice, like the round length: see WithWorld.
	GapTolerance float64 `json:"gap_tolerance,omitempty"`
	// Objective selects the unit of the cost terms: ObjectivePaper ("" or
	// "paper", Eq. 6 as written) or ObjectiveUnits (our option: every
	// term in GPU-rounds, so no decision depends on the work unit).
	Objective Objective `json:"objective,omitempty"`
	// Debt selects the fairness debt under ObjectiveUnits; ignored under
	// the paper's objective. "" means DebtLag.
	Debt Debt `json:"debt,omitempty"`
	// StarveRounds (our option; 0 is the paper) lets a starving job's
	// credit win GPUs against the work-conserving bound (7): a waiting job
	// that is this many rounds late against its equal-share finish time
	// lowers K(t) to the most GPUs any assignment that runs it keeps busy.
	// Without it, gangs that tile a model exactly lock a smaller job out
	// for as long as they run, whatever its rho (Decide, starvingBound).
	StarveRounds float64 `json:"starve_rounds,omitempty"`
}

// WithWorld returns c with the facts of the cluster taken from w: the
// round length and what a restart and a checkpoint transfer cost, and the
// solver's gap tolerance. They are the operator's (or the simulator's) to
// say, not the objective's; the weights, the volume term, preemption
// pricing and the node limit stay c's.
func (c Config) WithWorld(w Config) Config {
	c.RoundSeconds, c.RestartSeconds, c.TransferGbps = w.RoundSeconds, w.RestartSeconds, w.TransferGbps
	c.GapTolerance = w.GapTolerance
	return c
}

// Objective names the unit the cost terms are written in.
type Objective string

const (
	// ObjectivePaper is Eq. 6 as the paper writes it: the credit
	// rho_j * theta_j^i is in work units squared, so it depends on the
	// unit the job declares its work in (allocator/README.md, "The unit-free objective").
	ObjectivePaper Objective = "paper"
	// ObjectiveUnits (our option) writes the volume, switching and
	// credit terms in GPU-rounds: the credit is
	// w_fair * d_j * D_j * theta_j^i / theta_j^*, with theta_j^* the
	// job's fastest throughput and D_j the debt in rounds (Config.Debt).
	// The wait and volume terms are the paper's (both already unit-free).
	ObjectiveUnits Objective = "units"
)

// Debt names what the fairness credit under ObjectiveUnits measures.
type Debt string

const (
	// DebtShortfall is Eq. 5's rho_j in rounds on the job's fastest
	// model: rho_j / theta_j^*.
	DebtShortfall Debt = "shortfall"
	// DebtLag is the work the job is behind its equal-share reference,
	// in rounds on its fastest model: max(0, f_j (t - a_j) - done_j) /
	// theta_j^* (fairness.JobState.Behind).
	DebtLag Debt = "lag"
	// DebtLate is the same shortfall in rounds of the reference's own
	// pace: max(0, (t - a_j) - done_j / f_j), how late the job is against
	// its fair finish time.
	DebtLate Debt = "late"
	// DebtFTF is the same shortfall as a fraction of the job's work,
	// max(0, f_j (t - a_j) - done_j) / W_j: the finish-time fairness the
	// job has lost so far (a job that ends with it has FTF 1 + it against
	// the ledger's reference). It has no unit, like VolumeRate.
	DebtFTF Debt = "ftf"
)

// DefaultConfig is the paper's objective with our defaults for what the
// paper leaves open.
func DefaultConfig() Config {
	return Config{
		Weights:        Weights{JCT: 1, Volume: 1, Switch: 1, Fairness: 1},
		Volume:         VolumeTotal,
		RoundSeconds:   300,
		TransferGbps:   10,
		RestartSeconds: 30,
	}
}

// Instance is one round's full input. It is also the documented JSON format
// `fftctl round` reads.
type Instance struct {
	Round    int            `json:"round"`
	Models   []Model        `json:"models"`
	Jobs     []Job          `json:"jobs"`
	Fairness fairness.State `json:"fairness"`
	Config   Config         `json:"config"`
}

// Reason says why a job was left waiting: a stable Code to match on (as
// Kubernetes' condition reasons) and a Message for people. The zero Reason
// means the job runs.
type Reason struct {
	Code    ReasonCode `json:"code"`
	Message string     `json:"message"`
}

// ReasonCode is the stable part of a Reason.
type ReasonCode string

// Why a job waits. Exported so explanations can be matched by code.
const (
	// CodeNotSelected: the job could run but the policy leaves it out.
	CodeNotSelected ReasonCode = "NotSelected"
	// CodeDone: the job has no work left.
	CodeDone ReasonCode = "Done"
	// CodeNoFit: no model of the cluster, as it is now, can run the job
	// (the round loop holds it; the message says why).
	CodeNoFit ReasonCode = "NoFit"
)

// The reasons the engine gives. A job that fits no model never reaches the
// engine: Validate rejects it with a *FieldError naming the job, and the
// round loop holds it with ReasonNoFit's code and its own message.
var (
	ReasonNotSelected = Reason{CodeNotSelected, "not selected: other jobs have lower cost for the GPUs this round"}
	ReasonDone        = Reason{CodeDone, "no work left"}
	ReasonNoFit       = Reason{CodeNoFit, "no model of the cluster can run the job"}
)

// Terms are the parts of c_j^i for one job on one model.
type Terms struct {
	Model      string  `json:"model"`
	Throughput float64 `json:"throughput"`
	// Wait is (t - a_j) * theta / W_j, Volume is d_j * W_j / theta (or
	// remaining work), Switch is s_j^i (plus the preemption penalty with
	// Config.PricePreemption, so it is negative for a running job that
	// stays), Credit is rho_j * theta; all weighted.
	// Cost = Wait + Volume + Switch - Credit.
	Wait   float64 `json:"wait"`
	Volume float64 `json:"volume"`
	Switch float64 `json:"switch"`
	Credit float64 `json:"credit"`
	Cost   float64 `json:"cost"`
}

// JobDecision is the engine's answer for one job.
type JobDecision struct {
	ID string `json:"id"`
	// Model is the chosen model, "" when the job waits this round.
	Model  string  `json:"model"`
	Reason Reason  `json:"reason,omitzero"`
	Rho    float64 `json:"rho"`
	// Debt is the fairness debt that the credit multiplies under
	// ObjectiveUnits (Config.JobDebt); 0 under the paper's.
	Debt float64 `json:"debt,omitempty"`
	// Chosen is the cost terms on Model (zero when waiting).
	Chosen Terms `json:"chosen"`

	// The terms on every model (Options): a decision decoded from JSON
	// holds them in options; one of Decide prices them again from its
	// instance (src, job k) when asked. Kept for every job they were
	// most of a large round's memory (BenchmarkDecide), and only the
	// audit and fftctl read them.
	options []Terms
	src     *Instance
	k       int
}

// Options lists the terms on every model the job may use, in the
// instance's model order ("options" in the JSON). For a decision of
// Decide they are priced again from the instance it was given, as Decide
// priced them: read them before that instance's jobs change (the round
// loop's audit does, in the same round). Each call returns a new slice.
func (jd *JobDecision) Options() []Terms {
	if jd.src == nil {
		return jd.options
	}
	return jd.src.options(jd.k, jd.debt())
}

// debt is what the credit multiplies: Debt under ObjectiveUnits, else rho
// (Config.JobDebt, as Decide saw it).
func (jd *JobDecision) debt() float64 {
	if jd.src != nil && jd.src.Config.units() {
		return jd.Debt
	}
	return jd.Rho
}

// jobDecisionJSON is JobDecision's JSON: its fields and the options.
type jobDecisionJSON struct {
	jobDecisionFields
	Options []Terms `json:"options"`
}

// jobDecisionFields is JobDecision without its methods.
type jobDecisionFields JobDecision

// MarshalJSON writes the job's options with its fields, as before they
// were priced on demand.
func (jd JobDecision) MarshalJSON() ([]byte, error) {
	return json.Marshal(jobDecisionJSON{jobDecisionFields(jd), jd.Options()})
}

// UnmarshalJSON reads what MarshalJSON writes; Options then returns the
// options read.
func (jd *JobDecision) UnmarshalJSON(b []byte) error {
	var v jobDecisionJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*jd = JobDecision(v.jobDecisionFields)
	jd.options = v.Options
	return nil
}

// Decision is the engine's answer for one round.
type Decision struct {
	Round int `json:"round"`
	// Jobs are in the instance's order.
	Jobs []JobDecision `json:"jobs"`
	// Usage is GPUs assigned per model name, MaxUsage the K(t) of (7).
	Usage    map[string]int `json:"usage"`
	MaxUsage int            `json:"max_usage"`
	// Objective, Bound and Gap are the solver's (Gap relative).
	Objective float64       `json:"objective"`
	Bound     float64       `json:"bound"`
	Gap       float64       `json:"gap"`
	Status    solver.Status `json:"status"`
	Stats     solver.Stats  `json:"stats"`
}

// Assignment maps job id to model name for the jobs that run.
func (d *Decision) Assignment() map[string]string {
	out := make(map[string]string, len(d.Jobs))
	for _, j := range d.Jobs {
		if j.Model != "" {
			out[j.ID] = j.Model
		}
	}
	return out
}
