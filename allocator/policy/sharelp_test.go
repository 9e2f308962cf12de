package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// denseShares is solveShares' program as one dense LP (the formulation
// the tableau used to solve: a variable per column and t, a rate row and
// a (1a) row per job, a capacity row per model), solved by gonum's
// revised simplex. It returns the optimal t.
func denseShares(t *testing.T, s *Snapshot, w [][]float64, aware bool, need func(k int) float64) float64 {
	t.Helper()
	cols := columns(s, w, aware)
	var vars [][2]int // job, column
	for k := range cols {
		for c := range cols[k] {
			vars = append(vars, [2]int{k, c})
		}
	}
	nv := len(vars) + 1
	tv := len(vars)
	obj := make([]float64, nv)
	obj[tv] = 1
	var g [][]float64
	var h []float64
	for k := range cols {
		if len(cols[k]) == 0 {
			continue
		}
		rate, one := make([]float64, nv), make([]float64, nv)
		for v, kc := range vars {
			if kc[0] == k {
				rate[v] = -cols[k][kc[1]].w / need(k)
				one[v] = 1
			}
		}
		rate[tv] = 1
		g = append(g, rate, one)
		h = append(h, 0, 1)
	}
	for i := range s.Models {
		row := make([]float64, nv)
		for v, kc := range vars {
			row[v] = float64(s.Jobs[kc[0]].GPUs) * cols[kc[0]][kc[1]].split[i]
		}
		g = append(g, row)
		h = append(h, float64(s.Models[i].GPUs))
	}
	x, err := gonumMax(obj, g, h)
	if err != nil {
		t.Fatalf("gonum: %v", err)
	}
	return x[tv]
}

// randomShareSnapshot is a small random round: 1-4 models of 1-16 GPUs,
// 1-12 jobs of 1, 2, 4 or 8 GPUs with random rates on a random subset of
// the models (sometimes none), and random weights and needs.
func randomShareSnapshot(rng *rand.Rand) (*Snapshot, [][]float64, func(int) float64) {
	s := &Snapshot{RoundSeconds: 360}
	m := 1 + rng.IntN(4)
	for i := 0; i < m; i++ {
		s.Models = append(s.Models, Model{Name: fmt.Sprintf("m%d", i), GPUs: 1 + rng.IntN(16)})
	}
	n := 1 + rng.IntN(12)
	w := make([][]float64, n)
	needs := make([]float64, n)
	for k := 0; k < n; k++ {
		j := Job{ID: fmt.Sprintf("j%d", k), GPUs: 1 << rng.IntN(4), Work: 100, RatePerSecond: map[string]float64{}}
		w[k] = make([]float64, m)
		for i := range s.Models {
			if rng.Float64() < 0.7 {
				r := 0.1 + 3*rng.Float64()
				if rng.Float64() < 0.2 {
					r = 1 // ties between models
				}
				j.RatePerSecond[s.Models[i].Name] = r
				if j.Fits(&s.Models[i]) {
					w[k][i] = r * float64(j.GPUs)
				}
			}
		}
		s.Jobs = append(s.Jobs, j)
		needs[k] = 0.2 + 2*rng.Float64()
	}
	return s, w, func(k int) float64 { return needs[k] }
}

// TestSharesMatchGonum checks the column generation against gonum's
// simplex on the dense program: the same max-min value on random small
// rounds, both heterogeneity-aware and agnostic, and shares that respect
// every constraint and give each job at least that value.
func TestSharesMatchGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 5))
	for trial := 0; trial < 400; trial++ {
		s, w, need := randomShareSnapshot(rng)
		aware := trial%2 == 0
		cols := columns(s, w, aware)
		anyCol := false
		for k := range cols {
			anyCol = anyCol || len(cols[k]) > 0
		}
		x, _, err := solveShares(s, w, aware, need, nil)
		if !anyCol {
			if err == nil {
				t.Fatalf("trial %d: no job can run, want an error", trial)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		want := denseShares(t, s, w, aware, need)
		got := math.Inf(1)
		use := make([]float64, len(s.Models))
		for k := range s.Jobs {
			sum, r := 0.0, 0.0
			for i, v := range x[k] {
				if v < -1e-12 {
					t.Fatalf("trial %d: job %d share %v < 0", trial, k, v)
				}
				if v > 0 && w[k][i] == 0 && aware {
					t.Fatalf("trial %d: job %d has a share on model %d it cannot use", trial, k, i)
				}
				sum += v
				r += v * w[k][i]
				use[i] += v * float64(s.Jobs[k].GPUs)
			}
			if sum > 1+1e-9 {
				t.Fatalf("trial %d: job %d shares sum to %v", trial, k, sum)
			}
			if len(cols[k]) > 0 {
				got = math.Min(got, r/need(k))
			}
		}
		for i, u := range use {
			if u > float64(s.Models[i].GPUs)*(1+1e-9)+1e-9 {
				t.Fatalf("trial %d: model %d uses %v of %d GPUs", trial, i, u, s.Models[i].GPUs)
			}
		}
		if math.Abs(got-want) > 1e-7*math.Max(1, want) {
			t.Errorf("trial %d (aware %v, %d jobs, %d models): max-min %v, gonum %v", trial, aware, len(s.Jobs), len(s.Models), got, want)
		}
	}
}
