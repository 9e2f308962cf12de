package telemetry

import (
	"sort"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator/loop"
)

// AuditMessage is the message of every audit event, for a log shipper to match on
// (with the logger name, "<name>.audit").
const AuditMessage = "round audit"

// Audit writes one structured event per round to log: with hclog's JSON format (the
// allocator's -log-json) each event is one JSON line. Its size is bounded by the round's
// changes, not its jobs: it lists the jobs whose placement changed, not every job.
type Audit struct {
	log hclog.Logger
}

// NewAudit returns an Audit that logs to log.Named("audit").
func NewAudit(log hclog.Logger) *Audit { return &Audit{log: log.Named("audit")} }

// ObserveRound logs the round: the service calls it after every round with its record (nil
// when it failed before recording) and its error.
func (a *Audit) ObserveRound(rec *loop.RoundRecord, err error) {
	if err != nil {
		a.log.Error(AuditMessage, auditFailed(err)...)
		return
	}
	if rec != nil {
		a.log.Info(AuditMessage, auditFields(rec)...)
	}
}

func auditFailed(err error) []any {
	return []any{"outcome", "failed", "phase", failedPhase(err), "error", err.Error()}
}

// auditFields are the event's key/value pairs: what ran, why, how long, what it changed and
// the state it leaves.
func auditFields(rec *loop.RoundRecord) []any {
	changes := map[string][]string{}
	for _, j := range rec.Jobs {
		if j.Action == loop.ActionStart || j.Action == loop.ActionMigrate || j.Action == loop.ActionPark {
			changes[string(j.Action)] = append(changes[string(j.Action)], j.ID)
		}
	}
	for _, ids := range changes {
		sort.Strings(ids)
	}
	total := 0.0
	for _, d := range rec.Phases {
		total += d
	}
	return []any{
		"outcome", "recorded",
		"round", rec.Round,
		"start", rec.Start,
		"trigger", string(rec.Trigger),
		"trigger_jobs", rec.TriggerJobs,
		"clock", rec.Clock,
		"jobs", len(rec.Jobs),
		"invalid", len(rec.Invalid),
		"idle_gpus", rec.IdleGPUs,
		"usage", rec.Usage,
		"changes", changes,
		"status", rec.Status,
		"objective", rec.Objective,
		"gap", rec.Gap,
		"duration_seconds", total,
		"solve_seconds", rec.SolveSeconds,
		"phases", rec.Phases,
		"api_calls", rec.ObserveCalls + rec.Apply.Calls + rec.WatchCalls,
		"conflicts", rec.Apply.Conflicts,
		"apply_errors", rec.Apply.Errors,
		"inputs_digest", rec.InputsDigest,
	}
}
