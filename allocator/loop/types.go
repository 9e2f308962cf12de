package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/jobmeta"
	"github.com/nomad-fft/nomad-fft/allocator/placement"
	"github.com/nomad-fft/nomad-fft/allocator/profile"
	"github.com/nomad-fft/nomad-fft/allocator/report"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// Job is one FFT-managed job as the cluster shows it at the start of a round.
type Job struct {
	// ID is unique across namespaces: "namespace/job".
	ID        string
	Namespace string
	Name      string
	Spec      *jobmeta.Spec
	// ModifyIndex is the job's JobModifyIndex, for check-and-set writes.
	ModifyIndex uint64
	// CreateIndex is Nomad's index of the job's registration: a job purged and
	// registered again under the same ID has a new one, and is a new job.
	CreateIndex uint64
	// Gated is true while the job-level gate constraint holds it.
	Gated bool
	// OffPool is true while the job's node pool is not the allocator's GPU
	// pool, so Nomad places none of it on the GPU nodes.
	OffPool bool
	// Model is the GPU model the device constraint steers the job to, "" if none.
	Model string
	// Allocs are the IDs of allocations that are meant to run and have not
	// finished (pending or running); RunningModel is the GPU model they hold.
	Allocs       []string
	RunningModel string
	// RunID tells the job's runs apart: the sum of its live allocations'
	// create indexes and task restarts, so it changes whenever Nomad starts,
	// restarts, replaces or loses one of them (0 with none, or in the
	// simulator, which never interrupts a run). claims.go reads it.
	RunID uint64
	// Pieces are the GPUs of each allocation the job asks for (Nomad: one
	// per task group instance, each on one node); nil means one piece of
	// all its GPUs. Slots are where its live allocations hold GPUs now, one
	// per allocation that holds any.
	Pieces []int
	Slots  []placement.Slot
	// Pinned are the nodes the allocator pinned the job to (its node
	// constraint), none if unpinned. Refused is Nomad's reason when it
	// could not place the started job there (its latest evaluation failed
	// to place it), "" otherwise: the round then places it elsewhere.
	Pinned  []string
	Refused string
	// UnhealthyGPU is true when one of Allocs holds a GPU that Nomad reports
	// unhealthy: Nomad leaves the allocation there, so the round parks it.
	UnhealthyGPU bool
	// Finished is true once an allocation the job meant to run completed,
	// or, with Failed, once one failed and Nomad gave the job up (dead).
	Finished bool
	Failed   bool
}

// Held reports whether Nomad is kept from placing the job on the GPU nodes,
// by the gate or by its node pool.
func (j *Job) Held() bool { return j.Gated || j.OffPool }

// Invalid is a job that opts in with fft.* meta but breaks the contract. It
// is left untouched; Err names the key, the value and what is expected.
type Invalid struct {
	ID  string `json:"id"`
	Err string `json:"error"`
}

// Snapshot is what one observation of the cluster returns.
type Snapshot struct {
	// Models are the GPU models with their healthy GPUs on ready, eligible
	// nodes, sorted by name.
	Models []allocator.Model
	// Hosts are the GPU nodes, one per node and model, with the healthy GPUs
	// and which jobs hold them, sorted by model then ID. Without hosts (an
	// observer that does not know them) the round places nothing itself.
	Hosts []placement.Host
	// Jobs are sorted by ID.
	Jobs    []Job
	Invalid []Invalid
	// Calls is the number of API calls the observation made.
	Calls int
	// WatchCalls is the number of API calls a Watcher made since the
	// previous observation.
	WatchCalls int
}

// Observer reads the cluster (Nomad, for the live service).
type Observer interface {
	Observe(ctx context.Context) (*Snapshot, error)
}

// Applier carries out a plan (through the Nomad API, for the live
// service). It must be idempotent: applying a plan computed from a stale
// snapshot may conflict, never overwrite a user's concurrent change.
type Applier interface {
	Apply(ctx context.Context, p *Plan) ApplyResult
}

