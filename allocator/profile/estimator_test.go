package profile

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// newEst builds an estimator or fails the test.
func newEst(t testing.TB, p *Priors, opts ...Option) *Estimator {
	t.Helper()
	e, err := New(p, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// world is a synthetic cluster whose true rates are exactly log-additive
// plus an optional job-by-model residual, from a replayable seed.
type world struct {
	models []string
	a      []float64 // job factors
	b      []float64 // model factors
	resid  [][]float64
}

func newWorld(seed uint64, jobs, models int, residSD float64) world {
	r := rand.New(rand.NewPCG(seed, 1))
	w := world{}
	for m := 0; m < models; m++ {
		w.models = append(w.models, fmt.Sprintf("GPU-%d", m))
		w.b = append(w.b, r.NormFloat64())
	}
	for j := 0; j < jobs; j++ {
		w.a = append(w.a, 3+2*r.NormFloat64())
		row := make([]float64, models)
		for m := range row {
			row[m] = residSD * r.NormFloat64()
		}
		w.resid = append(w.resid, row)
	}
	return w
}

func (w world) rate(j, m int) float64 { return math.Exp(w.a[j] + w.b[m] + w.resid[j][m]) }
func jobID(j int) JobID               { return JobID(fmt.Sprintf("job-%03d", j)) }

// TestMeasuredConvergesToTruth: repeated noisy measurements of a pair
// converge to its true rate, whatever the estimate was before.
func TestMeasuredConvergesToTruth(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noiseSD float64
		n       int
		tol     float64 // relative
	}{
		{"exact measurements", 0, 1, 1e-12},
		{"5% noise, 30 measurements", 0.05, 30, 0.15},
		{"20% noise, 60 measurements", 0.2, 60, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			w := newWorld(11, 20, 3, 0.2)
			e := newEst(t, GavelPriors())
			for j := range w.a {
				must(t, e.AddJob(Job{ID: jobID(j), GPUs: 1}))
				must(t, e.Measure(jobID(j), w.models[0], w.rate(j, 0)))
			}
			truth := w.rate(3, 2)
			for k := 0; k < tc.n; k++ {
				must(t, e.Measure(jobID(3), w.models[2], truth*math.Exp(tc.noiseSD*r.NormFloat64())))
			}
			got := e.Throughput(jobID(3), w.models[2])
			if got.Source != SourceMeasured || got.Measurements != tc.n {
				t.Fatalf("source %v with %d measurements, want measured with %d", got.Source, got.Measurements, tc.n)
			}
			if rel := RelativeError(got.UnitsPerRound, truth); rel > tc.tol {
				t.Errorf("measured %g, truth %g: relative error %.3g > %g", got.UnitsPerRound, truth, rel, tc.tol)
			}
		})
	}
}

// TestEstimateConvergesWithJobs: when rates are exactly log-additive, the
// estimate of a job on a model it never ran on converges to the truth as
// more jobs are measured on both models (the weak priors' shrinkage fades),
// and its reported sd shrinks to the interaction floor.
func TestEstimateConvergesWithJobs(t *testing.T) {
	w := newWorld(5, 200, 4, 0)
	prev := math.Inf(1)
	for _, tc := range []struct {
		jobs   int
		maxErr float64
	}{{2, 0.1}, {10, 0.01}, {200, 1e-3}} {
		jobs := tc.jobs
		e := newEst(t, nil)
		must(t, e.AddModels(w.models...))
		for j := 0; j < jobs; j++ {
			must(t, e.AddJob(Job{ID: jobID(j), GPUs: 1}))
			for m := range w.models {
				if j == 0 && m > 0 {
					continue // job 0 runs only on model 0
				}
				must(t, e.Measure(jobID(j), w.models[m], w.rate(j, m)))
			}
		}
		for m := 1; m < len(w.models); m++ {
			got := e.Throughput(jobID(0), w.models[m])
			if got.Source != SourceEstimated {
				t.Fatalf("%d jobs: job 0 on %s: source %v, want estimated", jobs, w.models[m], got.Source)
			}
			rel := RelativeError(got.UnitsPerRound, w.rate(0, m))
			if rel > tc.maxErr {
				t.Errorf("%d jobs: job 0 on %s: estimate %g, truth %g (error %.2g)", jobs, w.models[m], got.UnitsPerRound, w.rate(0, m), rel)
			}
			if got.LogSD > prev+1e-12 || got.LogSD < DefaultInteractionLogSD {
				t.Errorf("%d jobs: log sd %g: want it to shrink with more jobs (was %g) but stay >= the interaction sd %g", jobs, got.LogSD, prev, DefaultInteractionLogSD)
			}
			if m == len(w.models)-1 {
				prev = got.LogSD
			}
		}
	}
}

