package allocator_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/instancegen"
	"github.com/nomad-fft/nomad-fft/fairness"
)

// instance is a fixture builder: a two-model cluster and jobs added with
// job(...), so each test states only what it changes.
type instance struct{ in allocator.Instance }

func newInstance() *instance {
	return &instance{in: allocator.Instance{
		Round:  10,
		Config: allocator.DefaultConfig(),
		Models: []allocator.Model{
			{Name: "V100", GPUs: 4, MemoryGB: 16},
			{Name: "K80", GPUs: 4, MemoryGB: 12},
		},
	}}
}

func (b *instance) job(id string, gpus int, work float64, tput map[string]float64, edit ...func(*allocator.Job)) *instance {
	j := allocator.Job{ID: id, Arrival: 2, GPUs: gpus, Work: work, Throughput: tput}
	for _, e := range edit {
		e(&j)
	}
	b.in.Jobs = append(b.in.Jobs, j)
	return b
}

func both(v, k float64) map[string]float64 { return map[string]float64{"V100": v, "K80": k} }

func TestValidateNamesJobAndField(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b         *instance
		job, fld  string
		wantInMsg string
	}{
		{"negative work", newInstance().job("a", 1, -5, both(1, 1)), "a", "work", "> 0"},
		{"NaN work", newInstance().job("a", 1, math.NaN(), both(1, 1)), "a", "work", "finite"},
		{"negative throughput", newInstance().job("a", 1, 5, both(-1, 1)), "a", `throughput["V100"]`, "in [0, "},
		{"NaN throughput", newInstance().job("a", 1, 5, both(math.NaN(), 1)), "a", `throughput["V100"]`, "finite"},
		{"zero gpus", newInstance().job("a", 0, 5, both(1, 1)), "a", "gpus", "in [1, "},
		{"unknown model", newInstance().job("a", 1, 5, map[string]float64{"A100": 2}), "a", `throughput["A100"]`, "unknown model"},
		{"fits no model: too many gpus", newInstance().job("a", 8, 5, both(1, 1)), "a", "throughput", "fits no model"},
		{"fits no model: memory", newInstance().job("a", 1, 5, both(1, 1), func(j *allocator.Job) { j.MemoryGB = 40 }), "a", "throughput", "fits no model"},
		{"duplicate id", newInstance().job("a", 1, 5, both(1, 1)).job("a", 1, 5, both(1, 1)), "a", "id", "unique"},
		{"arrival in the future", newInstance().job("a", 1, 5, both(1, 1), func(j *allocator.Job) { j.Arrival = 11 }), "a", "arrival", "current round"},
		{"unknown last model", newInstance().job("a", 1, 5, both(1, 1), func(j *allocator.Job) { j.LastModel = "T4" }), "a", "last_model", "model of the instance"},
		{"negative state", newInstance().job("a", 1, 5, both(1, 1), func(j *allocator.Job) { j.StateGB = -1 }), "a", "state_gb", "in [0, "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := allocator.Decide(context.Background(), &tc.b.in)
			var fe *allocator.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Decide error = %v, want a *FieldError", err)
			}
			if fe.ID != tc.job || fe.Field != tc.fld || !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Fatalf("got job %q field %q message %q; want job %q field %q message containing %q",
					fe.ID, fe.Field, err, tc.job, tc.fld, tc.wantInMsg)
			}
		})
	}
}

func TestValidateConfigAndModels(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      func(*allocator.Instance)
		id, field string
	}{
		{"no models", func(in *allocator.Instance) { in.Models = nil }, "", "models"},
		{"unnamed model", func(in *allocator.Instance) { in.Models[1].Name = "" }, "#1", "name"},
		{"duplicate model", func(in *allocator.Instance) { in.Models[1].Name = "V100" }, "V100", "name"},
		{"negative capacity", func(in *allocator.Instance) { in.Models[0].GPUs = -1 }, "V100", "gpus"},
		{"memory not a number", func(in *allocator.Instance) { in.Models[0].MemoryGB = math.NaN() }, "V100", "memory_gb"},
		{"negative weight", func(in *allocator.Instance) { in.Config.Weights.Fairness = -1 }, "config", "config.weights.fairness"},
		{"zero round", func(in *allocator.Instance) { in.Config.RoundSeconds = 0 }, "config", "config.round_seconds"},
		{"bad volume term", func(in *allocator.Instance) { in.Config.Volume = "half" }, "config", "config.volume_term"},
		{"gap tolerance of 1", func(in *allocator.Instance) { in.Config.GapTolerance = 1 }, "config", "config.gap_tolerance"},
		{"negative gap tolerance", func(in *allocator.Instance) { in.Config.GapTolerance = -1e-4 }, "config", "config.gap_tolerance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newInstance().job("a", 1, 5, both(1, 1))
			tc.edit(&b.in)
			var fe *allocator.FieldError
			if err := b.in.Validate(); !errors.As(err, &fe) || fe.Field != tc.field || fe.ID != tc.id {
				t.Fatalf("Validate = %v, want a *FieldError on %q of %q", err, tc.field, tc.id)
			}
		})
	}
}

