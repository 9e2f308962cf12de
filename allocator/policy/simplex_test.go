package policy

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// gonumMax is tableauMaxDual's problem solved by gonum's revised simplex, the
// independent answer the tableau is checked against.
func gonumMax(obj []float64, g [][]float64, h []float64) ([]float64, error) {
	n, m := len(obj), len(g)
	a := mat.NewDense(m, n+m, nil)
	for r, row := range g {
		for c, v := range row {
			if v != 0 {
				a.Set(r, c, v)
			}
		}
		a.Set(r, n+r, 1) // the slack
	}
	c := make([]float64, n+m)
	for k, v := range obj {
		c[k] = -v
	}
	basis := make([]int, m)
	for r := range basis {
		basis[r] = n + r
	}
	_, x, err := lp.Simplex(c, a, append([]float64(nil), h...), 1e-10, basis)
	if err != nil {
		return nil, err
	}
	return x[:n], nil
}

// TestTableauMatchesGonum compares the tableau simplex (values and duals) with gonum's on
// seeded random packing LPs of the shape Gavel's policies build.
func TestTableauMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 60; trial++ {
		n, m := 2+rng.IntN(30), 1+rng.IntN(20)
		obj := make([]float64, n)
		for c := range obj {
			obj[c] = rng.Float64()
		}
		g := make([][]float64, m)
		h := make([]float64, m)
		for r := range g {
			g[r] = make([]float64, n)
			for c := range g[r] {
				if rng.Float64() < 0.5 {
					g[r][c] = rng.Float64() * 4
				}
			}
			h[r] = rng.Float64() * 10
			if rng.Float64() < 0.2 {
				h[r] = 0 // degenerate rows, as max-min constraints are
			}
		}
		for c := 0; c < n; c++ { // keep it bounded
			row := make([]float64, n)
			row[c] = 1
			g = append(g, row)
			h = append(h, 1+rng.Float64())
		}
		a, y, err := tableauMaxDual(obj, g, h)
		if err != nil {
			t.Fatalf("trial %d: tableau: %v", trial, err)
		}
		b, err := gonumMax(obj, g, h)
		if err != nil {
			t.Fatalf("trial %d: gonum: %v", trial, err)
		}
		va, vb := 0.0, 0.0
		for c := range obj {
			va += obj[c] * a[c]
			vb += obj[c] * b[c]
		}
		dual := 0.0 // strong duality: h.y equals the optimum
		for r := range h {
			dual += h[r] * y[r]
		}
		if math.Abs(dual-vb) > 1e-7*math.Max(1, math.Abs(vb)) {
			t.Errorf("trial %d: dual value %v, gonum %v", trial, dual, vb)
		}
		if math.Abs(va-vb) > 1e-7*math.Max(1, math.Abs(vb)) {
			t.Errorf("trial %d: objective tableau %v, gonum %v", trial, va, vb)
		}
		for r := range g {
			lhs := 0.0
			for c := range a {
				lhs += g[r][c] * a[c]
			}
			if lhs > h[r]+1e-7 {
				t.Errorf("trial %d: row %d violated: %v > %v", trial, r, lhs, h[r])
			}
		}
	}
}