// TestSourceNeverLies is a property test over random sequences of
// operations: a value is measured exactly when the pair has measurements
// and no declaration, declared exactly when declared, and anything else is
// an estimate (or prior, or unknown); an estimate's value is never the
// pair's own measurement.
func TestSourceNeverLies(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		models := []string{"Tesla V100-SXM2-16GB", "Tesla K80", "NVIDIA A100", "Tesla T4"}
		e := newEst(t, GavelPriors())
		must(t, e.AddModels(models[:2]...))
		measured := map[mismatchKey]int{}
		declared := map[mismatchKey]bool{}
		for step := 0; step < 200; step++ {
			j := JobID(fmt.Sprintf("j%d", r.IntN(8)))
			m := models[r.IntN(len(models))]
			must(t, e.AddJob(Job{ID: j, Family: []string{"", "ResNet-50", "LM"}[int(j[1]-'0')%3], GPUs: 1 << (int(j[1]-'0') % 3)}))
			k := mismatchKey{j, m}
			switch r.IntN(10) {
			case 0:
				must(t, e.Declare(j, m, math.Exp(r.NormFloat64())))
				declared[k] = true
			case 1:
				e.Forget(j)
				for kk := range measured {
					if kk.job == j {
						delete(measured, kk)
					}
				}
				for kk := range declared {
					if kk.job == j {
						delete(declared, kk)
					}
				}
			default:
				must(t, e.Measure(j, m, math.Exp(r.NormFloat64())))
				measured[k]++
			}
			for q := 0; q < 8; q++ {
				for _, mm := range models {
					kk := mismatchKey{JobID(fmt.Sprintf("j%d", q)), mm}
					got := e.Throughput(kk.job, mm)
					switch {
					case declared[kk]:
						if got.Source != SourceDeclared {
							t.Fatalf("seed %d step %d: %v declared, source %v", seed, step, kk, got.Source)
						}
					case measured[kk] > 0:
						if got.Source != SourceMeasured || got.Measurements != measured[kk] {
							t.Fatalf("seed %d step %d: %v measured %d times, got %+v", seed, step, kk, measured[kk], got)
						}
					default:
						if got.Source == SourceMeasured || got.Source == SourceDeclared {
							t.Fatalf("seed %d step %d: %v has no data of its own, source %v", seed, step, kk, got.Source)
						}
						if got.Source != SourceUnknown && !(got.UnitsPerRound > 0 && got.LogSD > 0) {
							t.Fatalf("seed %d step %d: %v estimate %+v: want a positive rate and sd", seed, step, kk, got)
						}
					}
				}
			}
		}
	}
}

