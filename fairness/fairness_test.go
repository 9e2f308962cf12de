package fairness

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestFairRate(t *testing.T) {
	capacity := map[string]int{"V100": 4, "P100": 8, "K80": 16}
	tput := map[string]float64{"V100": 4, "P100": 2, "K80": 1}
	for _, tc := range []struct {
		name string
		gpus int
		n    float64
		want float64
	}{
		// Alone: the fastest model all the time.
		{"alone", 1, 1, 4},
		// 8 jobs of 1 GPU: V100 half the time, P100 the other half.
		{"eight sharers", 1, 8, 0.5*4 + 0.5*2},
		// 16 sharers: V100 1/4, P100 1/2, K80 1/4 of the time.
		{"sixteen sharers", 1, 16, 0.25*4 + 0.5*2 + 0.25*1},
		// 32 sharers: 1/8 + 1/4 + 1/2 of the time, the rest idle.
		{"thirty-two sharers", 1, 32, 0.125*4 + 0.25*2 + 0.5*1},
		// 8 GPUs: V100 cannot hold it at all.
		{"gang larger than a model", 8, 2, 0.5*2 + 0.5*1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FairRate(Job{ID: "j", GPUs: tc.gpus, Work: 1, Throughput: tput}, capacity, tc.n)
			if !approx(got, tc.want) {
				t.Fatalf("FairRate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTauRejectsJobThatFitsNothing(t *testing.T) {
	_, err := Tau(Job{ID: "big", GPUs: 32, Work: 1, Throughput: map[string]float64{"V100": 1}}, map[string]int{"V100": 4}, 1)
	if err == nil {
		t.Fatal("Tau accepted a job no model can hold")
	}
	// A rate so small that tau overflows is rejected too: JSON cannot
	// store an infinite tau.
	tiny := Job{ID: "slow", GPUs: 1, Work: 1e12, Throughput: map[string]float64{"V100": 1e-300}}
	if tau, err := Tau(tiny, map[string]int{"V100": 1}, 1); err == nil {
		t.Fatalf("Tau = %v, want an error for a reference that never finishes", tau)
	}
}

// weighted builds one-GPU jobs arriving at round 0 with the given work,
// throughput and weights.
func weighted(work float64, tput map[string]float64, weights ...float64) []Job {
	jobs := make([]Job, len(weights))
	for k, w := range weights {
		jobs[k] = Job{ID: string(rune('a' + k)), GPUs: 1, Work: work, Throughput: tput, Weight: w}
	}
	return jobs
}

func TestReconcileWeightedShares(t *testing.T) {
	v100 := map[string]float64{"V100": 1}
	for _, tc := range []struct {
		name     string
		capacity map[string]int
		jobs     []Job
		wantTau  map[string]float64
		// wantWeight is the weight each job's record keeps (0 = 1).
		wantWeight map[string]float64
	}{
		// The paper: two jobs share one V100 half and half.
		{name: "no weights", capacity: map[string]int{"V100": 1}, jobs: weighted(12, v100, 0, 0),
			wantTau: map[string]float64{"a": 24, "b": 24}},
		{name: "all weights 1", capacity: map[string]int{"V100": 1}, jobs: weighted(12, v100, 1, 1),
			wantTau: map[string]float64{"a": 24, "b": 24}},
		{name: "equal weights 3", capacity: map[string]int{"V100": 1}, jobs: weighted(12, v100, 3, 3),
			wantTau: map[string]float64{"a": 24, "b": 24}, wantWeight: map[string]float64{"a": 3, "b": 3}},
		// Weight 2 against 1: shares 2/3 and 1/3 of the V100.
		{name: "2 vs 1", capacity: map[string]int{"V100": 1}, jobs: weighted(12, v100, 2, 1),
			wantTau: map[string]float64{"a": 18, "b": 36}, wantWeight: map[string]float64{"a": 2}},
		// A negative weight is "unset": 1.
		{name: "non-positive weight means 1", capacity: map[string]int{"V100": 1}, jobs: weighted(12, v100, -4, 1),
			wantTau: map[string]float64{"a": 24, "b": 24}},
		// Shares 3/4 and 1/4 of four V100s: each is at least one whole
		// GPU, so both run all the time (g_i is capped at 1).
		{name: "share capped at a whole GPU", capacity: map[string]int{"V100": 4}, jobs: weighted(12, v100, 3, 1),
			wantTau: map[string]float64{"a": 12, "b": 12}, wantWeight: map[string]float64{"a": 3}},
		// One V100 (4 units) and one K80 (1 unit). a's 3/4 share: V100
		// 3/4 of the time, K80 the other 1/4: rate 3.25. b's 1/4 share:
		// V100 1/4, K80 1/4, idle 1/2: rate 1.25.
		{name: "fastest model first", capacity: map[string]int{"V100": 1, "K80": 1},
			jobs: []Job{
				{ID: "a", GPUs: 1, Work: 13, Throughput: map[string]float64{"V100": 4, "K80": 1}, Weight: 3},
				{ID: "b", GPUs: 1, Work: 5, Throughput: map[string]float64{"V100": 4, "K80": 1}, Weight: 1},
			},
			wantTau: map[string]float64{"a": 4, "b": 4}, wantWeight: map[string]float64{"a": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s State
			if rej := s.Reconcile(tc.jobs, tc.capacity); len(rej) != 0 {
				t.Fatalf("rejected %v", rej)
			}
			gotTau, gotWeight := map[string]float64{}, map[string]float64{}
			for id, st := range s.Jobs {
				gotTau[id] = st.Tau
				if st.Weight != 0 {
					gotWeight[id] = st.Weight
				}
			}
			// Exact comparison: these shares are exact in binary.
			if diff := cmp.Diff(tc.wantTau, gotTau); diff != "" {
				t.Errorf("tau (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWeight, gotWeight, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("recorded weights (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestWeightsOfOneAreThePaper checks, on a cluster where the shares are not
// exact in binary, that weights of 1 give bit for bit the ledger of jobs
// without weights, and that both equal the paper's 1/|A(t)| reference.
func TestWeightsOfOneAreThePaper(t *testing.T) {
	capacity := map[string]int{"V100": 3, "P100": 5, "K80": 7}
	tput := map[string]float64{"V100": 3.3, "P100": 1.7, "K80": 0.9}
	var jobs []Job
	for k := range 7 {
		jobs = append(jobs, Job{ID: fmt.Sprint("j", k), Arrival: k, GPUs: 1 + k%3, Work: 10 + float64(k), Throughput: tput})
	}
	var plain, ones State
	plain.Reconcile(jobs, capacity)
	for k := range jobs {
		jobs[k].Weight = 1
	}
	ones.Reconcile(jobs, capacity)
	if diff := cmp.Diff(plain, ones); diff != "" {
		t.Fatalf("weights of 1 changed the ledger (-unweighted,+weights 1):\n%s", diff)
	}
	for _, j := range jobs {
		// The paper's reference, written out: g_i = min(1, Y_i/(n d_j)).
		want := float64(j.Arrival) + j.Work/fairRate(j, capacity, float64(len(jobs)))
		if got := ones.Jobs[j.ID].Tau; got != want {
			t.Errorf("tau(%s) = %v, want %v (1/|A(t)| share)", j.ID, got, want)
		}
	}
}

func TestReconcileRecomputesOnWeightChange(t *testing.T) {
	capacity := map[string]int{"V100": 1}
	jobs := weighted(12, map[string]float64{"V100": 1}, 1, 1)
	var s State
	s.Reconcile(jobs, capacity)
	s.Advance(0, nil)
	s.Advance(1, nil)
	rho := s.Jobs["a"].Rho
	if rho == 0 {
		t.Fatal("rho did not grow while waiting")
	}
	for _, step := range []struct {
		weight     float64
		gpus       int
		tauA, tauB float64
	}{
		{2, 1, 18, 36}, // a's weight rises: both taus move, rho stays
		{2, 2, 18, 36}, // same set, same weights: tau is kept (capacity alone does not recompute)
		{0, 2, 12, 12}, // back to unweighted: half of two V100s each, a whole GPU
	} {
		jobs[0].Weight = step.weight
		capacity["V100"] = step.gpus
		s.Reconcile(jobs, capacity)
		if a, b := s.Jobs["a"], s.Jobs["b"]; a.Tau != step.tauA || b.Tau != step.tauB || a.Rho != rho {
			t.Errorf("weight %v, %d GPUs: tau a=%v b=%v rho(a)=%v, want %v %v %v", step.weight, step.gpus, a.Tau, b.Tau, a.Rho, step.tauA, step.tauB, rho)
		}
	}
}

func TestReconcileAndAdvance(t *testing.T) {
	capacity := map[string]int{"V100": 2}
	a := Job{ID: "a", Arrival: 0, GPUs: 1, Work: 10, Throughput: map[string]float64{"V100": 1}}
	b := Job{ID: "b", Arrival: 2, GPUs: 1, Work: 20, Throughput: map[string]float64{"V100": 1}}
	var s State
	if rej := s.Reconcile([]Job{a}, capacity); len(rej) != 0 {
		t.Fatalf("rejected %v", rej)
	}
	// Alone, a gets a whole V100: tau = 0 + 10/1.
	if got := s.Jobs["a"].Tau; got != 10 {
		t.Fatalf("tau(a) = %v, want 10", got)
	}
	// Round 0: a gets nothing. mu = 0 at t = a_j, so rho stays 0.
	s.Advance(0, nil)
	if s.Jobs["a"].Rho != 0 || s.Round != 1 {
		t.Fatalf("after round 0: %+v", s)
	}
	// Round 1: still nothing. mu = 1/10, f = 10/10 = 1: rho = 0.1.
	s.Advance(1, nil)
	if got := s.Jobs["a"].Rho; !approx(got, 0.1) {
		t.Fatalf("rho(a) = %v, want 0.1", got)
	}
	// b arrives: two sharers of two V100s: each still a whole GPU, so tau
	// is unchanged for a, and b's is 2 + 20.
	s.Reconcile([]Job{a, b}, capacity)
	if s.Jobs["a"].Tau != 10 || s.Jobs["b"].Tau != 22 || s.Jobs["a"].Rho != 0.1 {
		t.Fatalf("after b arrives: %+v", s.Jobs)
	}
	// Round 2: a gets 3 units, more than its share: rho falls to 0, never below.
	s.Advance(2, map[string]float64{"a": 3})
	if got := s.Jobs["a"].Rho; got != 0 {
		t.Fatalf("rho(a) = %v, want 0 (clamped)", got)
	}
	// a finishes: the ledger drops it.
	s.Reconcile([]Job{b}, capacity)
	if _, ok := s.Jobs["a"]; ok || len(s.Jobs) != 1 {
		t.Fatalf("a still in the ledger: %+v", s.Jobs)
	}
	// The state survives a JSON round trip unchanged (the allocator keeps
	// it in Consul).
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Fatalf("round trip (-want,+got):\n%s", diff)
	}
}

func TestSummarizeAndCDF(t *testing.T) {
	got := Summarize([]float64{0.5, 1, 1.5, math.NaN(), 3})
	want := Summary{N: 4, Mean: 1.5, Max: 3, Unfair: 0.5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Summarize (-want,+got):\n%s", diff)
	}
	x, p := CDF([]float64{3, 1, math.NaN(), 2})
	if diff := cmp.Diff([]float64{1, 2, 3}, x); diff != "" {
		t.Fatalf("CDF x (-want,+got):\n%s", diff)
	}
	if !approx(p[0], 1.0/3) || p[2] != 1 {
		t.Fatalf("CDF p = %v", p)
	}
	if !math.IsNaN(FTF(1, 0)) || FTF(3, 2) != 1.5 {
		t.Fatal("FTF")
	}
	if got := IsolatedRounds(Job{GPUs: 1, Work: 10, Throughput: map[string]float64{"V100": 2}}, map[string]int{"V100": 1}, 2.5); !approx(got, 12.5) {
		t.Fatalf("IsolatedRounds = %v, want 12.5 (1/2.5 of a GPU at 2 units per round)", got)
	}
}

func TestBehind(t *testing.T) {
	// Arrival 2, tau 22, work 40: the reference does f = 2 units a round.
	st := JobState{Arrival: 2, Work: 40, Tau: 22}
	for _, tc := range []struct {
		t          int
		done, want float64
	}{
		{2, 0, 0},   // arrival: the reference has done nothing yet
		{12, 8, 12}, // the reference has done 20
		{12, 20, 0}, // on the reference
		{12, 30, 0}, // ahead: no debt, never negative
		{22, 0, 40}, // the fair finish passed with nothing done
	} {
		if got := st.Behind(tc.t, tc.done); got != tc.want {
			t.Errorf("Behind(%d, %v) = %v, want %v", tc.t, tc.done, got, tc.want)
		}
	}
}
