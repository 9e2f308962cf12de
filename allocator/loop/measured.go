package loop

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/report"
)

// Restart prices from what a job's task driver measured (nomad-driver-fft
// reports its restart time, start to first progress, and its last
// checkpoint's size): they replace the configured restart_seconds and the
// job's declared fft.state_size in its switching and preemption prices.

// Sources of a restart price, as the audit line records them.
const (
	SourceMeasured   = "measured"
	SourceConfigured = "configured"
	SourceDeclared   = "declared"
)

// RestartPrice is what one job's restarts were priced with in a round.
type RestartPrice struct {
	// Seconds is the restart time and SecondsSource where it came from
	// (measured, or the configured restart_seconds).
	Seconds       float64 `json:"seconds"`
	SecondsSource string  `json:"seconds_source"`
	// CheckpointGB is the checkpoint size a model change moves, and
	// CheckpointSource where it came from (measured, or the declared
	// fft.state_size).
	CheckpointGB     float64 `json:"checkpoint_gb"`
	CheckpointSource string  `json:"checkpoint_source"`
	// ClaimedSeconds and ClaimedCheckpointGB are a restart time and a
	// checkpoint the job claimed above what is priced (measure).
	ClaimedSeconds      float64 `json:"claimed_seconds,omitempty"`
	ClaimedCheckpointGB float64 `json:"claimed_checkpoint_gb,omitempty"`
}

// reports reads the jobs' full reports, when the store keeps them; a
// failure leaves the configured and declared prices in place.
func (l *Loop) reports(ctx context.Context, log hclog.Logger) map[string]report.Report {
	rr, ok := l.store.(ReportReader)
	if !ok {
		return nil
	}
	r, err := rr.Reports(ctx)
	if err != nil {
		log.Warn("reading the jobs' measured reports failed; pricing restarts as configured", "error", err)
	}
	return r
}

// measure sets job j's restart time and checkpoint size from its report r
// (when it measured them) and returns how its restarts are priced.
//
// Both are claims (issue 20): the task prints the progress line that ends
// its measured restart, and writes the checkpoint that is measured, as the
// job's author writes fft.state_size. A higher price keeps a job where it
// is (a park or a move costs more), so a measured restart time may lower
// the configured restart_seconds, never raise it (ClaimedSeconds keeps a
// higher claim for the audit; an operator who sees honest restarts longer
// than restart_seconds raises it for every job). The checkpoint, measured
// or declared, is priced at most as one round's transfer: a move never
// costs more than the round it happens in, whatever the job says.
func measure(j *allocator.Job, r report.Report, cfg allocator.Config) RestartPrice {
	p := RestartPrice{Seconds: cfg.RestartSeconds, SecondsSource: SourceConfigured, CheckpointGB: j.StateGB, CheckpointSource: SourceDeclared}
	if v := r.RestartSeconds; v != nil && *v > 0 && *v <= allocator.MaxRestartSeconds {
		if *v <= cfg.RestartSeconds {
			j.RestartSeconds = *v
			p.Seconds, p.SecondsSource = *v, SourceMeasured
		} else {
			p.ClaimedSeconds = *v
		}
	}
	if v := r.CheckpointBytes; v != nil && *v >= 0 && *v/1e9 <= allocator.MaxStateGB {
		j.StateGB = *v / 1e9
		p.CheckpointGB, p.CheckpointSource = j.StateGB, SourceMeasured
	}
	if most := maxPricedStateGB(cfg); j.StateGB > most {
		p.ClaimedCheckpointGB = j.StateGB
		j.StateGB, p.CheckpointGB = most, most
	}
	return p
}

// maxPricedStateGB is the checkpoint that takes one round to move.
func maxPricedStateGB(cfg allocator.Config) float64 {
	if !(cfg.TransferGbps > 0) || !(cfg.RoundSeconds > 0) {
		return allocator.MaxStateGB
	}
	return cfg.RoundSeconds * cfg.TransferGbps / 8
}