// TestTerms checks every cost term against the formulas of fft.md.
func TestTerms(t *testing.T) {
	cfg := allocator.DefaultConfig()
	j := &allocator.Job{ID: "a", Arrival: 4, GPUs: 2, Work: 100, Done: 40, StateGB: 5, LastModel: "K80",
		Throughput: both(4, 1)}
	v100 := &allocator.Model{Name: "V100", GPUs: 4}
	got := cfg.Terms(j, v100, 10, 0.5)
	// wait = (10-4)*4/100; volume = 2*100/4; switch = 2*(30 + 5*8/10)/300;
	// credit = 0.5*4.
	want := allocator.Terms{Model: "V100", Throughput: 4, Wait: 0.24, Volume: 50, Switch: 2 * 34.0 / 300, Credit: 2}
	want.Cost = want.Wait + want.Volume + want.Switch - want.Credit
	if !close(got, want) {
		t.Fatalf("Terms = %+v, want %+v", got, want)
	}
	cfg.Volume = allocator.VolumeRemaining
	if got := cfg.Terms(j, v100, 10, 0.5); math.Abs(got.Volume-2*60.0/4) > 1e-12 {
		t.Fatalf("remaining-work volume = %v, want %v", got.Volume, 2*60.0/4)
	}
	cfg.Weights = allocator.Weights{JCT: 2, Volume: 0, Switch: 0, Fairness: 3}
	if got := cfg.Terms(j, v100, 10, 0.5); math.Abs(got.Cost-(0.48-6)) > 1e-12 {
		t.Fatalf("weighted cost = %v, want %v", got.Cost, 0.48-6)
	}
	if s := cfg.SwitchPenalty(j, "K80"); s != 0 {
		t.Fatalf("staying on the last model costs %v, want 0", s)
	}
}

func close(a, b allocator.Terms) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) <= 1e-12*math.Max(1, math.Abs(y)) }
	return a.Model == b.Model && eq(a.Throughput, b.Throughput) && eq(a.Wait, b.Wait) && eq(a.Volume, b.Volume) &&
		eq(a.Switch, b.Switch) && eq(a.Credit, b.Credit) && eq(a.Cost, b.Cost)
}

// TestWorkConserving: no decision leaves a model with enough idle GPUs for
// a waiting job that may run there.
func TestWorkConserving(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for it := 0; it < 300; it++ {
		spec := instancegen.Spec{Jobs: 1 + r.IntN(60), Models: 1 + r.IntN(4), GPUs: 4 + r.IntN(40)}
		in := instancegen.Generate(r, spec)
		in.Jobs = fitting(in)
		if len(in.Jobs) == 0 {
			continue
		}
		d, err := allocator.Decide(context.Background(), in)
		if err != nil {
			t.Fatalf("instance %d: %v", it, err)
		}
		checkWorkConserving(t, it, in, d)
	}
}

// checkWorkConserving fails the test if decision d overfills a model or
// leaves one with enough idle GPUs for a waiting job allowed on it.
func checkWorkConserving(t *testing.T, it int, in *allocator.Instance, d *allocator.Decision) {
	t.Helper()
	idle := map[string]int{}
	for _, m := range in.Models {
		idle[m.Name] = m.GPUs - d.Usage[m.Name]
		if idle[m.Name] < 0 {
			t.Fatalf("instance %d: model %s over capacity", it, m.Name)
		}
	}
	for k, jd := range d.Jobs {
		if jd.Model != "" {
			continue
		}
		for _, o := range jd.Options() {
			if idle[o.Model] >= in.Jobs[k].GPUs {
				t.Fatalf("instance %d: job %s (%d GPUs) waits while %s has %d idle GPUs",
					it, jd.ID, in.Jobs[k].GPUs, o.Model, idle[o.Model])
			}
		}
	}
}

// fitting drops jobs that fit no model of the instance (the generator can
// make some on tiny clusters; Decide rightly rejects them).
func fitting(in *allocator.Instance) []allocator.Job {
	var out []allocator.Job
	for _, j := range in.Jobs {
		probe := *in
		probe.Jobs = []allocator.Job{j}
		if probe.Validate() == nil {
			out = append(out, j)
		}
	}
	return out
}

