package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Usage is the fix every rejected report is told.
const Usage = `the body is the work units done, a number >= 0 such as 42 or JSON {"done": 42}` +
	` (optional fields: throughput_per_second, gpu_model, gpus, restart_seconds, checkpoint_bytes, checkpoint_seconds)`

// Report is what a job reports: Done always, the rest only when measured (nil or empty
// otherwise), so that the allocator can tell a measurement from its own defaults.
type Report struct {
	// Done is the work units the job has done in total.
	Done float64 `json:"done"`
	// ThroughputPerSecond is the measured steady rate, work units per second, on GPUModel
	// with GPUs devices.
	ThroughputPerSecond *float64 `json:"throughput_per_second,omitempty"`
	GPUModel            string   `json:"gpu_model,omitempty"`
	GPUs                int      `json:"gpus,omitempty"`
	// RestartSeconds is the time from the task's start to its first progress.
	RestartSeconds *float64 `json:"restart_seconds,omitempty"`
	// CheckpointBytes and CheckpointSeconds are the last checkpoint's size and the time from
	// the request (signal) to the checkpoint being written.
	CheckpointBytes   *float64 `json:"checkpoint_bytes,omitempty"`
	CheckpointSeconds *float64 `json:"checkpoint_seconds,omitempty"`
	// Alloc is the Nomad allocation the report came from, as the allocator verified it
	// (the task's workload identity); the allocator stores it with the report, so that
	// "never backwards within one allocation" is checked against the stored report. A
	// client's own value is replaced by the verified one, or dropped.
	Alloc string `json:"alloc,omitempty"`
	// JobCreateIndex is the Nomad create index of the job that allocation belongs to, as
	// the allocator looked it up: a report of an earlier job with the same ID (purged and
	// registered again) does not count for the new one. Set by the allocator only.
	JobCreateIndex uint64 `json:"job_create_index,omitempty"`
}

// Measured reports whether r carries more than Done.
func (r Report) Measured() bool {
	return r.ThroughputPerSecond != nil || r.GPUModel != "" || r.GPUs != 0 ||
		r.RestartSeconds != nil || r.CheckpointBytes != nil || r.CheckpointSeconds != nil
}

// Parse reads a report: a plain number (the work units done) or a JSON object with "done"
// and the optional measured fields. Every number must be finite and >= 0, gpus a whole number;
// unknown fields are refused. Errors name the field and the fix.
func Parse(body []byte) (Report, error) {
	text := strings.TrimSpace(string(body))
	var r Report
	switch {
	case text == "":
		return Report{}, fmt.Errorf("empty body: %s", Usage)
	case strings.HasPrefix(text, "{"):
		var v struct {
			Done                *float64 `json:"done"`
			ThroughputPerSecond *float64 `json:"throughput_per_second"`
			GPUModel            *string  `json:"gpu_model"`
			GPUs                *float64 `json:"gpus"`
			RestartSeconds      *float64 `json:"restart_seconds"`
			CheckpointBytes     *float64 `json:"checkpoint_bytes"`
			CheckpointSeconds   *float64 `json:"checkpoint_seconds"`
			Alloc               *string  `json:"alloc"`
			JobCreateIndex      *uint64  `json:"job_create_index"`
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(text)))
		dec.DisallowUnknownFields()
		err := dec.Decode(&v)
		if err == nil && dec.More() {
			err = errors.New("text after the object")
		}
		if err != nil {
			return Report{}, fmt.Errorf("body %q is not a JSON progress report (%v): %s", text, err, Usage)
		}
		if v.Done == nil {
			return Report{}, fmt.Errorf("body %q has no field \"done\": %s", text, Usage)
		}
		r.Done = *v.Done
		r.ThroughputPerSecond, r.RestartSeconds = v.ThroughputPerSecond, v.RestartSeconds
		r.CheckpointBytes, r.CheckpointSeconds = v.CheckpointBytes, v.CheckpointSeconds
		if v.GPUModel != nil {
			r.GPUModel = *v.GPUModel
		}
		if v.Alloc != nil {
			r.Alloc = *v.Alloc
		}
		if v.JobCreateIndex != nil {
			r.JobCreateIndex = *v.JobCreateIndex
		}
		if v.GPUs != nil {
			if g := *v.GPUs; g != math.Trunc(g) || g < 0 || g > math.MaxInt32 {
				return Report{}, fmt.Errorf("gpus = %g is not a whole number >= 0: %s", g, Usage)
			}
			r.GPUs = int(*v.GPUs)
		}
	default:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return Report{}, fmt.Errorf("body %q is not a number: %s", text, Usage)
		}
		r.Done = x
	}
	return r, r.Validate()
}

// Validate checks that every number in r is finite and >= 0, naming the first that is not.
func (r Report) Validate() error {
	fields := []struct {
		name string
		v    *float64
	}{
		{"done", &r.Done}, {"throughput_per_second", r.ThroughputPerSecond}, {"restart_seconds", r.RestartSeconds},
		{"checkpoint_bytes", r.CheckpointBytes}, {"checkpoint_seconds", r.CheckpointSeconds},
	}
	for _, f := range fields {
		if f.v != nil && (!(*f.v >= 0) || math.IsInf(*f.v, 0)) {
			return fmt.Errorf("%s = %g is not a finite number >= 0: %s", f.name, *f.v, Usage)
		}
	}
	if r.GPUs < 0 {
		return fmt.Errorf("gpus = %d is not a whole number >= 0: %s", r.GPUs, Usage)
	}
	return nil
}

// Float returns a pointer to v, for the optional fields.
func Float(v float64) *float64 { return &v }
