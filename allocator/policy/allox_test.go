package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestMatchSlotsAgainstHungarian checks the slot flow against the dense
// matching of jobs to single GPUs' positions that AlloX describes (every
// layer of every GPU a column), solved by the Hungarian method, on random
// small rounds: the same least cost, every job that fits some model
// matched, and no slot over its GPUs.
func TestMatchSlotsAgainstHungarian(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	for trial := range 3000 {
		n, m := 1+rng.IntN(14), 1+rng.IntN(4)
		gpus := make([]int, m)
		for i := range gpus {
			gpus[i] = rng.IntN(4) // 0: a model with no GPUs
		}
		ptime := make([][]float64, n)
		for j := range ptime {
			ptime[j] = make([]float64, m)
			for i := range ptime[j] {
				switch {
				case rng.IntN(5) == 0:
					ptime[j][i] = math.Inf(1)
				case trial%2 == 0:
					ptime[j][i] = float64(1 + rng.IntN(6)) // ties
				default:
					ptime[j][i] = 1 + 1000*rng.Float64()
				}
			}
		}
		model, layer, err := matchSlots(ptime, gpus)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		got, used := 0.0, map[[2]int]int{}
		for j := range ptime {
			if fits := fitsSome(ptime[j], gpus); fits != (model[j] >= 0) {
				t.Fatalf("trial %d: job %d fits a model: %v, matched to %d", trial, j, fits, model[j])
			}
			if model[j] < 0 {
				continue
			}
			if layer[j] < 1 || math.IsInf(ptime[j][model[j]], 1) {
				t.Fatalf("trial %d: job %d in layer %d of model %d where its time is %v", trial, j, layer[j], model[j], ptime[j][model[j]])
			}
			got += float64(layer[j]) * ptime[j][model[j]]
			used[[2]int{model[j], layer[j]}]++
		}
		for s, c := range used {
			if c > gpus[s[0]] {
				t.Fatalf("trial %d: %d jobs in layer %d of model %d, which has %d GPUs", trial, c, s[1], s[0], gpus[s[0]])
			}
		}
		if want := denseAlloX(ptime, gpus); math.Abs(got-want) > 1e-9*max(1, want) {
			t.Fatalf("trial %d: slot flow costs %v, the dense matching %v (ptime %v, gpus %v)", trial, got, want, ptime, gpus)
		}
	}
}

// denseAlloX is the least cost of AlloX's matching as its paper states it:
// the jobs that fit some model against every (GPU, layer) column, solved
// by the Hungarian method.
func denseAlloX(ptime [][]float64, gpus []int) float64 {
	type col struct{ model, layer int }
	var cols []col
	var rows [][]float64
	for j := range ptime {
		if fitsSome(ptime[j], gpus) {
			rows = append(rows, ptime[j])
		}
	}
	for i, g := range gpus {
		for l := 1; g > 0 && (l-1)*g < len(rows); l++ { // room for every job
			for range g {
				cols = append(cols, col{i, l})
			}
		}
	}
	const big = 1e12 // never chosen: each row fits a model with a column per job
	cost := make([][]float64, len(rows))
	for r, p := range rows {
		cost[r] = make([]float64, len(cols))
		for c, cl := range cols {
			cost[r][c] = big
			if !math.IsInf(p[cl.model], 1) {
				cost[r][c] = float64(cl.layer) * p[cl.model]
			}
		}
	}
	sum := 0.0
	for r, c := range hungarian(cost) {
		sum += cost[r][c]
	}
	return sum
}

// fitsSome reports whether a job of these times fits a model with GPUs.
func fitsSome(ptime []float64, gpus []int) bool {
	for i, g := range gpus {
		if g > 0 && !math.IsInf(ptime[i], 1) {
			return true
		}
	}
	return false
}

