package allocator_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// roundJSON is a valid one-job round with a fairness record, for tests
// that break one field of it.
const roundJSON = `{"round": 5,
 "models": [{"name": "A", "gpus": 2}],
 "jobs": [{"id": "x", "arrival": 1, "gpus": 1, "work": %WORK%, "throughput": {"A": %THETA%}}],
 "fairness": {"round": 5, "jobs": {"x": {"arrival": %ARR%, "work": %FWORK%, "tau": %TAU%, "rho": %RHO%}}},
 "config": %CONFIG%}`

func round(edit map[string]string) string {
	vals := map[string]string{"%WORK%": "10", "%THETA%": "2", "%ARR%": "1", "%FWORK%": "10", "%TAU%": "6", "%RHO%": "0.5", "%CONFIG%": "{}"}
	for k, v := range edit {
		vals[k] = v
	}
	s := roundJSON
	for k, v := range vals {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// TestReadInstanceRanges: each value the engine multiplies or divides is
// checked against its range, and the error names the job and the field.
func TestReadInstanceRanges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      map[string]string
		id, field string
		inMsg     string
	}{
		{"issue 13: negative rho", map[string]string{"%RHO%": "-1e300"}, "x", "fairness.jobs.rho", "[0, 1e+100]"},
		{"issue 13: tau before arrival", map[string]string{"%TAU%": "0"}, "x", "fairness.jobs.tau", ">= the job's arrival 1"},
		{"issue 13: huge work", map[string]string{"%WORK%": "1e308", "%FWORK%": "1e308", "%THETA%": "1e-308"}, "x", "work", "at most 1e+15"},
		{"ratio: work over a tiny throughput", map[string]string{"%WORK%": "1e15", "%FWORK%": "1e15", "%THETA%": "1e-3"}, "x", `throughput["A"]`, "rounds to finish"},
		{"ratio: tiny work, fast model", map[string]string{"%WORK%": "1e-300", "%FWORK%": "1e-300", "%THETA%": "1"}, "x", `throughput["A"]`, "rounds to finish"},
		{"huge throughput", map[string]string{"%THETA%": "1e16"}, "x", `throughput["A"]`, "[0, 1e+15]"},
		{"huge rho", map[string]string{"%RHO%": "1e200"}, "x", "fairness.jobs.rho", "[0, 1e+100]"},
		{"fairness arrival differs", map[string]string{"%ARR%": "0"}, "x", "fairness.jobs.arrival", "job's arrival 1"},
		{"fairness work differs", map[string]string{"%FWORK%": "11"}, "x", "fairness.jobs.work", "job's work 10"},
		{"weight too large", map[string]string{"%CONFIG%": `{"weights": {"jct": 1e300}}`}, "config", "config.weights.jct", "[0, 1e+06]"},
		{"tiny round", map[string]string{"%CONFIG%": `{"round_seconds": 1e-300}`}, "config", "config.round_seconds", "in seconds"},
		{"tiny transfer rate", map[string]string{"%CONFIG%": `{"transfer_gbps": 1e-300}`}, "config", "config.transfer_gbps", "Gbit/s"},
		{"negative restart", map[string]string{"%CONFIG%": `{"restart_seconds": -1}`}, "config", "config.restart_seconds", "[0, 1e+09]"},
		{"gap tolerance too large", map[string]string{"%CONFIG%": `{"gap_tolerance": 2}`}, "config", "config.gap_tolerance", "in [0, 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := allocator.ReadInstanceString(round(tc.edit))
			var fe *allocator.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("ReadInstance = %v, want a *FieldError", err)
			}
			if fe.ID != tc.id || fe.Field != tc.field || !strings.Contains(err.Error(), tc.inMsg) {
				t.Fatalf("got %s %q field %q: %v; want %q field %q with %q", fe.Kind, fe.ID, fe.Field, err, tc.id, tc.field, tc.inMsg)
			}
		})
	}
	if _, err := allocator.ReadInstanceString(round(nil)); err != nil {
		t.Fatalf("the unedited fixture is rejected: %v", err)
	}
}

func TestValidateFairnessRecordOfNoJob(t *testing.T) {
	b := newInstance().job("a", 1, 5, both(1, 1))
	b.in.Fairness = fairness.State{Jobs: map[string]fairness.JobState{"ghost": {Tau: 1}}}
	var fe *allocator.FieldError
	if err := b.in.Validate(); !errors.As(err, &fe) || fe.ID != "ghost" || fe.Field != "fairness.jobs.id" {
		t.Fatalf("Validate = %v, want a *FieldError naming record \"ghost\"", err)
	}
}

// TestExtremesStayFinite prices and solves instances at the corners of
// every range: each term, the objective and the JSON are finite.
func TestExtremesStayFinite(t *testing.T) {
	cfg := allocator.Config{
		Weights:      allocator.Weights{JCT: allocator.MaxWeight, Volume: allocator.MaxWeight, Switch: allocator.MaxWeight, Fairness: allocator.MaxWeight},
		Volume:       allocator.VolumeTotal,
		RoundSeconds: allocator.MinRoundSeconds, TransferGbps: allocator.MinTransferGbps, RestartSeconds: allocator.MaxRestartSeconds,
		PricePreemption: true,
	}
	in := &allocator.Instance{
		Round:  allocator.MaxRound,
		Models: []allocator.Model{{Name: "A", GPUs: allocator.MaxJobGPUs}, {Name: "B", GPUs: allocator.MaxJobGPUs}},
		Jobs: []allocator.Job{
			{ID: "slow", GPUs: allocator.MaxJobGPUs, Work: allocator.MaxWork, StateGB: allocator.MaxStateGB, LastModel: "B", Running: true,
				Throughput: map[string]float64{"A": allocator.MaxWork / allocator.MaxWorkRatio, "B": 1}},
			{ID: "fast", GPUs: 1, Work: allocator.MaxThroughput / allocator.MaxWorkRatio, StateGB: allocator.MaxStateGB, LastModel: "A",
				Throughput: map[string]float64{"A": allocator.MaxThroughput, "B": 1}},
		},
		Fairness: fairness.State{Jobs: map[string]fairness.JobState{"slow": {Rho: allocator.MaxRho}, "fast": {Rho: allocator.MaxRho}}},
		Config:   cfg,
	}
	d, err := allocator.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkFinite(t, d)
}

// checkFinite fails unless every number of d is finite and d encodes as JSON.
func checkFinite(t *testing.T, d *allocator.Decision) {
	t.Helper()
	for _, v := range []float64{d.Objective, d.Bound, d.Gap} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("decision objective %v bound %v gap %v: not finite", d.Objective, d.Bound, d.Gap)
		}
	}
	for _, j := range d.Jobs {
		for _, o := range append([]allocator.Terms{j.Chosen}, j.Options()...) {
			for _, v := range []float64{o.Wait, o.Volume, o.Switch, o.Credit, o.Cost, o.Throughput} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("job %q option %+v: a term is not finite", j.ID, o)
				}
			}
		}
	}
	if _, err := json.Marshal(d); err != nil {
		t.Fatalf("decision does not encode as JSON: %v", err)
	}
}