// ApplyResult is what an Applier did with one plan.
type ApplyResult struct {
	// Calls is the number of API calls made.
	Calls int `json:"calls"`
	// Conflicts are jobs whose check-and-set write lost to a concurrent
	// update; they are re-read next round.
	Conflicts []string `json:"conflicts,omitempty"`
	// Errors are other failures, one line each, naming the job.
	Errors []string `json:"errors,omitempty"`
	// Applied counts the changes now in place, by action.
	Applied map[Action]int `json:"applied,omitempty"`
	// HeldInPool counts the kept held jobs the adapter wrote to hold them
	// another way (Nomad: into the GPU pool behind the gate, once).
	HeldInPool int `json:"held_in_pool,omitempty"`
}

// JobRecord is the persistent per-job state: the fairness ledger entry plus
// what the allocator tracks across rounds.
type JobRecord struct {
	// JobState's weight is the w_j of the job's fairness share, present
	// only when the allocator counts fft.weight and it is not 1.
	fairness.JobState
	// User is the job's fft.user: a label, fairness is per job.
	User string `json:"user,omitempty"`
	// CreateIndex is the Nomad create index of the job the record is of (0
	// in records written before it was kept): a job with the same ID and
	// another create index starts a new record.
	CreateIndex uint64 `json:"create_index,omitempty"`
	// Done is the progress in work units: the job's last report plus the
	// rounds run since then times the declared throughput (the estimate
	// alone when the job never reports), never more than Earned.
	Done float64 `json:"done"`
	// Earned is the work the rounds credited the job with: the rate each
	// round used on its model, times the part of the round that passed.
	// It caps Done (claims.go); Vouched says the record keeps it.
	Earned  float64 `json:"earned"`
	Vouched bool    `json:"vouched,omitempty"`
	// Overrun counts the rounds in a row the job held GPUs claiming to
	// finish within the round; Distrusted, once set, says why its claims
	// no longer count (claims.go).
	Overrun    float64 `json:"overrun,omitempty"`
	Distrusted string  `json:"distrusted,omitempty"`
	// RunID is the job's Job.RunID as the last round saw it.
	RunID uint64 `json:"run_id,omitempty"`
	// Rates are the job's rates per model as the last round's instance
	// had them, before any distrust: a fall recomputes the fair rates.
	Rates     map[string]float64 `json:"rates,omitempty"`
	LastModel string             `json:"last_model,omitempty"`
	Switches  int                `json:"switches"`
	// RoundsRun counts the rounds that selected the job, early ones included.
	RoundsRun int `json:"rounds_run"`
	// AttainedGPUSeconds is the GPU time the rounds that selected the job
	// gave it (its gang size times the time each ran): the service that
	// least-attained-service policies order by.
	AttainedGPUSeconds float64 `json:"attained_gpu_seconds,omitempty"`
	// Status is one of the Status* constants.
	Status string `json:"status"`
	// Credit is what the last round credited the job for a whole round;
	// an early next round cuts it to the time that passed, and takes it
	// back if Nomad has not placed the job's start (see settle).
	Credit *Credit `json:"credit,omitempty"`
	// Throughput is what the last round used per GPU model, in work units
	// per round with all the job's GPUs, with each value's source
	// (declared, measured, estimated, prior) and error (log sd).
	Throughput map[string]profile.Throughput `json:"throughput,omitempty"`
	// Measured is the job's measurements per model: the EMA state the
	// estimator keeps, from which it is rebuilt (profile.go).
	Measured map[string]profile.Measurement `json:"measured,omitempty"`
	// Sample is the measurement the last round opened (profile.go).
	Sample *Sample `json:"sample,omitempty"`
	// ProfileRounds counts the rounds a job without data ran to be measured.
	ProfileRounds int `json:"profile_rounds,omitempty"`
	// Refused maps each host Nomad refused to place the job on to the
	// rounds it is still avoided for it (place.go), and RefusedReason is
	// Nomad's last reason: a job whose own constraints rule out every host
	// of a model waits instead of being started on each host in turn.
	Refused       map[string]int `json:"refused,omitempty"`
	RefusedReason string         `json:"refused_reason,omitempty"`
}