func TestDecideExplainsWaitingJobs(t *testing.T) {
	b := newInstance().
		job("big", 4, 10, both(4, 1)).
		job("small", 4, 10, both(4, 1), func(j *allocator.Job) { j.Done = 10 })
	b.in.Models[1].GPUs = 0
	b.in.Fairness = fairness.State{Jobs: map[string]fairness.JobState{"big": {Rho: 2}}}
	d, err := allocator.Decide(context.Background(), &b.in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Jobs[0].Model != "V100" || d.Jobs[0].Rho != 2 || d.Jobs[0].Chosen.Model != "V100" {
		t.Fatalf("big: %+v, want V100 with rho 2", d.Jobs[0])
	}
	if d.Jobs[1].Model != "" || d.Jobs[1].Reason != allocator.ReasonDone {
		t.Fatalf("small: %+v, want waiting with %q", d.Jobs[1], allocator.ReasonDone)
	}
}

func TestExampleRoundDecodes(t *testing.T) {
	in, err := allocator.ReadInstanceString(string(allocator.ExampleRound()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := allocator.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if d.MaxUsage != 12 || d.Gap != 0 {
		t.Fatalf("example: K=%d gap=%v, want a full 12-GPU cluster at gap 0", d.MaxUsage, d.Gap)
	}
}

func TestReadInstanceRejectsUnknownFields(t *testing.T) {
	_, err := allocator.ReadInstanceString(`{"round": 1, "models": [{"name": "V100", "gpus": 1}], "jobz": []}`)
	if err == nil || !strings.Contains(err.Error(), "jobz") {
		t.Fatalf("got %v, want an error naming the unknown field", err)
	}
}

// FuzzReadInstance: any input either fails with an error or decides with
// finite terms and a decision that encodes as JSON; the engine never panics.
func FuzzReadInstance(f *testing.F) {
	f.Add(string(allocator.ExampleRound()))
	f.Add(`{"round": 0, "models": [{"name": "a", "gpus": 1}], "jobs": [{"id": "x", "gpus": 1, "work": 1, "throughput": {"a": 1}}]}`)
	f.Add(`{"round": 3, "models": [{"name": "a", "gpus": 2}], "jobs": [{"id": "x", "gpus": 2, "work": 1e308, "throughput": {"a": 1e-308}}]}`)
	f.Add(`{"models": [{"name": "a", "gpus": -1}]}`)
	f.Add(round(nil))
	f.Add(round(map[string]string{"%RHO%": "1e100", "%THETA%": "1e15", "%WORK%": "1", "%FWORK%": "1", "%CONFIG%": `{"weights": {"fairness": 1e6}}`}))
	f.Fuzz(func(t *testing.T, s string) {
		in, err := allocator.ReadInstanceString(s)
		if err != nil {
			return
		}
		if len(in.Jobs)*len(in.Models) > 2000 {
			return // keep each fuzz case fast
		}
		in.Config.NodeLimit = 1000
		d, err := allocator.Decide(context.Background(), in)
		if err != nil {
			var fe *allocator.FieldError
			if errors.As(err, &fe) {
				t.Fatalf("Decide found a field error that ReadInstance accepted: %v", err)
			}
			return
		}
		checkFinite(t, d)
	})
}

// A 2-GPU gang runs on the only two GPUs, and a 1-GPU job waits, far behind
// its fair share and owed a large credit. The work-conserving bound (7)
// forces 2 GPUs busy, so without StarveRounds the small job cannot run
// whatever its credit; with it, K(t) drops to what an assignment running
// the small job keeps busy, and its credit wins the GPU.
func TestStarveRoundsLetsDebtWin(t *testing.T) {
	build := func(starve float64) *allocator.Instance {
		cfg := allocator.DefaultConfig()
		cfg.StarveRounds = starve
		return &allocator.Instance{
			Round:  20,
			Models: []allocator.Model{{Name: "A100", GPUs: 2}},
			Jobs: []allocator.Job{
				{ID: "gang", Arrival: 0, GPUs: 2, Work: 100, Done: 40, Throughput: map[string]float64{"A100": 4}, LastModel: "A100", Running: true},
				{ID: "small", Arrival: 0, GPUs: 1, Work: 100, Done: 5, Throughput: map[string]float64{"A100": 2}, LastModel: "A100"},
			},
			Fairness: fairness.State{Round: 20, Jobs: map[string]fairness.JobState{
				"gang":  {Arrival: 0, Work: 100, Tau: 50},
				"small": {Arrival: 0, Work: 100, Tau: 50, Rho: 50},
			}},
			Config: cfg,
		}
	}
	for _, tc := range []struct {
		starve    float64
		wantSmall bool
		wantK     int
	}{
		{0, false, 2},
		{2, true, 1},
		{1000, false, 2}, // the small job is 35 rounds late, not 1000
	} {
		d, err := allocator.Decide(context.Background(), build(tc.starve))
		if err != nil {
			t.Fatal(err)
		}
		runs := d.Assignment()["small"] == "A100"
		if runs != tc.wantSmall || d.MaxUsage != tc.wantK {
			t.Errorf("StarveRounds %g: small runs %v, K %d; want %v, %d (%v)", tc.starve, runs, d.MaxUsage, tc.wantSmall, tc.wantK, d.Assignment())
		}
	}
}
