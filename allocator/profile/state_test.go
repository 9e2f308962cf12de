package profile

import (
	"math"
	"testing"
)

// The fit is kept while measurements stay within the tolerance, redone when
// one moves beyond it, and what a kept fit returns equals a fresh refit
// within the tolerance's effect; a measured pair is always current.
func TestRefitTolerance(t *testing.T) {
	tests := []struct {
		name      string
		second    float64 // the second measurement of a on V100
		wantRefit bool
	}{
		{"same value keeps the fit", 100, false},
		{"1% keeps the fit", 101, false},
		{"10% refits", 110, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEst(t, GavelPriors())
			must(t, e.AddModels("V100", "K80"))
			must(t, e.AddJob(Job{ID: "a", Family: "ResNet-50", GPUs: 1}))
			must(t, e.AddJob(Job{ID: "b", Family: "ResNet-50", GPUs: 1}))
			must(t, e.Measure("a", "V100", 100))
			must(t, e.Measure("a", "K80", 20))
			must(t, e.Measure("b", "V100", 50))
			before := e.Throughput("b", "K80")
			if !e.Fitted() {
				t.Fatal("no fit after an estimate")
			}
			must(t, e.Measure("a", "V100", tc.second))
			if got := !e.Fitted(); got != tc.wantRefit {
				t.Fatalf("refit pending = %v, want %v", got, tc.wantRefit)
			}
			if got := e.Throughput("a", "V100"); got.Source != SourceMeasured || got.Measurements != 2 {
				t.Fatalf("measured pair = %+v, want measured twice", got)
			}
			if !tc.wantRefit {
				if after := e.Throughput("b", "K80"); after != before {
					t.Fatalf("kept fit changed the estimate: %+v -> %+v", before, after)
				}
				fresh := newEst(t, GavelPriors(), WithRefitLogTolerance(0))
				must(t, fresh.AddModels("V100", "K80"))
				for _, id := range []JobID{"a", "b"} {
					must(t, fresh.AddJob(Job{ID: id, Family: "ResNet-50", GPUs: 1}))
				}
				must(t, fresh.Measure("a", "V100", 100))
				must(t, fresh.Measure("a", "K80", 20))
				must(t, fresh.Measure("b", "V100", 50))
				must(t, fresh.Measure("a", "V100", tc.second))
				if d := math.Abs(math.Log(fresh.Throughput("b", "K80").UnitsPerRound / before.UnitsPerRound)); d > DefaultRefitLogTolerance {
					t.Fatalf("kept estimate is %.3g in log from a refit, want <= %g", d, DefaultRefitLogTolerance)
				}
			}
		})
	}
}

// A job without data whose family and gang size the fit has keeps the fit;
// a new family does not (its prior row changes what LearnModel ranks).
func TestAddJobKeepsFit(t *testing.T) {
	tests := []struct {
		job  Job
		keep bool
	}{
		{Job{ID: "new", Family: "ResNet-50", GPUs: 1}, true},
		{Job{ID: "new", GPUs: 1}, true},
		{Job{ID: "new", Family: "Transformer", GPUs: 1}, false},
		{Job{ID: "new", Family: "ResNet-50", GPUs: 4}, false},
	}
	for _, tc := range tests {
		e := newEst(t, GavelPriors())
		must(t, e.AddModels("V100", "K80"))
		must(t, e.AddJob(Job{ID: "a", Family: "ResNet-50", GPUs: 1}))
		must(t, e.Measure("a", "V100", 100))
		_ = e.Throughput("a", "K80")
		must(t, e.AddJob(tc.job))
		if e.Fitted() != tc.keep {
			t.Errorf("%+v: fit kept = %v, want %v", tc.job, e.Fitted(), tc.keep)
		}
		e.Forget(tc.job.ID)
		if got := e.Throughput("a", "K80"); got.Source != SourcePrior {
			t.Errorf("%+v: after Forget, a on K80 = %+v, want a prior estimate", tc.job, got)
		}
	}
}

// Restore rebuilds exactly what Measured returned, estimates included.
func TestMeasuredRestore(t *testing.T) {
	e := newEst(t, GavelPriors())
	must(t, e.AddModels("V100", "K80"))
	must(t, e.AddJob(Job{ID: "a", Family: "LM", GPUs: 2}))
	for _, v := range []float64{80, 90, 85} {
		must(t, e.Measure("a", "V100", v))
	}
	m, ok := e.Measured("a", "V100")
	if !ok || m.Count != 3 {
		t.Fatalf("Measured = %+v, %v", m, ok)
	}
	if _, ok := e.Measured("a", "K80"); ok {
		t.Fatal("an unmeasured pair has a measurement")
	}
	r := newEst(t, GavelPriors())
	must(t, r.AddModels("V100", "K80"))
	must(t, r.AddJob(Job{ID: "a", Family: "LM", GPUs: 2}))
	must(t, r.Restore("a", "V100", m))
	for _, model := range []string{"V100", "K80"} {
		want, got := e.Throughput("a", model), r.Throughput("a", model)
		if math.Abs(want.UnitsPerRound-got.UnitsPerRound) > 1e-9*want.UnitsPerRound || math.Abs(want.LogSD-got.LogSD) > 1e-12 || want.Source != got.Source {
			t.Errorf("%s: restored %+v, want %+v", model, got, want)
		}
	}
	for _, bad := range []Measurement{{UnitsPerRound: 1, Count: 0, VarFactor: 1}, {UnitsPerRound: 1, Count: 1, VarFactor: 2}, {UnitsPerRound: -1, Count: 1, VarFactor: 1}} {
		if err := r.Restore("a", "K80", bad); err == nil {
			t.Errorf("Restore(%+v) took a bad state", bad)
		}
	}
}