// Credit is one round's credit to a job: its Eq. 5 step and its estimated
// progress, for a whole round R.
type Credit struct {
	// RhoFrom is rho before the step; RhoStep is mu(t) * (f - achieved),
	// before the clamp at 0.
	RhoFrom float64 `json:"rho_from"`
	RhoStep float64 `json:"rho_step"`
	// RhoRan is what running took off the step, mu(t) * achieved (0 for a
	// job that waited): a start Nomad never placed ran for none of the round
	// (settle).
	RhoRan float64 `json:"rho_ran,omitempty"`
	// Done is the work units the round added to the progress estimate,
	// GPUSeconds the service it added.
	Done       float64 `json:"done"`
	GPUSeconds float64 `json:"gpu_seconds,omitempty"`
	// Overrun is what the round added to the job's overrun count.
	Overrun float64 `json:"overrun,omitempty"`
}

// Job states as the ledger records them.
const (
	StatusWaiting  = "waiting"
	StatusRunning  = "running"
	StatusFinished = "finished"
	StatusFailed   = "failed"
	StatusNoFit    = "no-fit"
)

// Ledger is the allocator's persistent state: the next round to run and
// one record per job seen. Version is the store's token for check-and-set.
type Ledger struct {
	// Round numbers the next round's record; early rounds count.
	Round int `json:"round"`
	// Clock is the fairness time, in rounds of length R, at which the next
	// round is due if it comes on schedule. Arrivals, mu and the wait term
	// read its whole part; early rounds advance it by the part of R that
	// passed, so it counts time, not rounds.
	Clock float64 `json:"clock"`
	// Start is when the last recorded round started (zero if none is
	// known); an early round measures the time that passed from it.
	Start   time.Time            `json:"start"`
	Jobs    map[string]JobRecord `json:"-"`
	Version uint64               `json:"-"`
	// Claimed is true when the store holds an intent record of the round
	// this ledger follows, written by Claimer.Claim at Version: Record then
	// replaces that intent instead of creating the round's record.
	Claimed bool `json:"-"`
}

// JobAudit is one job's line in a round record.
type JobAudit struct {
	ID    string `json:"id"`
	Model string `json:"model,omitempty"`
	// ReasonCode and Reason say why the job waits: a stable code
	// (allocator.ReasonCode) and the text; both empty when it runs.
	ReasonCode allocator.ReasonCode `json:"reason_code,omitempty"`
	Reason     string               `json:"reason,omitempty"`
	Action     Action               `json:"action"`
	RhoBefore  float64              `json:"rho_before"`
	RhoAfter   float64              `json:"rho_after"`
	Chosen     allocator.Terms      `json:"chosen"`
	Options    []allocator.Terms    `json:"options,omitempty"`
	// User is the job's fft.user; Weight the w_j of its fairness share
	// (absent: 1).
	User   string  `json:"user,omitempty"`
	Weight float64 `json:"weight,omitempty"`
	// GPUs is the job's gang size d_j (0 for a job held as no-fit).
	GPUs int `json:"gpus,omitempty"`
	// Restart is how the job's restarts were priced when its task driver
	// measured its restart time or checkpoint size (absent: the configured
	// restart_seconds and the declared fft.state_size).
	Restart *RestartPrice `json:"restart,omitempty"`
	// Tenant is the job's tenant when tenant shares are on.
	Tenant string `json:"tenant,omitempty"`
	// Override is the operator's decision in force for the job, if any
	// (Override.String: "pin on MODEL by NAME").
	Override string `json:"override,omitempty"`
	// Throughput is the job's throughput per model as the round used it,
	// with its source and error (left out when recording lean).
	Throughput map[string]profile.Throughput `json:"throughput,omitempty"`
	// Learn is set for a job without fft.throughput and without data: the
	// model it is run on, outside the policy, to be measured.
	Learn *profile.Choice `json:"learn,omitempty"`
	// Mismatches flags declared throughputs far from the measured ones.
	Mismatches []profile.Mismatch `json:"mismatches,omitempty"`
	// Hosts are where the job runs after this round, one slot per
	// allocation (node ID and GPUs), when the round placed it. Refused is
	// Nomad's reason for not placing it where the last round pinned it.
	Hosts   []placement.Slot `json:"hosts,omitempty"`
	Refused string           `json:"refused,omitempty"`
	// Distrusted says why the job's claims no longer count (claims.go).
	Distrusted string `json:"distrusted,omitempty"`
}

