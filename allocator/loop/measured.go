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
func measure(j *allocator.Job, r report.Report, cfg allocator.Config) RestartPrice {
	p := RestartPrice{Seconds: cfg.RestartSeconds, SecondsSource: SourceConfigured, CheckpointGB: j.StateGB, CheckpointSource: SourceDeclared}
	if v := r.RestartSeconds; v != nil && *v > 0 && *v <= allocator.MaxRestartSeconds {
		j.RestartSeconds = *v
		p.Seconds, p.SecondsSource = *v, SourceMeasured
	}
	if v := r.CheckpointBytes; v != nil && *v >= 0 && *v/1e9 <= allocator.MaxStateGB {
		j.StateGB = *v / 1e9
		p.CheckpointGB, p.CheckpointSource = j.StateGB, SourceMeasured
	}
	return p
}