// TestMeasuredBeatsPrior: a measurement replaces the prior's value for its
// pair, and the jobs measured on a model pull that model's factor away from
// a wrong prior.
func TestMeasuredBeatsPrior(t *testing.T) {
	const v100, k80 = "Tesla V100-SXM2-16GB", "Tesla K80"
	// Gavel's prior says a K80 is ~0.3 V100; this cluster's K80 is 0.8.
	const trueRatio = 0.8
	for _, tc := range []struct {
		name     string
		measured int // jobs measured on both models
		src      Source
		maxErr   float64 // of the new job's K80 estimate
	}{
		{"prior only", 0, SourcePrior, 0.7},
		{"one job measured", 1, SourceEstimated, 0.6},
		{"twenty jobs measured", 20, SourceEstimated, 0.2},
		{"two hundred jobs measured", 200, SourceEstimated, 0.03},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEst(t, GavelPriors())
			must(t, e.AddModels(v100, k80))
			for j := 0; j < tc.measured; j++ {
				rate := float64(10 + j)
				must(t, e.AddJob(Job{ID: jobID(j), GPUs: 1}))
				must(t, e.Measure(jobID(j), v100, rate))
				must(t, e.Measure(jobID(j), k80, trueRatio*rate))
			}
			must(t, e.AddJob(Job{ID: "new", GPUs: 1}))
			must(t, e.Measure("new", v100, 100))
			got := e.Throughput("new", k80)
			if got.Source != tc.src {
				t.Errorf("source %v, want %v", got.Source, tc.src)
			}
			if rel := RelativeError(got.UnitsPerRound, trueRatio*100); rel > tc.maxErr {
				t.Errorf("K80 estimate %g, truth %g: error %.2f > %g", got.UnitsPerRound, trueRatio*100, rel, tc.maxErr)
			}
			if tc.measured == 0 {
				return
			}
			own := e.Throughput(jobID(0), k80)
			if own.Source != SourceMeasured || RelativeError(own.UnitsPerRound, trueRatio*10) > 1e-12 {
				t.Errorf("job 0 on K80 = %+v, want its measurement %g", own, trueRatio*10)
			}
		})
	}
}

func TestEMA(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alpha float64
		in    []float64
		want  float64
		sd    float64 // in units of the measurement sd
	}{
		{"one", 0.5, []float64{4}, 4, 1},
		{"two, alpha 0.5", 0.5, []float64{4, 16}, 8, math.Sqrt(0.5)},
		{"three, alpha 0.5", 0.5, []float64{4, 16, 16}, math.Exp(0.25*math.Log(4) + 0.75*math.Log(16)), math.Sqrt(0.375)},
		{"alpha 1 keeps the last", 1, []float64{4, 16, 2}, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEst(t, nil, WithEMAAlpha(tc.alpha))
			must(t, e.AddJob(Job{ID: "j", GPUs: 1}))
			for _, v := range tc.in {
				must(t, e.Measure("j", "m", v))
			}
			got := e.Throughput("j", "m")
			if math.Abs(got.UnitsPerRound-tc.want) > 1e-9*tc.want || math.Abs(got.LogSD-tc.sd*DefaultMeasurementLogSD) > 1e-12 {
				t.Errorf("got %g (sd %g), want %g (sd %g)", got.UnitsPerRound, got.LogSD, tc.want, tc.sd*DefaultMeasurementLogSD)
			}
		})
	}
}

func TestDeclaredOverrideAndMismatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		declared float64
		measured []float64
		warn     bool
		ratio    float64
	}{
		{"agrees", 10, []float64{10}, false, 0},
		{"within 1.5x", 10, []float64{7}, false, 0},
		{"declared 2x too high", 10, []float64{5}, true, 2},
		{"declared 4x too low", 10, []float64{40}, true, 0.25},
		{"measurements come back", 10, []float64{5, 10, 10, 10, 10}, false, 0},
		{"declared only", 10, nil, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEst(t, nil)
			must(t, e.AddJob(Job{ID: "j", GPUs: 2}))
			must(t, e.Declare("j", "A100", tc.declared))
			for _, v := range tc.measured {
				must(t, e.Measure("j", "A100", v))
			}
			got := e.Throughput("j", "A100")
			if got.Source != SourceDeclared || got.UnitsPerRound != tc.declared || got.LogSD != 0 {
				t.Errorf("Throughput = %+v, want the declared %g, exact", got, tc.declared)
			}
			ws := e.Mismatches()
			if (len(ws) == 1) != tc.warn || len(ws) > 1 {
				t.Fatalf("warnings %v, want warn=%v", ws, tc.warn)
			}
			if tc.warn {
				w := ws[0]
				if w.Job != "j" || w.Model != "A100" || math.Abs(w.Ratio()-tc.ratio) > 1e-9 || !strings.Contains(w.String(), `job "j" on "A100"`) {
					t.Errorf("warning %+v (%s): want job j, model A100, ratio %g", w, w, tc.ratio)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	e := newEst(t, nil)
	must(t, e.AddJob(Job{ID: "j", GPUs: 1}))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown job", e.Measure("nope", "m", 1), "add it first"},
		{"zero rate", e.Measure("j", "m", 0), "units per round = 0"},
		{"NaN rate", e.Measure("j", "m", math.NaN()), "finite number > 0"},
		{"infinite rate", e.Declare("j", "m", math.Inf(1)), "finite number > 0"},
		{"empty model", e.Measure("j", "", 1), "GPU model"},
		{"no GPUs", e.AddJob(Job{ID: "k"}), "GPUs = 0"},
		{"empty ID", e.AddJob(Job{GPUs: 1}), "job ID is empty"},
		{"gang change", e.AddJob(Job{ID: "j", GPUs: 2}), "forget the job first"},
		{"learn unknown job", func() error { _, err := e.LearnModel("nope", map[string]int{"m": 1}); return err }(), "add it first"},
		{"learn no models", func() error { _, err := e.LearnModel("j", nil); return err }(), "no GPU models"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, tc.err, tc.want)
		}
	}
	for _, o := range []Option{WithEMAAlpha(0), WithEMAAlpha(1.5), WithMismatchRatio(1), WithInteractionLogSD(0), WithMeasurementLogSD(math.NaN())} {
		if _, err := New(nil, o); err == nil {
			t.Errorf("New accepted a bad option")
		}
	}
	if got := e.Throughput("j", "never-seen"); got.Source != SourceUnknown {
		t.Errorf("job without data: %+v, want unknown", got)
	}
}

func TestLearnModel(t *testing.T) {
	const v100, p100, k80 = "Tesla V100-SXM2-16GB", "Tesla P100-PCIE-16GB", "Tesla K80"
	for _, tc := range []struct {
		name   string
		priors *Priors
		job    Job
		free   map[string]int
		want   string
		reason string
	}{
		{"fastest by the prior", GavelPriors(), Job{ID: "j", GPUs: 1}, map[string]int{v100: 1, p100: 4, k80: 8}, v100, ReasonFastest},
		{"fastest lacks GPUs", GavelPriors(), Job{ID: "j", GPUs: 2}, map[string]int{v100: 1, p100: 4, k80: 8}, p100, ReasonFastest},
		{"family prior: P100 beats V100 for Recommendation", GavelPriors(), Job{ID: "j", Family: "Recommendation", GPUs: 1}, map[string]int{v100: 4, p100: 4, k80: 4}, p100, ReasonFastest},
		{"no priors: most free", nil, Job{ID: "j", GPUs: 1}, map[string]int{v100: 1, p100: 4, k80: 2}, p100, ReasonMostFree},
		{"nothing fits: wait on the fastest", GavelPriors(), Job{ID: "j", GPUs: 8}, map[string]int{v100: 1, p100: 4, k80: 2}, v100, ReasonWait},
		{"unknown model loses to a known one", GavelPriors(), Job{ID: "j", GPUs: 1}, map[string]int{"Tesla T4": 8, k80: 1}, k80, ReasonFastest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEst(t, tc.priors)
			must(t, e.AddModels(sortedKeys(tc.free)...))
			must(t, e.AddJob(tc.job))
			got, err := e.LearnModel(tc.job.ID, tc.free)
			if err != nil {
				t.Fatal(err)
			}
			if got.Model != tc.want || got.Reason != tc.reason || got.FreeGPUs != tc.free[tc.want] {
				t.Errorf("LearnModel = %+v, want %q (%s)", got, tc.want, tc.reason)
			}
		})
	}
}