// setReason fills the line's reason from the engine's.
func (a *JobAudit) setReason(r allocator.Reason) { a.ReasonCode, a.Reason = r.Code, r.Message }

// RoundApplying is the State of a round's intent record: its decision, written
// before it is applied (Claimer), and not yet replaced by the full record.
const RoundApplying = "applying"

// RoundRecord is one entry of the audit log.
type RoundRecord struct {
	Round int `json:"round"`
	// State is RoundApplying in an intent record; a complete record has none.
	// An intent left in the audit log is a round whose leader died (or lost
	// the store) between applying it and recording it: its decision may have
	// been applied in part, its job lines and credit are lost.
	State string `json:"state,omitempty"`
	// Start is the round's start, RFC 3339.
	Start string `json:"start"`
	// Trigger is why the round ran: TriggerSchedule, TriggerManual, or the
	// kind of the first trigger an early round answers; TriggerJobs are the
	// jobs of every trigger it answers.
	Trigger     TriggerKind `json:"trigger"`
	TriggerJobs []string    `json:"trigger_jobs,omitempty"`
	// Policy is the name of the policy that decided the round.
	Policy string `json:"policy,omitempty"`
	// Clock is the fairness time (in rounds) at the round's start, and
	// CreditKept the share of the previous round's credit kept: the time
	// that passed over R for an early round, else 1.
	Clock      float64 `json:"clock"`
	CreditKept float64 `json:"credit_kept"`
	// IdleGPUs is how many GPUs the decision leaves idle.
	IdleGPUs int `json:"idle_gpus"`
	// InputsDigest is a SHA-256 of the round engine's input instance.
	InputsDigest string            `json:"inputs_digest"`
	Models       []allocator.Model `json:"models"`
	Assignment   map[string]string `json:"assignment"`
	Jobs         []JobAudit        `json:"jobs"`
	// OptionsOmitted is true when the store left out the job lines'
	// options to keep the record within its size limit.
	OptionsOmitted bool        `json:"options_omitted,omitempty"`
	Invalid        []Invalid   `json:"invalid,omitempty"`
	Objective      float64     `json:"objective"`
	Bound          float64     `json:"bound"`
	Gap            float64     `json:"gap"`
	Status         string      `json:"status"`
	SolveSeconds   float64     `json:"solve_seconds"`
	Plan           string      `json:"plan"`
	Apply          ApplyResult `json:"apply"`
	ObserveCalls   int         `json:"observe_calls"`
	// WatchCalls are the API calls the watcher made since the previous
	// round (blocking queries that look for arrivals and finishes).
	WatchCalls int `json:"watch_calls"`
	// Nodes is the branch-and-bound nodes of the round's last decision
	// (0 for a policy without a search), so a slow round can be told apart
	// from a hard one.
	Nodes int `json:"nodes,omitempty"`
	// Phases holds each phase's duration in seconds.
	Phases map[string]float64 `json:"phases"`
	// TenantWeights is true when the round's fairness shares followed
	// fft.weight (w_j / sum w_k) rather than the paper's 1/|A(t)|.
	TenantWeights bool `json:"tenant_weights,omitempty"`
	// Usage is the GPUs assigned per model name.
	Usage map[string]int `json:"usage,omitempty"`
	// Hosts are the GPU nodes as the round observed them (GPUs, and the
	// jobs holding them); Moves the running jobs the placement stage put on
	// other hosts of their model to make room for a gang, each with its
	// price; Redecided counts the times the round was decided again without
	// options the hosts could not take.
	Hosts     []placement.Host `json:"hosts,omitempty"`
	Moves     []placement.Move `json:"moves,omitempty"`
	Redecided int              `json:"redecided,omitempty"`
	// Tenants are the tenants' shares of the round (with tenant shares on).
	Tenants []TenantAudit `json:"tenants,omitempty"`
}

// Store keeps the ledger and the audit log (Consul KV, for the live service).
type Store interface {
	// Load returns the stored ledger, or an empty one at round 0.
	Load(ctx context.Context) (*Ledger, error)
	// Record writes the round record and the new ledger atomically, only if
	// the stored ledger is still at prev.Version; else it returns an error
	// wrapping ErrConflict and writes nothing. On success it sets
	// next.Version.
	Record(ctx context.Context, prev, next *Ledger, rec *RoundRecord) error
}

