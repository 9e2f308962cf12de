package workload

import "io"

// JobSpec is one job of a workload.
type JobSpec struct {
	// Index is the job's position in the workload (0-based); measurement
	// windows are ranges of it.
	Index int    `json:"index"`
	ID    string `json:"id"`
	Type  string `json:"type"`
	// Arrival is in seconds from the start of the run.
	Arrival float64 `json:"arrival_s"`
	GPUs    int     `json:"gpus"`
	// Work is total steps; Rate is steps/s per model with GPUs GPUs.
	Work float64            `json:"work"`
	Rate map[string]float64 `json:"rate"`
	// SpreadRate is steps/s per model when the job's GPUs lie on several
	// hosts (Gavel's unconsolidated rates); absent for a model: Rate.
	SpreadRate map[string]float64 `json:"spread_rate,omitempty"`
	// Source is "file:line" for a job read from a trace.
	Source string `json:"source,omitempty"`
}

// Source yields a workload's jobs in arrival order; Next returns io.EOF at
// the end (a generator in continuous mode never ends).
type Source interface {
	Next() (JobSpec, error)
}

// SliceSource replays a fixed list of jobs (sorted by arrival by the caller).
type SliceSource struct {
	Jobs []JobSpec
	pos  int
}

func (s *SliceSource) Next() (JobSpec, error) {
	if s.pos >= len(s.Jobs) {
		return JobSpec{}, io.EOF
	}
	s.pos++
	return s.Jobs[s.pos-1], nil
}
