package metrics

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nomad-fft/nomad-fft/allocator"
	"github.com/nomad-fft/nomad-fft/allocator/policy"
	"github.com/nomad-fft/nomad-fft/allocator/sim"
	"github.com/nomad-fft/nomad-fft/allocator/workload"
)

// TestShockwaveRatios recomputes the per-job finish-time-fairness ratios of
// Shockwave's published 120-job / 32-GPU results from their JCTs and checks
// that our metric code gives the published mean, max and unfair fraction
// for every policy. Shockwave's ratio is JCT / (T_alone * c) with the static
// contention factor c = max(1, jobs/GPUs) = 120/32; T_alone per job is not
// in the file, so it is recovered as the median over the 19 result sets of
// JCT / (rho * c) (the sets agree to the 5 printed digits).
func TestShockwaveRatios(t *testing.T) {
	raw, err := os.ReadFile("testdata/shockwave_tacc_32gpus_results.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Results map[string]struct {
			JCT       []float64 `json:"jct_list"`
			FTF       []float64 `json:"finish_time_fairness_list"`
			WorstFTF  float64   `json:"worst_ftf"`
			UnfairPct float64   `json:"unfair_fraction_pct"`
			AvgJCT    float64   `json:"avg_jct"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	const contention = 120.0 / 32.0
	const threshold = 1.05 // Shockwave's FTF_FAIRNESS_THRESHOLD
	alone := make([]float64, 120)
	for k := range alone {
		var est []float64
		for _, r := range file.Results {
			est = append(est, r.JCT[k]/(r.FTF[k]*contention))
		}
		sort.Float64s(est)
		alone[k] = est[len(est)/2]
	}
	if len(file.Results) != 19 {
		t.Fatalf("result sets = %d, want 19", len(file.Results))
	}
	for name, r := range file.Results {
		iso := make([]float64, len(alone))
		for k := range alone {
			iso[k] = alone[k] * contention
		}
		got := Fairness(Ratios(r.JCT, iso), threshold)
		wantMean := Stats(r.FTF).Mean
		if math.Abs(got.Mean-wantMean) > 1e-4*wantMean {
			t.Errorf("%s: mean FTF = %.6f, want %.6f", name, got.Mean, wantMean)
		}
		if math.Abs(got.Max-r.WorstFTF) > 1e-4*r.WorstFTF {
			t.Errorf("%s: max FTF = %.6f, want %.6f", name, got.Max, r.WorstFTF)
		}
		if math.Abs(got.Unfair*100-r.UnfairPct) > 1e-9 {
			t.Errorf("%s: unfair = %.4f%%, want %.4f%%", name, got.Unfair*100, r.UnfairPct)
		}
		if jct := Stats(r.JCT).Mean; math.Abs(jct-r.AvgJCT) > 1e-6*r.AvgJCT {
			t.Errorf("%s: mean JCT = %v, want %v", name, jct, r.AvgJCT)
		}
	}
}

func TestStats(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		in   []float64
		want Stat
	}{
		{"empty", nil, Stat{nan, nan, nan, nan}},
		{"one", []float64{3}, Stat{3, 3, 3, 3}},
		{"odd", []float64{5, 1, 3}, Stat{3, 3, 4.96, 5}},
		{"even", []float64{4, 1, 2, 3}, Stat{2.5, 2.5, 3.97, 4}},
	} {
		got := Stats(tc.in)
		for _, p := range [][2]float64{{got.Mean, tc.want.Mean}, {got.P50, tc.want.P50}, {got.P99, tc.want.P99}, {got.Max, tc.want.Max}} {
			if !(math.IsNaN(p[0]) && math.IsNaN(p[1])) && math.Abs(p[0]-p[1]) > 1e-9 {
				t.Errorf("%s: Stats(%v) = %+v, want %+v", tc.name, tc.in, got, tc.want)
				break
			}
		}
	}
}

func TestFairness(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rho       []float64
		threshold float64
		want      FairnessStat
	}{
		{"all fair", []float64{0.5, 1}, 1, FairnessStat{0.75, 1, 0}},
		{"one unfair", []float64{0.5, 1.5, 1, 3}, 1, FairnessStat{1.5, 3, 0.5}},
		{"shockwave threshold", []float64{1.04, 1.06}, 1.05, FairnessStat{1.05, 1.06, 0.5}},
	} {
		if got := Fairness(tc.rho, tc.threshold); math.Abs(got.Mean-tc.want.Mean) > 1e-12 || got.Max != tc.want.Max || got.Unfair != tc.want.Unfair {
			t.Errorf("%s: Fairness(%v, %v) = %+v, want %+v", tc.name, tc.rho, tc.threshold, got, tc.want)
		}
	}
}

func TestIsolatedTime(t *testing.T) {
	cl := []allocator.Model{{Name: "fast", GPUs: 4}, {Name: "slow", GPUs: 4}}
	job := func(gpus int, fast, slow float64) *workload.JobSpec {
		return &workload.JobSpec{GPUs: gpus, Work: 100, Rate: map[string]float64{"fast": fast, "slow": slow}}
	}
	for _, tc := range []struct {
		name string
		j    *workload.JobSpec
		n    float64
		want float64
	}{
		{"alone takes the fastest", job(1, 10, 5), 1, 10},
		{"8 jobs share: 1/2 fast + 1/2 slow", job(1, 10, 5), 8, 100 / 7.5},
		{"16 jobs: 1/4 + 1/4", job(1, 10, 5), 16, 100 / 3.75},
		{"fractional n", job(1, 10, 5), 5.5, 100 / (10*4/5.5 + 5*(1-4/5.5))},
		{"fits only slow", job(1, 0, 5), 1, 20},
		{"too big", job(8, 10, 5), 1, math.Inf(1)},
	} {
		if got := IsolatedTime(tc.j, cl, tc.n); math.Abs(got-tc.want) > 1e-9 && !(math.IsInf(got, 1) && math.IsInf(tc.want, 1)) {
			t.Errorf("%s: IsolatedTime = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAnalyseByHand: two 1-GPU jobs at t=0 on one fast and one slow GPU
// under heterogeneity-aware FIFO; every metric worked out by hand.
func TestAnalyseByHand(t *testing.T) {
	jobs := []workload.JobSpec{job("a", 0, 100, 1, "fast", 1.0, "slow", 0.5), job("b", 0, 100, 1, "fast", 1.0, "slow", 0.5)}
	lg, err := sim.Run(context.Background(), policy.NewFIFOPerf(policy.Options{}), &workload.SliceSource{Jobs: jobs}, sim.Config{Cluster: twoModels, RoundSeconds: 100})
	if err != nil {
		t.Fatal(err)
	}
	res, s := Analyse(lg, nil)
	// a: fast, done at 100. b: slow, 50 steps per round, done at 200.
	// Jobs present: 2 on [0,100), 1 on [100,200): N_avg a = 2, b = 1.5.
	// T_isolated(a, N=2) = 100 / (0.5*1 + 0.5*0.5) = 133.3; rho = 0.75.
	// T_isolated(b, N=1.5) = 100 / (2/3*1 + 1/3*0.5) = 120; rho = 5/3.
	// At arrival N = 2 for both: rho_arr(b) = 200/133.3 = 1.5.
	type row struct {
		JCT, NAvg, FTF, FTFArrival float64
		NArrival                   int
	}
	got := []row{}
	for _, r := range res {
		got = append(got, row{r.JCT, r.NAvg, r.FTF, r.FTFArrival, r.NArrival})
	}
	want := []row{{100, 2, 0.75, 0.75, 2}, {200, 1.5, 200.0 / 120, 1.5, 2}}
	if d := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); d != "" {
		t.Errorf("per-job (-want,+got):\n%s", d)
	}
	// Utilisation: 300 busy GPU-s over 2 rounds x 2 GPUs x 100 s.
	if s.JCT.Mean != 150 || s.Makespan != 200 || math.Abs(s.Utilisation-0.75) > 1e-12 || s.FTF.Unfair != 0.5 {
		t.Errorf("summary: JCT %v, makespan %v, utilisation %v, unfair %v", s.JCT.Mean, s.Makespan, s.Utilisation, s.FTF.Unfair)
	}
}

// job builds a workload.JobSpec fixture: rates are model, steps/s pairs.
func job(id string, arrival, work float64, gpus int, rates ...any) workload.JobSpec {
	j := workload.JobSpec{ID: id, Arrival: arrival, Work: work, GPUs: gpus, Rate: map[string]float64{}}
	for k := 0; k+1 < len(rates); k += 2 {
		j.Rate[rates[k].(string)] = rates[k+1].(float64)
	}
	return j
}

var twoModels = []allocator.Model{{Name: "fast", GPUs: 1}, {Name: "slow", GPUs: 1}}
