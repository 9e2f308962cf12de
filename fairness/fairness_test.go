package fairness

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestFairRate(t *testing.T) {
	capacity := map[string]int{"V100": 4, "P100": 8, "K80": 16}
	tput := map[string]float64{"V100": 4, "P100": 2, "K80": 1}
	for _, tc := range []struct {
		name string
		gpus int
		n    int
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