// Preparer is an optional Store interface (found by type assertion): the
// part of Record that needs only the ledgers and the record's job lines
// (encoding next's job records and rec.Jobs), done while the round waits on
// Nomad. The round changes neither ledger nor rec.Jobs between Prepare and
// Record, only rec's other fields (the apply's result, the phases); a Record
// for another next or rec does the work itself, and Record reports what
// Prepare could not do.
type Preparer interface {
	Prepare(prev, next *Ledger, rec *RoundRecord)
}

// Claimer is an optional Store interface (found by type assertion) that
// makes each round number applied at most once. Before a round applies its
// decision, Claim advances the stored ledger to next (check-and-set against
// prev.Version, without job records) and writes intent, the round's record
// with State RoundApplying, only if that round has no record yet; it
// returns the ledger's new version. Record, given a prev with that version
// and Claimed set, replaces the intent with the full record. A replica that
// dies between the two leaves the intent: the next leader loads the ledger
// at the following round and never applies the claimed number again.
type Claimer interface {
	Claim(ctx context.Context, prev, next *Ledger, intent *RoundRecord) (version uint64, err error)
}

// ProgressReader is an optional Store interface (found by type assertion):
// the progress jobs report themselves, in work units done, by job ID. A
// reported value replaces the estimate.
type ProgressReader interface {
	Progress(ctx context.Context) (map[string]float64, error)
}

// ProgressReporter is an optional Store interface (found by type
// assertion): it stores the work units a job reports done, by job ID
// ("namespace/job"), where ProgressReader reads them back. The HTTP API's
// progress endpoint writes through it.
type ProgressReporter interface {
	ReportProgress(ctx context.Context, id string, done float64) error
}

// ReportStorer is an optional Store interface (found by type assertion): it
// stores a job's full progress report, with what its task driver measured,
// where ProgressReader still reads the work done.
type ReportStorer interface {
	StoreReport(ctx context.Context, id string, r report.Report) error
}

// ReportReader is an optional Store interface: the jobs' full reports, by
// job ID. The loop prices a job's restarts with the restart time and
// checkpoint size its task driver measured, in place of the configured and
// declared ones.
type ReportReader interface {
	Reports(ctx context.Context) (map[string]report.Report, error)
}

// AllocReporter is an optional Store interface: it stores job id's report
// as from allocation alloc, check-and-set against the report stored before
// it, and refuses with a *BehindError a report below the stored one when
// both come from the same allocation (a new allocation resuming from an
// older checkpoint may go lower). So the check holds whichever replica took
// either report. An empty alloc (reports taken without authentication) is
// never refused.
type AllocReporter interface {
	StoreAllocReport(ctx context.Context, id, alloc string, r report.Report) error
}

// BehindError is a report below the stored one of the same allocation.
type BehindError struct {
	Done, Last float64
}

func (e *BehindError) Error() string {
	return fmt.Sprintf("done = %g is below this allocation's last report %g: progress only goes back when a new allocation resumes from a checkpoint", e.Done, e.Last)
}

// CheckAfter returns a *BehindError when r, from alloc, cannot follow the
// stored report prev (nil: none).
func CheckAfter(prev *report.Report, alloc string, r report.Report) error {
	if prev != nil && alloc != "" && prev.Alloc == alloc && r.Done < prev.Done {
		return &BehindError{Done: r.Done, Last: prev.Done}
	}
	return nil
}

// ProgressPruner is an optional Store interface: it deletes the progress
// reports of the jobs named ("namespace/job"), those no longer in Nomad and
// those registered again (a new create index), so that a job registered
// later under the same ID starts with none. Deleting a report that is not
// there is no error.
type ProgressPruner interface {
	PruneProgress(ctx context.Context, ids []string) error
}

// ErrConflict means a check-and-set write found newer data than expected.
var ErrConflict = errors.New("live: check-and-set conflict")

// PhaseError says which phase of a round failed.
type PhaseError struct {
	Round int
	Phase string
	Err   error
}

func (e *PhaseError) Error() string {
	return fmt.Sprintf("round %d: %s: %v", e.Round, e.Phase, e.Err)
}

func (e *PhaseError) Unwrap() error { return e.Err }