// TestGangFactorLearned: 8-GPU jobs scale differently on one model; the
// gang factor learns it without moving 1-GPU estimates.
func TestGangFactorLearned(t *testing.T) {
	e := newEst(t, nil)
	for j := 0; j < 30; j++ {
		for _, gpus := range []int{1, 8} {
			id := JobID(fmt.Sprintf("%d/%d", j, gpus))
			must(t, e.AddJob(Job{ID: id, GPUs: gpus}))
			base := float64(10 + j)
			fast := 2.0 // model B is 2x model A on one GPU
			if gpus == 8 {
				base, fast = base*6, 0.5 // but 0.5x with 8 (slow interconnect)
			}
			must(t, e.Measure(id, "A", base))
			if j > 0 {
				must(t, e.Measure(id, "B", fast*base))
			}
		}
	}
	for _, tc := range []struct {
		id   JobID
		want float64
	}{{"0/1", 2 * 10}, {"0/8", 0.5 * 60}} {
		got := e.Throughput(tc.id, "B")
		if rel := RelativeError(got.UnitsPerRound, tc.want); got.Source != SourceEstimated || rel > 0.05 {
			t.Errorf("%s on B = %+v, want about %g (error %.2f)", tc.id, got, tc.want, rel)
		}
	}
}

func TestExpectedOptimistic(t *testing.T) {
	for _, tc := range []struct {
		tp             Throughput
		expected, opt1 float64
	}{
		{Throughput{UnitsPerRound: 10}, 10, 10},
		{Throughput{UnitsPerRound: 10, LogSD: 0.5}, 10 * math.Exp(0.125), 10 * math.Exp(0.5)},
	} {
		if got := tc.tp.Expected(); math.Abs(got-tc.expected) > 1e-12 {
			t.Errorf("%+v.Expected() = %g, want %g", tc.tp, got, tc.expected)
		}
		if got := tc.tp.Optimistic(1); math.Abs(got-tc.opt1) > 1e-12 {
			t.Errorf("%+v.Optimistic(1) = %g, want %g", tc.tp, got, tc.opt1)
		}
	}
}

func TestSourceText(t *testing.T) {
	for s := SourceUnknown; s <= SourceDeclared; s++ {
		b, _ := s.MarshalText()
		var back Source
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%v -> %q -> %v (%v)", s, b, back, err)
		}
	}
	var s Source
	if err := s.UnmarshalText([]byte("guessed")); err == nil {
		t.Errorf("UnmarshalText accepted %q", "guessed")
	}
}

// TestUnitInvariance: declaring a job's work in other units (every rate of
// the job times k) scales its estimates by k and changes nobody else's,
// since a_j absorbs the unit.
func TestUnitInvariance(t *testing.T) {
	w := newWorld(21, 12, 3, 0.3)
	build := func(k float64) *Estimator {
		e := newEst(t, GavelPriors())
		must(t, e.AddModels(w.models...))
		for j := range w.a {
			must(t, e.AddJob(Job{ID: jobID(j), Family: []string{"A", "B"}[j%2], GPUs: 1 + j%3}))
			for m := range w.models {
				if (j+m)%3 == 0 {
					continue // every job misses one model
				}
				scale := 1.0
				if j == 4 {
					scale = k
				}
				must(t, e.Measure(jobID(j), w.models[m], scale*w.rate(j, m)))
			}
		}
		return e
	}
	base, scaled := build(1), build(1000)
	// The job factor's tiny prior (jobPriorPrecision, centred on 0) is the
	// only thing that sees the unit: it moves estimates by ~1e-8.
	const tol = 1e-6
	for j := range w.a {
		for _, m := range w.models {
			a, b := base.Throughput(jobID(j), m), scaled.Throughput(jobID(j), m)
			want := a.UnitsPerRound
			if j == 4 {
				want *= 1000
			}
			if a.Source != b.Source || math.Abs(b.UnitsPerRound-want) > tol*want || math.Abs(a.LogSD-b.LogSD) > tol {
				t.Errorf("job %d on %s: %+v with the job in other units, want %g (from %+v)", j, m, b, want, a)
			}
		}
	}
}