// TestHungarianBruteForce compares the matching with enumeration.
func TestHungarianBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(4)
		m := n + rng.IntN(3)
		cost := make([][]float64, n)
		for r := range cost {
			cost[r] = make([]float64, m)
			for c := range cost[r] {
				cost[r][c] = float64(rng.IntN(20))
			}
		}
		got := hungarian(cost)
		sum := 0.0
		used := map[int]bool{}
		for r, c := range got {
			if c < 0 || used[c] {
				t.Fatalf("trial %d: bad matching %v", trial, got)
			}
			used[c] = true
			sum += cost[r][c]
		}
		if best := bruteMatch(cost, 0, map[int]bool{}); math.Abs(sum-best) > 1e-9 {
			t.Fatalf("trial %d: hungarian %v, brute force %v on %v", trial, sum, best, cost)
		}
	}
}

func bruteMatch(cost [][]float64, r int, used map[int]bool) float64 {
	if r == len(cost) {
		return 0
	}
	best := math.Inf(1)
	for c := range cost[r] {
		if !used[c] {
			used[c] = true
			best = math.Min(best, cost[r][c]+bruteMatch(cost, r+1, used))
			used[c] = false
		}
	}
	return best
}

// hungarian returns, for each row of an n x m cost matrix (n <= m), the
// column of a minimum-cost matching (shortest augmenting paths with
// potentials, O(n^2 m)).
func hungarian(cost [][]float64) []int {
	n := len(cost)
	if n == 0 {
		return nil
	}
	m := len(cost[0])
	u := make([]float64, n+1)
	v := make([]float64, m+1)
	p := make([]int, m+1) // p[c] = row matched to column c (1-based), 0 = free
	way := make([]int, m+1)
	minv := make([]float64, m+1)
	used := make([]bool, m+1)
	for r := 1; r <= n; r++ {
		p[0] = r
		c0 := 0
		for c := range minv {
			minv[c] = math.Inf(1)
			used[c] = false
		}
		for {
			used[c0] = true
			r0, delta, c1 := p[c0], math.Inf(1), 0
			for c := 1; c <= m; c++ {
				if used[c] {
					continue
				}
				cur := cost[r0-1][c-1] - u[r0] - v[c]
				if cur < minv[c] {
					minv[c], way[c] = cur, c0
				}
				if minv[c] < delta {
					delta, c1 = minv[c], c
				}
			}
			for c := 0; c <= m; c++ {
				if used[c] {
					u[p[c]] += delta
					v[c] -= delta
				} else {
					minv[c] -= delta
				}
			}
			c0 = c1
			if p[c0] == 0 {
				break
			}
		}
		for c0 != 0 {
			c1 := way[c0]
			p[c0] = p[c1]
			c0 = c1
		}
	}
	out := make([]int, n)
	for k := range out {
		out[k] = -1
	}
	for c := 1; c <= m; c++ {
		if p[c] > 0 {
			out[p[c]-1] = c - 1
		}
	}
	return out
}

// BenchmarkAlloXMatch times AlloX's matching (what a change of the active
// jobs recomputes) at the FFT paper's scale: 4,000 jobs of Gavel's
// generator on 8 models of 125 GPUs (largeSnapshot), and at 20,000.
//
//	go test -run '^$' -bench AlloXMatch -benchmem -count 5 ./allocator/policy/
func BenchmarkAlloXMatch(b *testing.B) {
	for _, n := range []int{4000, 20000} {
		s := largeSnapshot(n, 125)
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := alloxMatch(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMatchSlotsRefusesNaN checks that a time that is not a number fails
// the matching with an error that names the job, not a panic.
func TestMatchSlotsRefusesNaN(t *testing.T) {
	ptime := [][]float64{{3, 4}, {math.NaN(), math.NaN()}}
	if _, _, err := matchSlots(ptime, []int{1, 1}); err == nil || !strings.Contains(err.Error(), "job 1") {
		t.Fatalf("got %v, want an error naming job 1", err)
	}
}
